import CUHID

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An error from a transport, with a message that says what to do.
public struct TransportError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The UDP transport of solo1's simulation: one datagram is one raw 64-byte CTAPHID report, without a
/// report-id byte; answers go to the address of the latest sender.
public final class UDPTransport: ReportTransport {
    public let host: String
    public let port: UInt16
    let fd: Int32
    var peer = sockaddr_in()
    var hasPeer = false
    /// Whether batches go out with UDP segmentation offload; cleared when the kernel refuses it.
    var segments: Bool

    /// Binds a UDP socket on `host:port` (IPv4 dotted quad or `localhost`).
    public init(host: String, port: UInt16) throws(TransportError) {
        self.host = host
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        let numeric = host == "localhost" ? "127.0.0.1" : host
        guard inet_pton(AF_INET, numeric, &address.sin_addr) == 1 else {
            throw TransportError("invalid --host '\(host)': give an IPv4 address such as 127.0.0.1")
        }
        #if canImport(Glibc)
        let socketType = Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        #else
        let socketType = SOCK_DGRAM
        #endif
        let fd = socket(AF_INET, socketType, 0)
        guard fd >= 0 else { throw TransportError("cannot create a UDP socket: \(Self.errnoText())") }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let reason = Self.errnoText()
            close(fd)
            throw TransportError("cannot listen on udp \(host):\(port): \(reason)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.port = UInt16(bigEndian: actual.sin_port)
        self.fd = fd
        segments = fidosim_udp_segmentation_supported(fd) != 0
    }

    deinit { close(fd) }

    /// The file descriptor to poll for incoming datagrams.
    public var descriptor: Int32 { fd }

    /// The exact datagram that power-cycles the key (solo1's simulation convention).
    public static let powerCycleDatagram: [UInt8] = Array(
        hex: "ac1052ca95e569de69e02ebff333485f13f9b2da34c5a8a340526697a9ab2e0b"
            + "394d8d04973c134005be1a0140bff6045bb26eb77a73eaa47813f6b49a7250dc")

    public var summary: String { "udp \(host):\(port)" }

    /// Reads one datagram without blocking: a report, or the power-cycle datagram.
    public func receive() -> TransportEvent? {
        receiveDatagram().map(Self.event)
    }

    /// What a datagram is: the power-cycle datagram, or a report.
    static func event(_ datagram: [UInt8]) -> TransportEvent {
        datagram == powerCycleDatagram ? .powerCycle : .report(datagram)
    }

    /// Reads every waiting datagram, up to 32 in each recvmmsg: one system call for the reports of a request
    /// (and one more only when a full batch came back), where reading them one by one took a call for each and a
    /// last one to find the queue empty. The latest sender becomes the peer, as with ``receive()``.
    public func receiveAll() -> [TransportEvent] {
        let stride = Self.receiveStride
        let batch = Self.receiveBatch
        var events: [TransportEvent] = []
        while true {
            var from = sockaddr_in()
            let got = receiveBuffer.withUnsafeMutableBufferPointer { bytes in
                fidosim_receive_datagrams(fd, bytes.baseAddress, UInt32(stride), &receiveLengths, UInt32(batch), &from)
            }
            guard got > 0 else { break }
            peer = from
            hasPeer = true
            for i in 0..<Int(got) {
                events.append(Self.event(Array(receiveBuffer[i * stride..<i * stride + Int(receiveLengths[i])])))
            }
            if got < batch { break }
        }
        return events
    }

    /// Bytes kept for each datagram by ``receiveAll()``: a report and one more, so that a longer datagram shows.
    static let receiveStride = 65
    /// Datagrams read by one recvmmsg.
    static let receiveBatch = 32
    /// ``receiveAll()``'s buffers, made once.
    private var receiveBuffer = [UInt8](repeating: 0, count: receiveStride * receiveBatch)
    private var receiveLengths = [UInt32](repeating: 0, count: receiveBatch)

    /// Nothing to unplug on UDP.
    public func replug() throws(TransportError) {}

    /// Reads one datagram without blocking; nil when none is waiting. Oversized datagrams are truncated
    /// to 65 bytes so that the framing layer sees and drops them.
    public func receiveDatagram() -> [UInt8]? {
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

    /// Sends one report to the latest sender.
    public func send(_ report: [UInt8]) {
        guard hasPeer else { return }
        _ = report.withUnsafeBytes { raw in
            withUnsafePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, raw.baseAddress, raw.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }

    /// Sends the reports to the latest sender together: the peer, woken by the first, finds the rest
    /// already queued instead of sleeping and waking again for each.
    ///
    /// Reports of one size (CTAPHID's are all 64 bytes) go out with UDP segmentation offload: one sendmsg whose
    /// datagrams the kernel cuts apart only where they are delivered, so the receiver still reads one report per
    /// datagram. Where the kernel (before Linux 4.18) or the route refuses it, one `sendmmsg` from then on.
    public func send(batch reports: [[UInt8]]) {
        guard hasPeer, !reports.isEmpty else { return }
        if reports.count == 1 { return send(reports[0]) }
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

    static func errnoText() -> String { String(cString: strerror(errno)) }
}

extension UDPTransport {
    /// Sends one datagram to `127.0.0.1:port` and makes it the peer (for tests and local tools).
    public func sendTo(port: UInt16, _ bytes: [UInt8]) throws(TransportError) {
        setLoopbackPeer(port: port)
        send(bytes)
    }

    /// Sends the reports to `127.0.0.1:port` in one system call and makes it the peer.
    public func sendTo(port: UInt16, batch reports: [[UInt8]]) {
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
