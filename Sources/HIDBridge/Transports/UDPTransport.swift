import CDatagrams
import CTAPCBOR
package import VirtualKey

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An error from a transport, with a message that says what to do.
package struct TransportError: Error, CustomStringConvertible, Sendable {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Who a key's UDP socket listens to (`serve`); a plain socket (a client's, a test's) has none.
package struct UDPKeyPolicy: Sendable {
    /// Accept datagrams from sockets of other local users (`--udp-any-user`); by default only the key's own
    /// user's sockets are heard.
    package var anyUser = false
    /// The power-cycle datagram unplugs the key (`--udp-power-cycle`).
    package var powerCycleDatagram = true
    /// Senders that are not local sockets are heard (`--allow-remote` with a non-loopback `--host`).
    package var remote = false
    /// Answers go to this port of the sender's address, not to the sender's port (`--udp-reply-port`: solo1's
    /// simulation answers to 7112, and clients written for it listen there).
    package var replyPort: UInt16?

    package init(anyUser: Bool = false, powerCycleDatagram: Bool = true, remote: Bool = false, replyPort: UInt16? = nil)
    {
        self.anyUser = anyUser
        self.powerCycleDatagram = powerCycleDatagram
        self.remote = remote
        self.replyPort = replyPort
    }
}

/// The UDP transport of solo1's simulation: one datagram is one raw 64-byte CTAPHID report, without a
/// report-id byte.
///
/// A key's socket (with a ``UDPKeyPolicy``) sends each transaction's answer only to the sender of its
/// initialization packet (``UDPRouter``) and hears only its own user's sockets; a plain socket answers the latest
/// sender.
package final class UDPTransport: ReportTransport {
    package let host: String
    package let port: UInt16
    let fd: Int32
    var peer = sockaddr_in()
    var hasPeer = false
    /// Whether batches go out with UDP segmentation offload; cleared when the kernel refuses it.
    var segments: Bool
    /// Nil for a plain socket.
    package let policy: UDPKeyPolicy?
    var router = UDPRouter()
    let clock = ContinuousClock()
    let start: ContinuousClock.Instant

    /// Binds a UDP socket on `host:port` (IPv4 dotted quad or `localhost`).
    package init(host: String, port: UInt16, policy: UDPKeyPolicy? = nil) throws(TransportError) {
        self.host = host
        self.policy = policy
        start = clock.now
        guard let numeric = IPv4.numericHost(host) else {
            throw TransportError("invalid --host '\(host)': give an IPv4 address such as 127.0.0.1")
        }
        let fd = IPv4.datagramSocket()
        guard fd >= 0 else { throw TransportError("cannot create a UDP socket: \(IPv4.errnoText())") }
        guard IPv4.bindTo(fd, IPv4.address(numeric, port: port)) else {
            let reason = IPv4.errnoText()
            close(fd)
            throw TransportError("cannot listen on udp \(host):\(port): \(reason)")
        }
        self.port = IPv4.localPort(fd)
        self.fd = fd
        segments = fidosim_udp_segmentation_supported(fd) != 0
        if policy != nil {
            // Room for a flood's datagrams while the loop works on a batch (the kernel counts a small
            // datagram's whole buffer, a few KiB on loopback: the default holds about 60), so that the owner's
            // datagrams are not dropped with it. Capped by net.core.rmem_max.
            var size: Int32 = 4 << 20
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if let policy, !policy.anyUser { _ = kernelSockets }
    }

    deinit { close(fd) }

    /// The file descriptor to poll for incoming datagrams.
    package var descriptor: Int32 { fd }

    /// The exact datagram that power-cycles the key (solo1's simulation convention).
    package static let powerCycleDatagram: [UInt8] = Hex.bytes(
        "ac1052ca95e569de69e02ebff333485f13f9b2da34c5a8a340526697a9ab2e0b"
            + "394d8d04973c134005be1a0140bff6045bb26eb77a73eaa47813f6b49a7250dc"
    )!

    package var summary: String { "udp \(host):\(port)" }

    /// Reads one datagram without blocking: a report, or the power-cycle datagram.
    package func receive() -> TransportEvent? {
        guard policy != nil else { return receiveDatagram().map(Self.event) }
        if pending.isEmpty { pending = receiveAll() }
        return pending.isEmpty ? nil : pending.removeFirst()
    }

    /// A key socket's events read by ``receive()`` and not yet returned.
    var pending: [TransportEvent] = []

    /// What a datagram is: the power-cycle datagram, or a report.
    static func event(_ datagram: [UInt8]) -> TransportEvent {
        datagram == powerCycleDatagram ? .powerCycle : .report(datagram)
    }

    /// Reads the waiting datagrams, up to ``receiveBatch`` in one recvmmsg (a flood keeps the socket full: the rest
    /// is read when the loop comes back, which it does at once, the socket being readable). On a plain socket the
    /// latest sender becomes the peer, as with ``receive()``; a key's socket passes each datagram through its policy
    /// and router.
    package func receiveAll() -> [TransportEvent] {
        let stride = Self.receiveStride
        let got = receiveBuffer.withUnsafeMutableBufferPointer { bytes in
            fidosim_receive_datagrams(
                fd,
                bytes.baseAddress,
                UInt32(stride),
                &receiveLengths,
                UInt32(Self.receiveBatch),
                &froms
            )
        }
        guard got > 0 else { return [] }
        var events: [TransportEvent] = []
        let now = clock.now - start
        batchOwners.removeAll(keepingCapacity: true)
        defer { batchOwners.removeAll(keepingCapacity: true) }
        if let policy, !policy.anyUser { askKernel(count: Int(got)) }
        for i in 0..<Int(got) {
            guard let policy else {
                peer = froms[i]
                hasPeer = true
                events.append(Self.event(Array(receiveBuffer[i * stride..<i * stride + Int(receiveLengths[i])])))
                continue
            }
            let sender = UDPPeer(
                address: UInt32(bigEndian: froms[i].sin_addr.s_addr),
                port: UInt16(bigEndian: froms[i].sin_port)
            )
            let datagram = Array(receiveBuffer[i * stride..<i * stride + Int(receiveLengths[i])])
            guard router.onGivenChannel(datagram) || allows(sender, now: now, notes: &events) else { continue }
            if policy.powerCycleDatagram && datagram == Self.powerCycleDatagram {
                events.append(.powerCycle)
                continue
            }
            switch router.inbound(datagram, from: sender, now: now) {
            case .deliver: events.append(.report(datagram))
            case .refuse(let reply): send(group: [reply], to: froms[i])
            case .ignore: break
            }
        }
        return events
    }

    /// Whether `sender` may talk to the key (``PeerAccess``): the owners of every socket on its port, asked of the
    /// kernel (``KernelSockets``) once for the batch of datagrams, after it arrived (``askKernel(count:)``), and
    /// nothing is remembered beyond it: a port the owner's client closed is nobody's the moment another socket
    /// takes it. Reports on a channel the key gave are not asked about: the channel (32 bits from a keyed
    /// permutation, told only to a sender who passed here) is the proof, and a sender who cannot read the answers
    /// never learns one.
    func allows(_ sender: UDPPeer, now: Duration, notes: inout [TransportEvent]) -> Bool {
        if access.admitsWithoutLookup(loopback: sender.isLoopback) { return true }
        let owners: [UInt32]?
        if let known = batchOwners[sender.port] {
            owners = known
        } else {
            owners = kernelSockets.datagramOwners(port: sender.port)
            batchOwners[sender.port] = .some(owners)
        }
        let peer = PeerAccess.Peer.ip(
            loopback: sender.isLoopback,
            socketOwners: owners ?? [],
            kernelAnswered: owners != nil
        )
        if access.admits(peer) { return true }
        // Refused: the reason is worked out only for the line logged (at most one a second).
        guard refusalNotes.due(now: now), let refusal = access.refusal(of: peer) else {
            refusalNotes.skip()
            return false
        }
        if let line = refusalNotes.line(PeerAccess.note(door: "udp", peer: "\(sender)", refusal: refusal), now: now) {
            notes.append(.note(line))
        }
        return false
    }

    /// Asks the kernel, before the batch's first `count` datagrams are handled, about the source ports of those that
    /// are not on a channel the key gave: one question per port for a few ports, and for more (a flood from new
    /// ports) one walk over every UDP socket for the whole batch, so that a batch costs at most that.
    func askKernel(count: Int) {
        var ports = Set<UInt16>()
        for i in 0..<count {
            let start = i * Self.receiveStride
            let datagram = receiveBuffer[start..<start + Int(min(receiveLengths[i], UInt32(Self.receiveStride)))]
            guard !router.onGivenChannel(Array(datagram)) else { continue }
            let sender = UInt32(bigEndian: froms[i].sin_addr.s_addr)
            if access.admitsWithoutLookup(loopback: sender >> 24 == 127) { continue }
            ports.insert(UInt16(bigEndian: froms[i].sin_port))
        }
        guard ports.count > Self.portsAskedOneByOne else { return }
        let answers = kernelSockets.datagramOwners(ports: ports)
        for port in ports { batchOwners[port] = .some(answers.map { $0[port] ?? [] }) }
    }

    /// Up to this many source ports in a batch are asked about one by one; more with one walk of the whole table.
    static let portsAskedOneByOne = 4

    /// What the kernel said of each source port in the batch being handled: the owners of its sockets, nil inside
    /// when the kernel could not be asked (empty between batches).
    var batchOwners: [UInt16: [UInt32]?] = [:]
    var refusalNotes = RefusalNotes()
    /// Who may use the key (the policy's switches, this process's user).
    lazy var access = PeerAccess(
        owner: geteuid(),
        anyLocalUser: policy?.anyUser ?? false,
        allowRemote: policy?.remote ?? false
    )

    /// The kernel's answers about sockets, through a netlink socket opened once: the lookup must work when the
    /// process has no descriptor left to open one (a flood of control connections).
    lazy var kernelSockets = KernelSockets()

    /// Bytes kept for each datagram by ``receiveAll()``: a report and one more, so that a longer datagram shows.
    static let receiveStride = 65
    /// Datagrams read by one recvmmsg (a request's reports come in one call; a flood's are handled 512 at a time).
    static let receiveBatch = 512
    /// ``receiveAll()``'s buffers, made once.
    private var receiveBuffer = [UInt8](repeating: 0, count: receiveStride * receiveBatch)
    private var receiveLengths = [UInt32](repeating: 0, count: receiveBatch)
    private var froms = [sockaddr_in](repeating: sockaddr_in(), count: receiveBatch)

    /// Nothing to unplug on UDP; no transaction survives the power cycle.
    package func replug() throws(TransportError) { router.release() }

    /// Reads one datagram without blocking; nil when none is waiting. Oversized datagrams are truncated
    /// to 65 bytes so that the framing layer sees and drops them.
    package func receiveDatagram() -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 65)
        var from = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let count = buffer.withUnsafeMutableBytes { raw in
            withUnsafeMutablePointer(to: &from) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(fd, raw.baseAddress, raw.count, Int32(MSG_DONTWAIT), $0, &length)
                }
            }
        }
        guard count >= 0 else { return nil }
        peer = from
        hasPeer = true
        return Array(buffer.prefix(count))
    }

    /// Sends one report: to the latest sender (a plain socket) or to the client whose transaction it belongs to.
    package func send(_ report: [UInt8]) { send(batch: [report]) }

    /// Sends the reports together: the peer, woken by the first, finds the rest already queued instead of
    /// sleeping and waking again for each. A plain socket sends to the latest sender; a key's socket sends each
    /// report to the client whose transaction it belongs to.
    package func send(batch reports: [[UInt8]]) {
        guard policy != nil else {
            guard hasPeer else { return }
            return send(group: reports, to: peer)
        }
        let now = clock.now - start
        var group: [[UInt8]] = []
        var destination: UDPPeer?
        for report in reports {
            let to = router.outbound(report, now: now)
            if to != destination, let destination, !group.isEmpty {
                send(group: group, to: Self.address(destination, replyPort: policy?.replyPort))
            }
            if to != destination { group.removeAll() }
            destination = to
            if to != nil { group.append(report) }
        }
        if let destination, !group.isEmpty {
            send(group: group, to: Self.address(destination, replyPort: policy?.replyPort))
        }
    }

    /// The peer's address; its port, or `replyPort` when the key answers to a fixed port.
    static func address(_ peer: UDPPeer, replyPort: UInt16? = nil) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = (replyPort ?? peer.port).bigEndian
        address.sin_addr.s_addr = peer.address.bigEndian
        return address
    }

    /// Sends reports to one address together.
    ///
    /// Reports of one size (CTAPHID's are all 64 bytes) go out with UDP segmentation offload: one sendmsg whose
    /// datagrams the kernel cuts apart only where they are delivered, so the receiver still reads one report per
    /// datagram. Where the kernel (before Linux 4.18) or the route refuses it, one `sendmmsg` from then on.
    func send(group reports: [[UInt8]], to destination: sockaddr_in) {
        guard !reports.isEmpty else { return }
        var peer = destination
        if reports.count == 1 {
            _ = reports[0].withUnsafeBytes { raw in
                withUnsafePointer(to: &peer) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, raw.baseAddress, raw.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
            return
        }
        let joined = reports.flatMap { $0 }
        let size = reports[0].count
        let last = reports[reports.count - 1].count
        if segments, size > 0, reports.dropLast().allSatisfy({ $0.count == size }), last > 0, last <= size {
            let sent = withUnsafePointer(to: &peer) { to in
                fidosim_send_segmented(fd, to, joined, UInt32(size), UInt32(reports.count), UInt32(joined.count))
            }
            // Refused by the kernel or the route (no checksum offload): sendmmsg from now on. Any other failure is a
            // dropped answer, as UDP may drop one.
            guard sent < 0, [EINVAL, ENOPROTOOPT, EOPNOTSUPP, EIO].contains(-sent) else { return }
            segments = false
        }
        let lengths = reports.map { UInt32($0.count) }
        _ = withUnsafePointer(to: &peer) { to in
            fidosim_send_datagrams(fd, to, joined, lengths, UInt32(lengths.count))
        }
    }

}

extension UDPTransport {
    /// Sends one datagram to `127.0.0.1:port` and makes it the peer (for tests and local tools).
    package func sendTo(port: UInt16, _ bytes: [UInt8]) throws(TransportError) {
        setLoopbackPeer(port: port)
        send(bytes)
    }

    /// Sends the reports to `127.0.0.1:port` in one system call and makes it the peer.
    package func sendTo(port: UInt16, batch reports: [[UInt8]]) {
        setLoopbackPeer(port: port)
        send(batch: reports)
    }

    func setLoopbackPeer(port: UInt16) {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        peer = address
        hasPeer = true
    }
}
