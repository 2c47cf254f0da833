import ArgumentParser
import Console
import ControlClient
import ControlProtocol

struct Ctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Control a running virtual key through its control socket.",
        discussion: """
            COMMAND is a command of the control protocol (firmware-spec/control.md) or its kebab-case alias: \
            status, credentials (getCredentials), add-credential, remove-credential ID, remove-all-credentials, \
            set-user-verified true|false, automatic-presence true|false, power-cycle, presence MODE, touch, refuse, \
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

    @Option(help: "The control socket's path (overrides --name), as `serve --control` and `conform --control` name it.")
    var control: String?

    /// The old spelling of --control, still accepted.
    @Option(name: .customLong("socket"), help: .hidden)
    var socket: String?

    @Flag(help: "Print the response (or each event) as one JSON line.")
    var json = false

    @Option(help: "All parameters as a JSON object.")
    var params: String?

    @Option(
        help: ArgumentHelp(
            "add-credential: how the credential is written: auto, webdriver, cdp (standard base64), playwright "
                + "({id, rpId, userHandle, privateKey, publicKey}) or selenium; the private key may be PEM.",
            valueName: "format"
        )
    )
    var format: CredentialsCommand.Format = .auto

    @Option(help: "events: stop after this many events.")
    var count: Int?

    @Option(help: "events: stop after this many seconds.")
    var timeout: Double?

    @Argument(help: "The command.")
    var command: String

    @Argument(help: "Parameters: NAME=VALUE, or the command's main value.")
    var arguments: [String] = []

    var commandName: String { ControlArguments.command(command) }

    func validate() throws {
        if !ControlCommand.names.contains(commandName) {
            var message = "unknown command '\(command)'"
            if let near = ControlArguments.nearest(command) { message += "; did you mean '\(near)'?" }
            throw ValidationError(message + " (fidosim ctl --help lists them)")
        }
        if control != nil && socket != nil { throw ValidationError("give --control once (--socket is its old name)") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be positive") }
        _ = try buildParams()
    }

    func buildParams() throws -> [String: JSONValue] {
        let members: [String: JSONValue]
        do {
            members = try ControlArguments.parameters(command: commandName, json: params, arguments: arguments)
        } catch {
            throw ValidationError(error.message)
        }
        guard commandName == "addCredential" else {
            if format != .auto { throw ValidationError("--format is for add-credential") }
            return members
        }
        // A credential in any of the files' formats becomes the protocol's WebDriver parameters.
        do {
            let object = JSONValue.object(members)
            if format == .cxf {
                throw CredentialExchange.FormatError("a CXF document holds accounts: use credentials import")
            }
            let converted = try CredentialExchange.credential(
                object,
                format: try format.file ?? CredentialExchange.detect(object)
            )
            return converted.objectValue ?? [:]
        } catch {
            throw ValidationError("\(error)")
        }
    }

    func run() throws {
        let path = control ?? socket ?? KeyPaths.defaultControlPath(name: name)
        let connection: ControlConnection
        do {
            connection = try ControlConnection(path: path)
        } catch {
            if json { printLine(Self.errorLine(code: "unreachable", message: error.description)) }
            throw Unreachable("ctl: \(error) (is `fidosim serve --name \(name)` running?)")
        }
        let result: JSONValue
        do {
            result = try SocketKeyAccess(connection: connection, timeout: 10)
                .request(commandName, .object(try buildParams()))
        } catch let failure as ControlConnection.Failure {
            switch failure {
            case .refused(let code, let message):
                if json { printLine(Self.errorLine(code: code, message: message)) }
                printError("fidosim ctl: \(code): \(message)")
                // A request the key could not read is bad input; one it refused is a failed operation.
                let badInput = ["parse-error", "invalid-request", "unknown-command", "invalid-params", "too-large"]
                throw badInput.contains(code) ? Exit.usage : Exit.failed
            case .connect, .closed, .timedOut:
                if json { printLine(Self.errorLine(code: "unreachable", message: failure.description)) }
                throw Unreachable("ctl: \(failure)")
            case .invalid:
                if json { printLine(Self.errorLine(code: "invalid-response", message: failure.description)) }
                throw Failed("ctl: \(failure)")
            }
        }
        if commandName == "subscribe" {
            try streamEvents(connection)
            return
        }
        if json {
            printLine(result.encoded)
        } else {
            printLine(ControlText.result(command: commandName, result))
        }
        if commandName == "touch" && result["answered"] == false {
            // Nothing was waiting: the touch is only remembered for a U2F request in the next 10 s.
            let reason = result["reason"]?.stringValue ?? "no request was waiting for a touch"
            printError("fidosim ctl: touch: \(reason)")
            throw Exit.failed
        }
        if commandName == "refuse" && result["answered"] == false {
            printError("fidosim ctl: refuse: no request was waiting for the user")
            throw Exit.failed
        }
    }

    /// A failure as `--json` prints it: the protocol's error object.
    static func errorLine(code: String, message: String) -> String {
        JSONValue.object(["ok": false, "error": ["code": .string(code), "message": .string(message)]]).encoded
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
            printLine(json ? event.encoded : ControlText.event(event))
        }
    }
}
