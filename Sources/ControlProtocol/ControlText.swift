/// How `fidosim ctl` shows what a key answers to a person: a table for credentials, the status in lines, an event
/// on one line; every string the key reports is escaped for the terminal (``TerminalText``).
package enum ControlText {
    /// One event as a line: its name, then what it is about.
    package static func event(_ event: JSONValue) -> String {
        let name = event["event"]?.stringValue ?? "?"
        var parts = [name]
        for key in ["command", "rpId", "userName", "status", "credentialId"] {
            if let value = event[key]?.stringValue.map(TerminalText.escape) {
                parts.append(key == "credentialId" ? "id=\(value)" : value)
            }
        }
        if event["injected"] == true { parts.append("(injected)") }
        return parts.joined(separator: " ")
    }

    /// A readable rendering of a result: tables for status and credentials, NAME: VALUE lines otherwise.
    package static func result(command: String, _ result: JSONValue) -> String {
        switch command {
        case "getCredentials":
            let credentials = result["credentials"]?.arrayValue ?? []
            if credentials.isEmpty { return "no credentials" }
            var lines = ["RESIDENT  ALG    SIGNCOUNT  RP ID                 USER                  CREDENTIAL ID"]
            for c in credentials {
                let user = TerminalText.escape(c["userName"]?.stringValue ?? c["userHandle"]?.stringValue ?? "-")
                lines.append(
                    [
                        pad(c["isResidentCredential"] == true ? "yes" : "no", 9),
                        pad(c["algorithm"]?.stringValue ?? "?", 6),
                        pad(c["signCount"]?.integerValue.map { String($0) } ?? "?", 10),
                        pad(TerminalText.escape(c["rpId"]?.stringValue ?? "?"), 21), pad(user, 21),
                        c["credentialId"]?.stringValue ?? "?",
                    ].joined(separator: " ")
                )
            }
            return lines.joined(separator: "\n")
        case "status":
            var lines: [String] = []
            lines.append("transport:   \(result["transport"]?.stringValue ?? "?")")
            lines.append("aaguid:      \(result["aaguid"]?.stringValue ?? "?")")
            lines.append("attestation: \(result["attestation"]?["type"]?.stringValue ?? "?")")
            let versions = result["info"]?["versions"]?.arrayValue?.compactMap(\.stringValue) ?? []
            lines.append("versions:    \(versions.joined(separator: " "))")
            lines.append("presence:    \(result["presence"]?.stringValue ?? "?")")
            if let storage = result["storage"] {
                lines.append(
                    "credentials: \(storage["credentials"]?.integerValue ?? 0) stored "
                        + "(\(storage["discoverableCredentials"]?.integerValue ?? 0) discoverable), "
                        + "room for \(storage["remainingCapacity"]?.integerValue ?? 0) more"
                )
                lines.append(
                    "pin:         \(storage["pinSet"] == true ? "set" : "not set"), "
                        + "\(storage["pinRetries"]?.integerValue ?? 0) retries"
                )
            }
            lines.append("sign count:  \(result["counters"]?["signCount"]?.integerValue ?? 0)")
            if case .object(let requests)? = result["counters"]?["requests"], !requests.isEmpty {
                lines.append(
                    "requests:    "
                        + requests.keys.sorted().map { "\($0) \(requests[$0]?.integerValue ?? 0)" }.joined(
                            separator: ", "
                        )
                )
            }
            if let pending = result["pending"], pending != .null {
                var line = "pending:     \(pending["command"]?.stringValue ?? "?")"
                if let rp = pending["rpId"]?.stringValue { line += " for \(TerminalText.escape(rp))" }
                if let user = pending["userName"]?.stringValue { line += " (user \(TerminalText.escape(user)))" }
                lines.append(line + ", waiting for a \(pending["gesture"]?.stringValue ?? "touch")")
            } else {
                lines.append("pending:     nothing")
            }
            return lines.joined(separator: "\n")
        default:
            guard case .object(let members) = result, !members.isEmpty else { return "ok" }
            return members.keys.sorted().map { "\($0): \(members[$0].map(display) ?? "")" }.joined(separator: "\n")
        }
    }

    /// A value on one line: a string as itself (escaped for the terminal), anything else as JSON.
    static func display(_ value: JSONValue) -> String {
        if case .string(let s) = value { return TerminalText.escape(s) }
        return value.encoded
    }

    /// `text` padded with spaces to `width` characters.
    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
