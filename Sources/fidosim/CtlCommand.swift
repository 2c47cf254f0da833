import ArgumentParser
import ControlClient
import ControlProtocol
import HIDBridge

#if canImport(Glibc)
import Glibc
#endif

struct Ctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Control a running virtual key through its control socket.",
        discussion: """
            COMMAND is a command of the control protocol (firmware-spec/control.md) or its kebab-case alias: \
            status, credentials (getCredentials), add-credential, remove-credential ID, remove-all-credentials, \
            set-user-verified true|false, automatic-presence true|false, power-cycle, presence MODE, touch, \
            set-option NAME=VALUE, fault KIND NAME=VALUE..., clear-faults, events.
            Parameters are NAME=VALUE (true, false, null and integers are typed; anything else is a string), \
            or one JSON object with --params. `events` prints every event until interrupted (or --count).
            Examples:
              fidosim ctl presence deny delayMs=0
              fidosim ctl fault status command=makeCredential status=0x28 count=2
              fidosim ctl add-credential credentialId=AAEC isResidentCredential=false rpId=example.com privateKey=MIGH...
            """
    )

    @Option(help: "The key's name (its socket is the default socket of `fidosim serve --name NAME`).")
    var name: String = "default"

    @Option(help: "The control socket's path (overrides --name).")
    var socket: String?

    @Flag(help: "Print the response (or each event) as one JSON line.")
    var json = false

    @Option(help: "All parameters as a JSON object.")
    var params: String?

    @Option(help: "events: stop after this many events.")
    var count: Int?

    @Option(help: "events: stop after this many seconds.")
    var timeout: Double?

    @Argument(help: "The command.")
    var command: String

    @Argument(help: "Parameters: NAME=VALUE, or the command's main value.")
    var arguments: [String] = []

    static let aliases: [String: String] = [
        "credentials": "getCredentials", "add-credential": "addCredential", "remove-credential": "removeCredential",
        "remove-all-credentials": "removeAllCredentials", "set-user-verified": "setUserVerified",
        "automatic-presence": "setAutomaticPresenceSimulation", "power-cycle": "powerCycle",
        "set-option": "setOption", "fault": "injectFault", "clear-faults": "clearFaults", "events": "subscribe",
    ]

    /// The parameter a bare value stands for.
    static let mainParameter: [String: String] = [
        "presence": "mode", "removeCredential": "credentialId", "setUserVerified": "isUserVerified",
        "setAutomaticPresenceSimulation": "enabled", "injectFault": "kind",
    ]

    var commandName: String { Self.aliases[command] ?? command }

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be positive") }
        _ = try buildParams()
    }

    func buildParams() throws -> [String: JSONValue] {
        var members: [String: JSONValue] = [:]
        if let params {
            guard case .object(let object) = try? JSONParser.parse(params) else {
                throw ValidationError("--params must be a JSON object")
            }
            members = object
        }
        for argument in arguments {
            if let eq = argument.firstIndex(of: "=") {
                members[String(argument[..<eq])] = Self.typedValue(String(argument[argument.index(after: eq)...]))
            } else if let main = Self.mainParameter[commandName], members[main] == nil {
                members[main] = Self.typedValue(argument)
            } else {
                throw ValidationError("'\(argument)' is not NAME=VALUE")
            }
        }
        return members
    }

    static func typedValue(_ text: String) -> JSONValue {
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

    func run() throws {
        let path = socket ?? KeyFiles.defaultControlPath(name: name)
        let connection: ControlConnection
        do {
            connection = try ControlConnection(path: path)
        } catch {
            printError("fidosim ctl: \(error) (is `fidosim serve --name \(name)` running?)")
            throw ExitCode(2)
        }
        let result: JSONValue
        do {
            result = try SocketKeyAccess(connection: connection, timeout: 10)
                .request(commandName, .object(try buildParams()))
        } catch let error as KeyAccessError {
            printError("fidosim ctl: \(error)")
            throw ExitCode(1)
        }
        if commandName == "subscribe" {
            try streamEvents(connection)
            return
        }
        if json {
            printLine(result.encoded)
        } else {
            printLine(Self.human(command: commandName, result))
        }
    }

    func streamEvents(_ connection: ControlConnection) throws {
        var seen = 0
        let deadline = timeout.map { ContinuousClock.now + .milliseconds(Int($0 * 1000)) }
        while count.map({ seen < $0 }) ?? true {
            var wait = 3600.0
            if let deadline {
                let left = deadline - ContinuousClock.now
                if left <= .zero { break }
                wait = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
            }
            guard let event = try connection.nextEvent(timeout: wait) else { break }
            seen += 1
            printLine(json ? event.encoded : Self.humanEvent(event))
        }
    }

    static func humanEvent(_ event: JSONValue) -> String {
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
    static func human(command: String, _ result: JSONValue) -> String {
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

    static func display(_ value: JSONValue) -> String {
        if case .string(let s) = value { return TerminalText.escape(s) }
        return value.encoded
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
