import CDatagrams
package import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// One key plugged into several hosts at once (`serve --transport uhid --transport usbip`): several report
/// transports in front of one key, which has a CTAPHID machine per host (``VirtualKey/addHost(channelKey:)``). Each
/// report from a member is the report of host `index` (the member's place); each answer goes to the host its machine
/// serves, and a host reaches only the channels the key gave it (``ChannelRoutes``).
///
/// A power cycle of the key reaches every host: the key lost power. A USB/IP host detaching it is not one here: the
/// other host still powers the key, so only the detached host's request and CTAPHID state end
/// (``VirtualKey/hostLeft(_:)``).
package final class JoinedTransport: ReportTransport {
    package let members: [any ReportTransport]
    var routes = ChannelRoutes()
    /// The member asked first next time, so that a busy host does not starve the others.
    var next = 0
    let epoll: Int32

    package init(_ members: [any ReportTransport]) throws(TransportError) {
        self.members = members
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else {
            throw TransportError("cannot create an epoll set: \(String(cString: strerror(errno)))")
        }
        for member in members where member.descriptor >= 0 {
            var event = epoll_event()
            event.events = EPOLLIN.rawValue
            event.data.fd = member.descriptor
            guard epoll_ctl(epoll, EPOLL_CTL_ADD, member.descriptor, &event) == 0 else {
                let reason = String(cString: strerror(errno))
                close(epoll)
                throw TransportError("cannot watch \(member.summary): \(reason)")
            }
        }
    }

    deinit { close(epoll) }

    package var descriptor: Int32 { epoll }

    package var summary: String { members.map(\.summary).joined(separator: " and ") }

    package func receive() -> TransportEvent? { receiveAll().first }

    package func receiveAll() -> [TransportEvent] {
        for offset in members.indices {
            let index = (next + offset) % members.count
            let events = members[index].receiveAll()
            guard !events.isEmpty else { continue }
            next = (index + 1) % members.count
            var out: [TransportEvent] = []
            for event in events {
                switch event {
                case .report(let report, _):
                    switch routes.inbound(report, from: index) {
                    case .deliver: out.append(.report(report, host: index))
                    case .refuse(let answer): members[index].send(answer)
                    case .drop: break
                    }
                case .powerCycle:
                    routes.reset()
                    out.append(event)
                case .detached:
                    // The other hosts keep the key powered: only this host's requests end.
                    out.append(.note("the key stays plugged into \(otherHosts(than: index))"))
                    routes.hostLeft(index)
                    out.append(.hostLeft(index))
                case .note, .hostLeft:
                    out.append(event)
                }
            }
            return out
        }
        return []
    }

    func otherHosts(than index: Int) -> String {
        members.indices.filter { $0 != index }.map { members[$0].summary }.joined(separator: " and ")
    }

    /// A report with no host named goes to the first host: the key names the host of every report it sends.
    package func send(_ report: [UInt8]) { send(batch: [report], host: 0) }

    package func send(batch reports: [[UInt8]]) { send(batch: reports, host: 0) }

    package func send(batch reports: [[UInt8]], host: Int) {
        guard members.indices.contains(host) else { return }
        let out = reports.filter { routes.outbound($0, to: host) }
        if !out.isEmpty { members[host].send(batch: out) }
    }

    package func replug() throws(TransportError) {
        routes.reset()
        for member in members { try member.replug() }
    }

    package func unplug() throws(TransportError) {
        routes.reset()
        for member in members { try member.unplug() }
    }

    package func plug() throws(TransportError) {
        for member in members { try member.plug() }
    }
}
