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

    /// A socket for `host:port`; with `replyPort`, bound to that local port, for a key that answers to a fixed port
    /// instead of the sender's (solo1's simulation answers to 127.0.0.1:7112). The socket is bound to the wildcard
    /// address and not connected (`connect()` would bind it to one address): while it holds its port, no other
    /// user's socket can take that port on any local address and send to the key as this client
    /// (firmware-spec/security.md). Datagrams from anywhere but the key are dropped here.
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
        var resolved = sockaddr_in()
        withUnsafeMutableBytes(of: &resolved) { raw in
            raw.copyMemory(from: UnsafeRawBufferPointer(start: info.pointee.ai_addr, count: raw.count))
        }
        key = resolved
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .transport("socket: \(String(cString: strerror(errno)))") }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_port = (replyPort ?? 0).bigEndian
        local.sin_addr.s_addr = INADDR_ANY
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        // A key that is not there answers with ICMP port unreachable: with IP_RECVERR an unconnected socket hears
        // it too (ECONNREFUSED), as a connected one would, and the client knows at once that the key is silent.
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_IP), IP_RECVERR, &on, socklen_t(MemoryLayout<Int32>.size))
        guard bound == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            guard let replyPort else { throw .transport("\(name): bind: \(reason)") }
            throw .transport(
                "\(name): cannot listen on the reply port \(replyPort): \(reason) (another client of a key that "
                    + "answers there?)"
            )
        }
    }

    /// The key's address: what is sent goes there, and only what comes from there is read.
    let key: sockaddr_in

    deinit { Glibc.close(fd) }

    package func send(_ report: [UInt8]) throws(ClientError) {
        var to = key
        let sent = report.withUnsafeBytes { bytes in
            withUnsafePointer(to: &to) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard sent == report.count else { throw .transport("\(name): send: \(String(cString: strerror(errno)))") }
    }

    package func receive(timeoutMs: Int) throws(ClientError) -> [UInt8]? {
        let deadline = Self.nowMs() + max(0, timeoutMs)
        var buffer = [UInt8](repeating: 0, count: 2048)
        while true {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(clamping: max(0, deadline - Self.nowMs())))
            if ready == 0 { return nil }
            guard ready > 0 else {
                if errno == EINTR { return nil }
                throw .transport("\(name): poll: \(String(cString: strerror(errno)))")
            }
            var from = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let count = buffer.withUnsafeMutableBytes { raw in
                withUnsafeMutablePointer(to: &from) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(fd, raw.baseAddress, raw.count, 0, $0, &length)
                    }
                }
            }
            guard count >= 0 else {
                if errno == EINTR { continue }
                // ECONNREFUSED: nothing listens on the port (yet); the caller sees a silent key.
                if errno == ECONNREFUSED || errno == EAGAIN {
                    drainErrors()
                    if errno == ECONNREFUSED { return nil }
                    continue
                }
                throw .transport("\(name): recv: \(String(cString: strerror(errno)))")
            }
            // Only the key's datagrams: anything else on this port is not an answer.
            if from.sin_addr.s_addr == key.sin_addr.s_addr && from.sin_port == key.sin_port {
                return Array(buffer[0..<count])
            }
        }
    }

    /// Empties the socket's error queue (IP_RECVERR), which would otherwise keep it readable.
    func drainErrors() {
        let saved = errno
        var scratch = [UInt8](repeating: 0, count: 512)
        var control = [UInt8](repeating: 0, count: 512)
        while true {
            let got = scratch.withUnsafeMutableBytes { data in
                control.withUnsafeMutableBytes { control in
                    var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                    return withUnsafeMutablePointer(to: &vector) { vector in
                        var message = msghdr()
                        message.msg_iov = vector
                        message.msg_iovlen = 1
                        message.msg_control = control.baseAddress
                        message.msg_controllen = control.count
                        return recvmsg(fd, &message, Int32(MSG_ERRQUEUE) | Int32(MSG_DONTWAIT))
                    }
                }
            }
            if got < 0 { break }
        }
        errno = saved
    }

    /// Milliseconds on the monotonic clock.
    static func nowMs() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return now.tv_sec * 1000 + now.tv_nsec / 1_000_000
    }
}
