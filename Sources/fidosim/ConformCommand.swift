import ArgumentParser
import CTAPCore
import Conformance
import Console
import FIDOClient
import HIDAPIDevice
import HIDBridge

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
            --name, or the default socket when it belongs to this key) the runner does them itself.
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

    @Flag(help: "List the checks with their spec sections and exit.")
    var list = false

    @Flag(help: "List the HID devices hidapi sees (FIDO ones marked) and exit.")
    var listDevices = false

    func groups() throws -> Set<CheckGroup>? {
        guard !only.isEmpty else { return nil }
        var out: Set<CheckGroup> = []
        for name in only.flatMap({ $0.split(separator: ",") }).map({ String($0).trimmingSpaces }) {
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
        if !list && !listDevices {
            guard let device else {
                throw ValidationError("--device is required: hid:/dev/hidrawN, hid:VID:PID, hid:auto or udp:HOST:PORT")
            }
            do { _ = try DeviceAddress(parsing: device) } catch { throw ValidationError("\(error)") }
        }
        guard HIDBackend(rawValue: hidBackend) != nil else { throw ValidationError("--hid-backend: hidraw or libusb") }
        if control != nil && name != nil { throw ValidationError("give --control or --name, not both") }
    }

    func run() throws {
        if list {
            let checks = ConformanceSuite.all.filter { (try? groups())??.contains($0.group) ?? true }
            for check in [ConformanceSuite.blankStart] + checks {
                print("\(check.id)\t\(check.section)\t\(check.title)")
            }
            return
        }
        if listDevices {
            let devices: [HIDDeviceInfo]
            do {
                devices = try HIDAPIReportChannel.devices(backend: HIDBackend(rawValue: hidBackend)!, fidoOnly: false)
            } catch {
                printError("fidosim conform: \(error)")
                throw ExitCode(2)
            }
            for device in devices { print(device.listingLine) }
            if devices.isEmpty { print("hidapi (\(hidBackend) backend) lists no HID device") }
            return
        }
        let address = try DeviceAddress(parsing: device ?? "")
        let open = CTAPHIDClient.opener(address, backend: HIDBackend(rawValue: hidBackend)!)
        let deviceOperator: any DeviceOperator
        do {
            deviceOperator = try OperatorChoice.choose(
                noControl: noControl,
                socket: control ?? name.map { KeyFiles.defaultControlPath(name: $0) },
                defaultPath: KeyFiles.defaultControlPath(name: "default"),
                address: address,
                fidosimAAGUID: AuthenticatorConfiguration.fidosimAAGUID,
                open: open
            )
        } catch let error as OperatorChoiceError {
            throw ValidationError(error.description)
        } catch {
            printError("fidosim conform: \(error)")
            throw ExitCode(2)
        }
        if allowDestructive {
            printError(
                "fidosim conform: --allow-destructive: the key at \(address) will be RESET. Every credential on it, its PIN "
                    + "and its large blobs are erased, and its PIN is set, blocked and erased again."
            )
            if !deviceOperator.isAutomatic {
                printError("Press Enter to go on, or Ctrl-C to stop.")
                guard readLine() != nil else { throw ExitCode(2) }
            }
        }
        let runner = ConformanceRunner(
            options: .init(allowDestructive: allowDestructive, groups: try groups(), pin: try knownPIN()),
            deviceOperator: deviceOperator,
            open: open
        ) { result in
            print(result.line)
            fflush(nil)
        }
        let report: ConformanceReport
        do {
            report = try runner.run(device: address.description)
        } catch let stop as ConformanceStop {
            printError("fidosim conform: \(stop)")
            throw ExitCode(2)
        } catch {
            printError("fidosim conform: cannot reach the key at \(address): \(error)")
            throw ExitCode(2)
        }
        (deviceOperator as? ControlSocketOperator)?.finish()
        print(
            "\(report.count(.passed)) passed, \(report.failed) failed, \(report.count(.skipped)) skipped "
                + "in \(Int(report.seconds.rounded())) s"
        )
        for observation in report.observations { print("observed: \(observation)") }
        if let directory = self.report {
            do {
                try report.write(to: directory)
            } catch {
                throw ValidationError(error.description)
            }
            print("report: \(directory)/report.json, \(directory)/report.md")
        }
        if report.stoppedAnswering {
            printError("fidosim conform: the key stopped answering; the checks after that were not run")
            throw ExitCode(2)
        }
        if report.failed > 0 { throw ExitCode(1) }
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

extension String {
    var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
