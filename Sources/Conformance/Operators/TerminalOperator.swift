#if canImport(Glibc)
import Console
import Glibc
#endif

/// A real key: a person touches it and replugs it when the terminal asks.
public final class TerminalOperator: DeviceOperator {
    public init() {}

    public var isAutomatic: Bool { false }

    public func touchNeeded(_ what: String) throws {
        printError(">>> touch the key (\(what))")
    }

    public func refuseNextTouch() throws {
        throw CheckSkip("refusing a touch needs a fidosim control socket")
    }

    public func holdTouch() throws {
        printError(">>> do NOT touch the key for the next few seconds")
    }

    public func restore() throws {}

    public func powerCycle() throws {
        printError(">>> unplug the key, plug it back in, then press Enter")
        guard readLine() != nil else {
            throw CheckFailure("no one answered the replug request (standard input closed)")
        }
    }
}
