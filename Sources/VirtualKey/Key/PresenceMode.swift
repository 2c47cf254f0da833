package import ControlProtocol

/// How the simulated user answers a request for user presence.
package enum PresenceMode: Sendable, Equatable, CustomStringConvertible {
    /// Touch the key after a short delay (at least one UPNEEDED keepalive goes out first).
    case approve(after: Duration)
    /// Refuse every touch (CTAP2_ERR_OPERATION_DENIED, U2F conditions-not-satisfied).
    case deny(after: Duration)
    /// Ask on the terminal: Enter touches the key.
    case prompt

    /// The default delay before an automatic answer.
    package static let defaultDelay: Duration = .milliseconds(200)

    /// Parses `approve`, `deny`, `prompt` or `delay:MS` (approve after MS milliseconds).
    package init?(argument: String, approveDelay: Duration = PresenceMode.defaultDelay) {
        switch argument {
        case "approve": self = .approve(after: approveDelay)
        case "deny": self = .deny(after: approveDelay)
        case "prompt": self = .prompt
        default:
            guard argument.hasPrefix("delay:"), let ms = Int(argument.dropFirst(6)), ms >= 0, ms <= 600_000 else {
                return nil
            }
            self = .approve(after: .milliseconds(ms))
        }
    }

    /// The mode as `status` gives it structured: `{mode: approve|deny|prompt, delayMs?}`.
    package var json: JSONValue {
        switch self {
        case .approve(let d): ["mode": "approve", "delayMs": .integer(Int64(d.wholeMilliseconds))]
        case .deny(let d): ["mode": "deny", "delayMs": .integer(Int64(d.wholeMilliseconds))]
        case .prompt: ["mode": "prompt"]
        }
    }

    package var description: String {
        switch self {
        case .approve(let d): "approve after \(d)"
        case .deny(let d): "deny after \(d)"
        case .prompt: "prompt"
        }
    }
}
