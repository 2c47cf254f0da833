/// A real key in a rig (firmware-spec/conformance.md, "Hardware in the loop"): commands act on it where a check needs
/// a person, and whatever has no command is asked of `person` (the terminal, or a harness over `--operator
/// stdio-json`).
///
/// - A touch or a refusal starts its command in the background, just before the request that needs it: the command
///   presses (a relay, a servo) while the key waits. A command still running when its check ends, or when a check
///   needs the key left alone, is stopped.
/// - A replug runs its command (`--replug-command`, or `uhubctl -l LOCATION -p PORT -a cycle`) to its end, at most
///   two minutes; the runner then waits for the key to come back by its serial number.
package final class CommandOperator: DeviceOperator {
    package struct Commands: Sendable {
        package var touch: String?
        package var refuse: String?
        package var replug: String?
        /// `LOCATION:PORT` of a hub port that uhubctl switches.
        package var uhubctl: (location: String, port: String)?

        package init(
            touch: String? = nil,
            refuse: String? = nil,
            replug: String? = nil,
            uhubctl: String? = nil
        )
            throws(OperatorChoiceError)
        {
            self.touch = touch
            self.refuse = refuse
            self.replug = replug
            if let uhubctl {
                guard replug == nil else {
                    throw OperatorChoiceError(description: "give --uhubctl or --replug-command, not both")
                }
                self.uhubctl = try Self.hubPort(uhubctl)
            }
            for (name, text) in [("touch", touch), ("refuse", refuse), ("replug", replug)] {
                if let text, text.allSatisfy({ $0 == " " || $0 == "\t" }) {
                    throw OperatorChoiceError(description: "--\(name)-command is empty")
                }
            }
        }

        /// Any command at all: then the runner acts through them (and a fidosim control socket is not looked for).
        package var any: Bool { touch != nil || refuse != nil || replug != nil || uhubctl != nil }

        /// `1-1.4:2` → location `1-1.4`, port `2` (uhubctl's `-l` and `-p`).
        static func hubPort(_ text: String) throws(OperatorChoiceError) -> (location: String, port: String) {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty, parts[0].allSatisfy({ $0.isNumber || $0 == "-" || $0 == "." }),
                let port = Int(parts[1]), (1...255).contains(port)
            else {
                throw OperatorChoiceError(
                    description: "--uhubctl \(text): expected LOCATION:PORT as uhubctl lists them (1-1.4:2)"
                )
            }
            return (String(parts[0]), String(port))
        }
    }

    let commands: Commands
    let person: any DeviceOperator
    /// Touch and refusal commands still running.
    var running: [ShellCommand] = []
    /// A refusal command runs for the next request that needs a touch: that request starts no touch command.
    var refusing = false

    package init(_ commands: Commands, person: any DeviceOperator) {
        self.commands = commands
        self.person = person
    }

    deinit { stopRunning() }

    /// Nobody needs to be there when touches and replugs have commands (or the harness answers them).
    package var isAutomatic: Bool {
        (commands.touch != nil || person.isAutomatic)
            && (commands.replug != nil || commands.uhubctl != nil || person.isAutomatic)
    }

    package func touchNeeded(_ what: String) throws {
        if refusing {
            refusing = false
            return
        }
        guard let touch = commands.touch else { return try person.touchNeeded(what) }
        stopRunning()
        running.append(try ShellCommand.shell(touch, what: what))
    }

    package func refuseNextTouch() throws {
        guard let refuse = commands.refuse else {
            if commands.touch != nil && !person.isAutomatic {
                throw CheckSkip("refusing a touch needs --refuse-command")
            }
            return try person.refuseNextTouch()
        }
        stopRunning()
        running.append(try ShellCommand.shell(refuse, what: "refuse the next request"))
        refusing = true
    }

    package func holdTouch() throws {
        stopRunning()
        if commands.touch == nil { try person.holdTouch() }
    }

    package func restore() throws {
        stopRunning()
        try person.restore()
    }

    package func powerCycle() throws {
        stopRunning()
        let command: ShellCommand
        if let replug = commands.replug {
            command = try ShellCommand.shell(replug, what: "replug")
        } else if let hub = commands.uhubctl {
            command = try ShellCommand.start(
                ["uhubctl", "-l", hub.location, "-p", hub.port, "-a", "cycle"],
                what: "replug",
                describe: "uhubctl -l \(hub.location) -p \(hub.port) -a cycle"
            )
        } else {
            return try person.powerCycle()
        }
        guard let status = command.wait(seconds: 120) else {
            throw CheckFailure("the replug command (\(command.describe)) did not end within 120 s")
        }
        guard status == 0 else {
            throw CheckFailure("the replug command (\(command.describe)) failed with exit status \(status)")
        }
    }

    func stopRunning() {
        refusing = false
        for command in running { command.stop() }
        running.removeAll()
    }
}
