/// A control command as people type it (`fidosim ctl`): a kebab-case alias, then NAME=VALUE parameters or the
/// command's main value, or all parameters as one JSON object.
package enum ControlArguments {
    /// The kebab-case aliases of the protocol's commands.
    package static let aliases: [String: String] = [
        "credentials": "getCredentials", "add-credential": "addCredential", "remove-credential": "removeCredential",
        "set-credential-properties": "setCredentialProperties",
        "remove-all-credentials": "removeAllCredentials", "set-user-verified": "setUserVerified",
        "automatic-presence": "setAutomaticPresenceSimulation", "power-cycle": "powerCycle",
        "set-option": "setOption", "fault": "injectFault", "clear-faults": "clearFaults", "events": "subscribe",
    ]

    /// The parameter a bare value stands for.
    package static let mainParameter: [String: String] = [
        "presence": "mode", "removeCredential": "credentialId", "setUserVerified": "isUserVerified",
        "setAutomaticPresenceSimulation": "enabled", "injectFault": "kind",
    ]

    /// The command name or alias nearest to a misspelt `name` (at most a third of its letters off), for "did you
    /// mean".
    package static func nearest(_ name: String) -> String? {
        let candidates = Array(aliases.keys) + ControlCommand.names + ["events"]
        let scored = candidates.map { ($0, editDistance(name.lowercased(), $0.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 || ($0.1 == $1.1 && $0.0 < $1.0) }),
            best.1 <= max(1, name.count / 3)
        else { return nil }
        return best.0
    }

    /// Levenshtein distance.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8)
        let b = Array(b.utf8)
        var row = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return a.isEmpty ? b.count : row[b.count]
    }

    /// The protocol's name of a command typed as `name` (an alias or the name itself).
    package static func command(_ name: String) -> String { aliases[name] ?? name }

    /// The parameters of `command` (the protocol's name): those of `json` (an object), then each argument.
    package static func parameters(
        command: String,
        json: String?,
        arguments: [String]
    ) throws(ControlError) -> [String: JSONValue] {
        var members: [String: JSONValue] = [:]
        if let json {
            guard case .object(let object) = try? JSONParser.parse(json) else {
                throw ControlError(.invalidParams, "--params must be a JSON object")
            }
            members = object
        }
        for argument in arguments {
            if let eq = argument.firstIndex(of: "=") {
                members[String(argument[..<eq])] = typedValue(String(argument[argument.index(after: eq)...]))
            } else if let main = mainParameter[command], members[main] == nil {
                members[main] = typedValue(argument)
            } else {
                throw ControlError(.invalidParams, "'\(argument)' is not NAME=VALUE")
            }
        }
        return members
    }

    /// true, false, null and integers (decimal or 0x hexadecimal) are typed; anything else is a string.
    package static func typedValue(_ text: String) -> JSONValue {
        switch text {
        case "true": return true
        case "false": return false
        case "null": return nil
        default:
            if let i = Int64(text) { return .integer(i) }
            if text.lowercased().hasPrefix("0x"), let i = Int64(text.dropFirst(2), radix: 16) { return .integer(i) }
            return .string(text)
        }
    }
}
