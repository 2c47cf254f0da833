package import ControlProtocol
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A client connection to a control socket.
package final class ControlConnection {
    package enum Failure: Error, Equatable, CustomStringConvertible {
        case connect(String)
        case closed
        case timedOut
        case invalid(String)
        /// The key answered the request with an error: its code and message.
        case refused(code: String, message: String)

        package var description: String {
            switch self {
            case .connect(let reason): reason
            case .closed: "the simulator closed the connection"
            case .timedOut: "no answer from the simulator"
            case .invalid(let reason): "the simulator sent an invalid line: \(reason)"
            case .refused(let code, let message): "\(code): \(message)"
            }
        }
    }

    let fd: Int32
    var buffer = ControlLineBuffer()
    var lines: [[UInt8]] = []

    package init(path: String) throws(Failure) {
        fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .connect("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard path.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw .connect("the socket path \(path) is too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw .connect("cannot connect to \(path): \(reason)")
        }
    }

    deinit { close(fd) }

    package func send(_ line: String) throws(Failure) {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw .closed }
            offset += n
        }
    }

    /// The next JSON line, or nil when `timeout` seconds pass first.
    package func nextEvent(timeout: Double) throws(Failure) -> JSONValue? {
        do {
            return try readMessage(timeout: timeout)
        } catch {
            if error == .timedOut { return nil }
            throw error
        }
    }

    /// The next JSON line, waiting at most `timeout` seconds.
    package func readMessage(timeout: Double) throws(Failure) -> JSONValue {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while lines.isEmpty {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw .timedOut }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(
                min(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1, 60_000)
            )
            let ready = poll(&pfd, 1, ms)
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            // swift-system's read retries after a signal.
            let n: Int
            do {
                n = try chunk.withUnsafeMutableBytes { try FileDescriptor(rawValue: fd).read(into: $0) }
            } catch {
                throw .closed
            }
            guard n > 0 else { throw .closed }
            for item in buffer.append(chunk[0..<n]) {
                guard case .line(let line) = item else { throw .invalid("a line over 1 MiB") }
                lines.append(line)
            }
        }
        let line = lines.removeFirst()
        do {
            return try JSONParser.parse(line)
        } catch {
            throw .invalid(error.description)
        }
    }

    /// Runs one control command (control.md) and returns its result; the key's error comes back as
    /// ``Failure/refused(code:message:)``.
    package func request(_ command: String, _ params: JSONValue, timeout: Double = 30) throws(Failure) -> JSONValue {
        try send(JSONValue.object(["id": 1, "command": .string(command), "params": params]).encoded)
        let response = try readMessage(timeout: timeout)
        guard response["ok"] == true, let result = response["result"] else {
            let error = response["error"]
            throw .refused(
                code: error?["code"]?.stringValue ?? "error",
                message: error?["message"]?.stringValue ?? response.encoded
            )
        }
        return result
    }
}
