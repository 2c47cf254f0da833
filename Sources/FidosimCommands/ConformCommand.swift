import ArgumentParser
import Conformance
import Console
import ControlProtocol
import FIDOClient
import HIDAPIDevice

#if canImport(Glibc)
import Glibc
#endif

struct ConformCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conform",
        abstract:
            "Run the CTAP conformance checks against a key: a real one over hidapi, or fidosim over UDP or hidraw.",
        discussion: """
            DEVICE is hid:/dev/hidrawN, hid:VID:PID (hexadecimal), hid:auto (the first HID device on the FIDO usage \
            page) or udp:HOST:PORT; --list-devices shows what hidapi sees.
            Groups: \(CheckGroup.allCases.map(\.rawValue).joined(separator: ", ")).
            Without --allow-destructive nothing on the key changes beyond non-discoverable credentials (which use no \
            storage) and signature counters. With it, the run starts with a reset and sets, blocks and erases a PIN.
            A touch or a replug is asked of you on the terminal; for a fidosim key with a control socket (--control, \
            --name, or the default socket when it belongs to this key) the runner does them itself. A rig does them \
            for a real key: --touch-command, --refuse-command, --replug-command or --uhubctl, and --operator \
            stdio-json for a harness.
            Exit status: 0 when no check failed, 1 when one did, 2 when the key could not be reached or stopped \
            answering during the run.
            """
    )

    @Option(help: "The key: hid:/dev/hidrawN, hid:VID:PID, hid:auto or udp:HOST:PORT.")
    var device: String?

    @Option(help: "hidapi backend for hid: devices: hidraw or libusb.")
    var hidBackend: String = "hidraw"

    @Option(help: "Run only these groups (comma-separated, repeatable).")
    var only: [String] = []

    @Flag(help: "Run the checks that erase the key (reset, PIN lockout) or store on it.")
    var allowDestructive = false

    @Option(
        help: ArgumentHelp(
            "The PIN the key already has (for the PIN, credential management, large-blob and config checks); it is "
                + "tried once first, and a wrong one stops the run. --pin-file or FIDOSIM_PIN keep it out of ps.",
            valueName: "pin"
        )
    )
    var pin: String?

    @Option(help: "A file whose first line is the PIN the key already has.")
    var pinFile: String?

    @Option(help: "Write report.json and report.md into this directory.")
    var report: String?

    @Option(help: "A fidosim key's control socket: the runner touches, refuses and power-cycles through it.")
    var control: String?

    @Option(help: "A fidosim key's name: its default control socket.")
    var name: String?

    @Flag(help: "Never use a control socket, even the default one: ask a person.")
    var noControl = false

    @Option(
        help: ArgumentHelp(
            "A real key in a rig: run this shell command when a request needs a touch (in the background, while the "
                + "key waits; {what} is replaced by what the check asks, also in FIDOSIM_WHAT).",
            valueName: "command"
        )
    )
    var touchCommand: String?

    @Option(help: ArgumentHelp("Run this shell command to refuse the next request.", valueName: "command"))
    var refuseCommand: String?

    @Option(
        help: ArgumentHelp(
            "Run this shell command to unplug the key and plug it back in; the run waits for it, then for the key "
                + "to come back by its serial number.",
            valueName: "command"
        )
    )
    var replugCommand: String?

    @Option(
        help: ArgumentHelp(
            "Replug the key by switching the power of this hub port: uhubctl -l LOCATION -p PORT -a cycle.",
            valueName: "location:port"
        )
    )
    var uhubctl: String?

    @Option(
        help: ArgumentHelp(
            "Who is asked for what has no command: terminal (a person), or stdio-json (one JSON line per request on "
                + "stdout, answers on stdin; firmware-spec/conformance.md).",
            valueName: "kind"
        )
    )
    var `operator`: String = "terminal"

    @Flag(
        help: "Print the report as one JSON object on stdout (the form of report.json) instead of a line per check."
    )
    var json = false

    @Flag(help: "List the checks with their spec sections and exit.")
    var list = false

    @Option(
        name: .long,
        parsing: .upToNextOption,
        help: ArgumentHelp(
            "Compare two reports (report.json, or --report directories): print the checks whose outcome or answer "
                + "differ, and exit 1 when any does.",
            valueName: "report"
        )
    )
    var compare: [String] = []

    @Flag(help: "List the HID devices hidapi sees (FIDO ones marked) and exit.")
    var listDevices = false

    func groups() throws -> Set<CheckGroup>? {
        guard !only.isEmpty else { return nil }
        var out: Set<CheckGroup> = []
        for name in only.flatMap({ $0.split(separator: ",") }).map({ $0.trimmingBlanks() }) {
            guard let group = CheckGroup(rawValue: name) else {
                throw ValidationError(
                    "unknown group '\(name)': \(CheckGroup.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
            out.insert(group)
        }
        return out
    }

    func validate() throws {
        _ = try groups()
        if !compare.isEmpty {
            guard compare.count == 2 else { throw ValidationError("--compare takes two reports: A.json B.json") }
            guard device == nil else { throw ValidationError("--compare reads two reports: no --device") }
            return
        }
        if !list && !listDevices {
            guard let device else {
                throw ValidationError(
                    "--device is required: hid:/dev/hidrawN, hid:VID:PID, hid:auto, udp:HOST:PORT or pcsc:READER"
                )
            }
            do { _ = try DeviceAddress(parsing: device) } catch { throw ValidationError("\(error)") }
        }
        guard HIDBackend(rawValue: hidBackend) != nil else { throw ValidationError("--hid-backend: hidraw or libusb") }
        if control != nil && name != nil { throw ValidationError("give --control or --name, not both") }
        guard ["terminal", "stdio-json"].contains(`operator`) else {
            throw ValidationError("--operator \(`operator`): terminal or stdio-json")
        }
        let commands = try rigCommands()
        if (commands.any || `operator` != "terminal") && (control != nil || name != nil) {
            throw ValidationError(
                "--control and --name act on a fidosim key through its socket: not with the rig's commands or --operator"
            )
        }
    }

    func run() throws {
        if !compare.isEmpty {
            let comparison: ReportComparison
            do {
                comparison = try ReportComparison(try ReportFile.read(compare[0]), try ReportFile.read(compare[1]))
            } catch {
                throw ValidationError("\(error)")
            }
            for line in comparison.differences { print(line) }
            print(
                comparison.differences.isEmpty
                    ? "the reports agree: \(comparison.common) checks, the same outcomes and answers"
                    : "\(comparison.differences.count) difference\(comparison.differences.count == 1 ? "" : "s") "
                        + "(\(comparison.common) checks in both; first report | second report)"
            )
            if !comparison.differences.isEmpty { throw Exit.failed }
            return
        }
        if list {
            let checks = ConformanceSuite.all.filter { (try? groups())??.contains($0.group) ?? true }
            let all = [ConformanceSuite.blankStart] + checks
            if json {
                let list = all.map { check -> JSONValue in
                    ["id": .string(check.id), "section": .string(check.section), "title": .string(check.title)]
                }
                print(JSONValue.array(list).encoded)
                return
            }
            for check in all {
                print("\(check.id)\t\(check.section)\t\(check.title)")
            }
            return
        }
        if listDevices {
            let devices: [HIDDeviceInfo]
            do {
                devices = try HIDAPIReportChannel.devices(backend: HIDBackend(rawValue: hidBackend)!, fidoOnly: false)
            } catch {
                throw Failed("conform: \(error)")
            }
            // The device's strings are its own (a key can name itself anything): printed escaped, field by field.
            for device in devices {
                print(
                    device.listingLine.split(separator: "\t", omittingEmptySubsequences: false)
                        .map { TerminalText.escape(String($0)) }.joined(separator: "\t")
                )
            }
            if devices.isEmpty { print("hidapi (\(hidBackend) backend) lists no HID device") }
            // Readers, when a PC/SC service runs: a key in one is pcsc:NAME (any part of the name).
            if let readers = try? PCSCCard.readers() {
                for reader in readers { print("pcsc:\(TerminalText.escape(reader))\tPC/SC reader") }
            }
            return
        }
        let address = try DeviceAddress(parsing: device ?? "")
        let open = KeyLink.opener(address, backend: HIDBackend(rawValue: hidBackend)!)
        let deviceOperator = try OperatorSetup.make(
            address: address,
            open: open,
            commands: try rigCommands(),
            kind: `operator`,
            noControl: noControl,
            socket: control ?? name.map { KeyPaths.defaultControlPath(name: $0) },
            command: "conform"
        )
        if allowDestructive {
            printError(
                "fidosim conform: --allow-destructive: the key at \(address) will be RESET. Every credential on it, its PIN "
                    + "and its large blobs are erased, and its PIN is set, blocked and erased again."
            )
            if !deviceOperator.isAutomatic {
                printError("Press Enter to go on, or Ctrl-C to stop.")
                guard readLine() != nil else { throw Failed("conform: no answer on standard input; nothing was run") }
            }
        }
        // On a terminal each line says how far the run is; in a pipe or file the lines stay as they are.
        let selected = try groups()
        var isCard = false
        if case .pcsc = address { isCard = true }
        let options = ConformanceRunner.Options(
            allowDestructive: allowDestructive,
            groups: selected,
            pin: try knownPIN(),
            card: isCard
        )
        let total =
            1
            + ConformanceSuite.all.filter { (selected?.contains($0.group) ?? true) && options.applies($0.group) }.count
        let terminal = isatty(STDOUT_FILENO) == 1
        nonisolated(unsafe) var done = 0
        let quiet = json
        let runner = ConformanceRunner(
            options: options,
            deviceOperator: deviceOperator,
            open: open
        ) { result in
            done += 1
            guard !quiet else { return }
            print(terminal ? "[\(done)/\(total)] \(result.line)" : result.line)
            fflush(nil)
        }
        let report: ConformanceReport
        do {
            report = try runner.run(device: address.description)
        } catch let stop as ConformanceStop {
            // What stops a run before it spends a PIN retry is what it was given (--pin): bad input.
            printError("fidosim conform: \(stop)")
            throw Exit.usage
        } catch let error as ClientError {
            switch error {
            case .transport, .timeout:
                throw Unreachable("conform: cannot reach the key at \(address): \(error)")
            case .malformed, .hidError:
                // The key answered, but not so that a run can start (its getInfo, say): the key fails.
                throw Failed("conform: the key at \(address) cannot be tested: \(error)")
            }
        } catch {
            throw Unreachable("conform: cannot reach the key at \(address): \(error)")
        }
        (deviceOperator as? ControlSocketOperator)?.finish()
        // With --json, stdout holds the report alone; the summary goes to stderr.
        let summary: (String) -> Void = json ? { printError($0) } : { print($0) }
        if json { print(report.json.encoded) }
        summary(
            "\(report.count(.passed)) passed, \(report.failed) failed, \(report.count(.skipped)) skipped "
                + "in \(Int(report.seconds.rounded())) s"
        )
        for observation in report.observations { summary("observed: \(observation)") }
        if let directory = self.report {
            do {
                try report.write(to: directory)
            } catch {
                throw ValidationError(error.description)
            }
            summary("report: \(directory)/report.json, \(directory)/report.md")
        }
        if !report.hungAfter.isEmpty {
            printError(
                "fidosim conform: the key stopped answering after \(report.hungAfter.joined(separator: ", "))"
                    + (report.stoppedAnswering ? "" : "; each time a power cycle brought it back")
            )
        }
        if report.stoppedAnswering {
            printError("fidosim conform: the key stopped answering; the checks after that were not run")
            throw Exit.unreachable
        }
        if report.failed > 0 { throw Exit.failed }
    }

    /// The rig's commands (--touch-command, --refuse-command, --replug-command, --uhubctl).
    func rigCommands() throws -> CommandOperator.Commands {
        do {
            return try CommandOperator.Commands(
                touch: touchCommand,
                refuse: refuseCommand,
                replug: replugCommand,
                uhubctl: uhubctl
            )
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The PIN from --pin, --pin-file (its first line) or the environment's FIDOSIM_PIN, in that order.
    func knownPIN() throws -> String? {
        if let pin { return pin }
        if let pinFile {
            do {
                return try PINFile.firstLine(of: pinFile)
            } catch {
                throw ValidationError(error.description)
            }
        }
        if let value = getenv("FIDOSIM_PIN").map({ String(cString: $0) }), !value.isEmpty { return value }
        return nil
    }
}
