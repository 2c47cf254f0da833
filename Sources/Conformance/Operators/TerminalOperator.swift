#if canImport(Glibc)
import Console
import Glibc
#endif

/// A real key: a person touches it and replugs it when the terminal asks.
package final class TerminalOperator: DeviceOperator {
    package init() {}

    package var isAutomatic: Bool { false }

    package func touchNeeded(_ what: String) throws {
        printError(">>> touch the key (\(what))")
    }

    package func refuseNextTouch() throws {
        throw CheckSkip("refusing a touch needs a fidosim control socket")
    }

    package func holdTouch() throws {
        printError(">>> do NOT touch the key for the next few seconds")
    }

    package func restore() throws {}

    package func powerCycle() throws {
        printError(">>> unplug the key, plug it back in, then press Enter")
        guard readLine() != nil else {
            throw CheckFailure("no one answered the replug request (standard input closed)")
        }
    }
}
