#if canImport(Glibc)
import CTAPCBOR
import Glibc
#endif

/// A way to move 64-byte CTAPHID reports to a key and back: a UDP socket or a HID device.
package protocol ReportChannel: AnyObject {
    /// Sends one output report (64 bytes, without a report ID).
    func send(_ report: [UInt8]) throws(ClientError)
    /// The next input report, or `nil` when none arrives within `timeoutMs` milliseconds.
    func receive(timeoutMs: Int) throws(ClientError) -> [UInt8]?
    /// Where the reports go, for messages.
    var name: String { get }
}

/// CTAPHID reports over UDP, one report per datagram (the convention of solo1's and Trezor's simulators).
package final class UDPReportChannel: ReportChannel {
    let fd: Int32
    package let name: String

    /// A socket connected to `host:port`; with `replyPort`, bound to that local port first, for a key that answers
    /// to a fixed port instead of the sender's (solo1's simulation answers to 127.0.0.1:7112).
    package init(host: String, port: UInt16, replyPort: UInt16? = nil) throws(ClientError) {
        name = "udp:\(host):\(port)" + (replyPort.map { "?reply-port=\($0)" } ?? "")
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &result) == 0, let info = result else {
            throw .transport("\(name): cannot resolve \(host)")
        }
        defer { freeaddrinfo(result) }
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .transport("socket: \(String(cString: strerror(errno)))") }
        if let replyPort {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_port = replyPort.bigEndian
            local.sin_addr.s_addr = INADDR_ANY
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else {
                let reason = String(cString: strerror(errno))
                Glibc.close(fd)
                throw .transport(
                    "\(name): cannot listen on the reply port \(replyPort): \(reason) (another client of a key that "
                        + "answers there?)"
                )
            }
        }
        guard connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw .transport("\(name): connect: \(reason)")
        }
    }

    deinit { Glibc.close(fd) }

    package func send(_ report: [UInt8]) throws(ClientError) {
        let sent = report.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
        guard sent == report.count else { throw .transport("\(name): send: \(String(cString: strerror(errno)))") }
    }

    package func receive(timeoutMs: Int) throws(ClientError) -> [UInt8]? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, Int32(clamping: max(0, timeoutMs)))
        if ready == 0 { return nil }
        guard ready > 0 else {
            if errno == EINTR { return nil }
            throw .transport("\(name): poll: \(String(cString: strerror(errno)))")
        }
        var buffer = [UInt8](repeating: 0, count: 2048)
        let count = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
        guard count >= 0 else {
            // ECONNREFUSED: nothing listens on the port (yet); the caller sees a silent key.
            if errno == ECONNREFUSED { return nil }
            throw .transport("\(name): recv: \(String(cString: strerror(errno)))")
        }
        return Array(buffer[0..<count])
    }
}
