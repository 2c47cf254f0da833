import ArgumentParser
import CTAPCore
import Conformance
import Console
import FIDOClient
import HIDAPIDevice

/// Who acts on the key for `conform` and `profile capture`: a rig's commands (and a person or a harness for what has
/// none), else a fidosim key's control socket when one is given or found, else a person at the terminal.
enum OperatorSetup {
    /// `socket` is `--control` (or conform's `--name`); `kind` is `--operator` (`terminal` or `stdio-json`).
    static func make(
        address: DeviceAddress,
        open: () throws -> KeyLink,
        commands: CommandOperator.Commands,
        kind: String,
        noControl: Bool,
        socket: String?,
        command: String
    ) throws -> any DeviceOperator {
        if commands.any || kind != "terminal" {
            // A rig: its commands act, and a person (or the harness) does the rest; no control socket is looked for.
            var card = false
            if case .pcsc = address { card = true }
            let person: any DeviceOperator = kind == "stdio-json" ? JSONLinesOperator() : TerminalOperator(card: card)
            return commands.any ? CommandOperator(commands, person: person) : person
        }
        do {
            return try OperatorChoice.choose(
                noControl: noControl,
                socket: socket,
                defaultPath: KeyPaths.defaultControlPath(name: "default"),
                address: address,
                fidosimAAGUID: AuthenticatorConfiguration.fidosimAAGUID,
                open: open
            )
        } catch let error as OperatorChoiceError {
            throw ValidationError(error.description)
        } catch {
            throw Unreachable("\(command): \(error)")
        }
    }
}
