#if canImport(Glibc)
import Glibc
#endif

/// A real key: a person touches it and replugs it when the terminal asks.
public final class TerminalOperator: DeviceOperator {
    public init() {}

    public var isAutomatic: Bool { false }

    public func touchNeeded(_ what: String) throws {
        tellPerson(">>> touch the key (\(what))")
    }

    public func refuseNextTouch() throws {
        throw CheckSkip("refusing a touch needs a fidosim control socket")
    }

    public func holdTouch() throws {
        tellPerson(">>> do NOT touch the key for the next few seconds")
    }

    public func restore() throws {}

    public func powerCycle() throws {
        tellPerson(">>> unplug the key, plug it back in, then press Enter")
        guard readLine() != nil else {
            throw CheckFailure("no one answered the replug request (standard input closed)")
        }
    }
}

/// A line for the person at the terminal, on standard error (standard output carries the results).
func tellPerson(_ line: String) {
    var bytes = Array(line.utf8)
    bytes.append(UInt8(ascii: "\n"))
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return }
        offset += n
    }
}
