import CDatagrams
import CTAPCBOR

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
    /// Whether each recent sender's socket belongs to this user, and when that was read.
    var owners: [UDPPeer: (allowed: Bool, at: Duration)] = [:]
    /// When a refused sender was last reported (at most one note a second).
    var lastRefusalNote: Duration?

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
        if let policy, !policy.anyUser {
            _ = procUDP
            _ = procUDP6
        }
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

    /// Reads every waiting datagram, up to 32 in each recvmmsg: one system call for the reports of a request
    /// (and one more only when a full batch came back), where reading them one by one took a call for each and a
    /// last one to find the queue empty. On a plain socket the latest sender becomes the peer, as with
    /// ``receive()``; a key's socket passes each datagram through its policy and router.
    package func receiveAll() -> [TransportEvent] {
        let stride = Self.receiveStride
        let batch = Self.receiveBatch
        var events: [TransportEvent] = []
        while true {
            let got = receiveBuffer.withUnsafeMutableBufferPointer { bytes in
                fidosim_receive_datagrams(fd, bytes.baseAddress, UInt32(stride), &receiveLengths, UInt32(batch), &froms)
            }
            guard got > 0 else { break }
            for i in 0..<Int(got) {
                let datagram = Array(receiveBuffer[i * stride..<i * stride + Int(receiveLengths[i])])
                guard let policy else {
                    peer = froms[i]
                    hasPeer = true
                    events.append(Self.event(datagram))
                    continue
                }
                let sender = UDPPeer(
                    address: UInt32(bigEndian: froms[i].sin_addr.s_addr),
                    port: UInt16(bigEndian: froms[i].sin_port)
                )
                let now = clock.now - start
                guard allows(sender, policy: policy, now: now, notes: &events) else { continue }
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
            if got < batch { break }
        }
        return events
    }

    /// Whether `sender` may talk to the key: its socket belongs to this user (read from /proc/net/udp, at most
    /// once a second for each sender), or the policy hears everyone.
    func allows(_ sender: UDPPeer, policy: UDPKeyPolicy, now: Duration, notes: inout [TransportEvent]) -> Bool {
        if policy.anyUser { return true }
        if let known = owners[sender], now - known.at < .seconds(1) { return known.allowed }
        if owners.count > 4096 { owners.removeAll() }
        let uids = UDPSocketOwners.uids(of: sender, udp: procUDP.read(), udp6: procUDP6.read())
        let me = geteuid()
        let allowed = uids.isEmpty ? policy.remote && !sender.isLoopback : uids.allSatisfy { $0 == me }
        owners[sender] = (allowed, now)
        if !allowed && lastRefusalNote.map({ now - $0 >= .seconds(1) }) ?? true {
            lastRefusalNote = now
            let who = uids.first { $0 != me }.map { "a socket of uid \($0)" } ?? "no local socket of this user"
            notes.append(
                .note(
                    "udp: datagrams from \(sender) (\(who)) are ignored: only uid \(me)'s programs may use this key "
                        + "(serve --udp-any-user lets every local user in)"
                )
            )
        }
        return allowed
    }

    /// The kernel's socket tables, opened once and read again from the start for each lookup: the lookup must
    /// work when the process has no descriptor left to open them (a flood of control connections).
    lazy var procUDP = ProcFile("/proc/net/udp")
    lazy var procUDP6 = ProcFile("/proc/net/udp6")

    /// Bytes kept for each datagram by ``receiveAll()``: a report and one more, so that a longer datagram shows.
    static let receiveStride = 65
    /// Datagrams read by one recvmmsg.
    static let receiveBatch = 32
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

/// A /proc file kept open and read from its start each time.
final class ProcFile {
    let fd: Int32

    init(_ path: String) { fd = open(path, O_RDONLY | O_CLOEXEC) }

    deinit { if fd >= 0 { close(fd) } }

    func read() -> String {
        guard fd >= 0, lseek(fd, 0, SEEK_SET) == 0 else { return "" }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while bytes.count < 16 << 20 {
            let n = Glibc.read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
