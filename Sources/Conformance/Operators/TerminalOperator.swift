#if canImport(Glibc)
import Console
import Glibc
#endif

/// A real key: a person touches it and replugs it when the terminal asks. A card in a reader (`card`) needs no
/// touch (on NFC the tap is the presence); it is taken off the reader and put back instead of replugged.
package final class TerminalOperator: DeviceOperator {
    let card: Bool

    package init(card: Bool = false) {
        self.card = card
    }

    package var isAutomatic: Bool { false }

    package func touchNeeded(_ what: String) throws {
        printError(card ? ">>> keep the key on the reader (\(what))" : ">>> touch the key (\(what))")
    }

    package func refuseNextTouch() throws {
        throw CheckSkip("refusing a touch needs a fidosim control socket")
    }

    package func holdTouch() throws {
        printError(">>> do NOT touch the key for the next few seconds")
    }

    package func restore() throws {}

    package func powerCycle() throws {
        printError(
            card
                ? ">>> take the key off the reader, put it back, then press Enter"
                : ">>> unplug the key, plug it back in, then press Enter"
        )
        guard readLine() != nil else {
            throw CheckFailure("no one answered the replug request (standard input closed)")
        }
    }
}
