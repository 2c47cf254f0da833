package import CTAPCore
import ControlProtocol

/// The keys that asked the person for a touch, oldest first: the terminal's answer belongs to the first of them,
/// so with several keys the answer goes to the key that asks, not to key 1.
///
/// A CTAP2 request waits in the key until it is answered or times out; a U2F request is refused at once and asked
/// again by the host every few hundred milliseconds, so its entry stands while the host keeps asking.
package struct PromptQueue {
    package struct Entry: Equatable {
        /// The slot (key) that asks.
        package var slot: Int
        /// Distinguishes one request from the next of the same key (a desktop notification belongs to one).
        package var serial: Int
        package var prompt: PresencePrompt
        /// When the key last asked (a U2F host asks again and again).
        package var askedAt: Duration
    }

    package private(set) var entries: [Entry] = []

    package init() {}
    private var nextSerial = 1
    /// How long a U2F request's entry stands after the host last asked.
    package var u2fValidity: Duration = .seconds(10)

    /// A key asks; returns the new entry, or nil when the same request of that key is already waiting.
    package mutating func ask(slot: Int, prompt: PresencePrompt, now: Duration) -> Entry? {
        if let index = entries.firstIndex(where: { $0.slot == slot }) {
            if entries[index].prompt == prompt && prompt.protocolKind == .u2f {
                entries[index].askedAt = now
                return nil
            }
            entries.remove(at: index)
        }
        let entry = Entry(slot: slot, serial: nextSerial, prompt: prompt, askedAt: now)
        nextSerial += 1
        entries.append(entry)
        return entry
    }

    /// Drops the entries whose request no longer waits: a CTAP2 request that `waits` says is answered (by a touch
    /// from the control plane, a timeout, a cancel) and a U2F request the host stopped asking. Returns them.
    package mutating func sweep(now: Duration, waits: (Int) -> Bool) -> [Entry] {
        var gone: [Entry] = []
        entries.removeAll { entry in
            let stale =
                entry.prompt.protocolKind == .u2f ? now - entry.askedAt > u2fValidity : !waits(entry.slot)
            if stale { gone.append(entry) }
            return stale
        }
        return gone
    }

    /// The request the terminal answers: the oldest.
    package var first: Entry? { entries.first }

    /// Removes the entry with this serial (it was answered); returns it.
    @discardableResult
    package mutating func remove(serial: Int) -> Entry? {
        guard let index = entries.firstIndex(where: { $0.serial == serial }) else { return nil }
        return entries.remove(at: index)
    }

    package func entry(serial: Int) -> Entry? { entries.first { $0.serial == serial } }

    /// The key at `slot` is gone: its entries go (returned), and the keys after it move up one place.
    @discardableResult
    package mutating func forget(slot: Int) -> [Entry] {
        let gone = entries.filter { $0.slot == slot }
        entries.removeAll { $0.slot == slot }
        for index in entries.indices where entries[index].slot > slot { entries[index].slot -= 1 }
        return gone
    }
}

/// What a line typed at the terminal means.
package enum TerminalAnswer: Equatable {
    case touch, refuse, unclear

    /// Enter, `y` or `yes` touch; `n` or `no` refuse (any case, surrounding blanks ignored).
    package init(line: some Collection<UInt8>) {
        let word = String(decoding: line, as: UTF8.self).trimmingBlanks().lowercased()
        switch word {
        case "", "y", "yes": self = .touch
        case "n", "no": self = .refuse
        default: self = .unclear
        }
    }
}

extension PresencePrompt {
    /// What the request is, for a person: `makeCredential for example.com (user bob)`, every name escaped so that
    /// a relying party cannot write control sequences to the owner's terminal.
    package var personText: String {
        var text = command
        if let rpId { text += " for " + TerminalText.escape(rpId) }
        if let userName { text += " (user " + TerminalText.escape(userName) + ")" }
        return text
    }

    /// The terminal's question about this request for the key named `key`.
    package func terminalQuestion(key: String) -> String {
        let question =
            switch gesture {
            case .touch: "Touch the key?"
            case .longTouch: "Hold the key for a long touch (5 seconds)?"
            case .fingerprint: "Put an enrolled finger on the sensor?"
            }
        return "fidosim: key \(key): \(gesture.name) requested: \(personText). " + question + " [Y/n]"
    }
}
