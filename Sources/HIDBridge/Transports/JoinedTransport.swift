import CDatagrams

#if canImport(Glibc)
import Glibc
#endif

/// One key plugged into several hosts at once: its one CTAPHID machine behind several report transports
/// (`serve --transport uhid --transport usbip`). Reports from any host reach the key; each answer goes to the host
/// that owns its channel (``ChannelRoutes``).
///
/// Each `receiveAll` hands over the reports of one host only, so that an answer made while they are handled (the
/// broadcast channel's `INIT` answer) goes back to that host; another host with reports waiting keeps the epoll set
/// readable, and the loop comes straight back for them.
///
/// A power cycle of the key reaches every host: the key lost power. A USB/IP host detaching it is not one here: the
/// other host still powers the key, so only the detached host's requests end (a CANCEL on each of its channels).
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
                case .report(let report):
                    switch routes.inbound(report, from: index) {
                    case .deliver: out.append(event)
                    case .refuse(let answer): members[index].send(answer)
                    case .drop: break
                    }
                case .powerCycle:
                    routes.reset()
                    out.append(event)
                case .detached:
                    // The other hosts keep the key powered: only this host's requests end.
                    out.append(.note("the key stays plugged into \(otherHosts(than: index))"))
                    out += routes.hostLeft(index).map(TransportEvent.report)
                case .note:
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

    package func send(_ report: [UInt8]) {
        guard let index = routes.outbound(report) else { return }
        members[index].send(report)
    }

    package func send(batch reports: [[UInt8]]) {
        // The reports of one answer share a channel, hence a host; keep them together for that host's batch send.
        var run: [[UInt8]] = []
        var runHost: Int?
        for report in reports {
            let host = routes.outbound(report)
            if host != runHost, let runHost, !run.isEmpty { members[runHost].send(batch: run) }
            if host != runHost { run.removeAll() }
            runHost = host
            if host != nil { run.append(report) }
        }
        if let runHost, !run.isEmpty { members[runHost].send(batch: run) }
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
