import ArgumentParser
import Console
import ControlClient
import ControlProtocol
import HIDBridge

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

    var commandName: String { ControlArguments.command(command) }

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout must be positive") }
        _ = try buildParams()
    }

    func buildParams() throws -> [String: JSONValue] {
        do {
            return try ControlArguments.parameters(command: commandName, json: params, arguments: arguments)
        } catch {
            throw ValidationError(error.message)
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
            printLine(ControlText.result(command: commandName, result))
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
            printLine(json ? event.encoded : ControlText.event(event))
        }
    }
}
