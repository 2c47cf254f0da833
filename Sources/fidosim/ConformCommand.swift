import ArgumentParser
import CTAPCBOR
import CTAPCore
import Conformance
import ControlClient
import ControlProtocol
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
            for d in devices {
                let id = DeviceAddress.formatVIDPID(d.vendorID, d.productID)
                let fido =
                    d.usagePage == HIDDeviceInfo.fidoUsagePage ? "FIDO" : "page 0x" + String(d.usagePage, radix: 16)
                print("\(d.path)\t\(id)\t\(fido)\t\(d.manufacturer) \(d.product)\tserial \(d.serial)")
            }
            if devices.isEmpty { print("hidapi (\(hidBackend) backend) lists no HID device") }
            return
        }
        let address = try DeviceAddress(parsing: device ?? "")
        let open = CTAPHIDClient.opener(address, backend: HIDBackend(rawValue: hidBackend)!)
        let deviceOperator: any DeviceOperator
        do {
            deviceOperator = try chooseOperator(address: address, open: open)
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
            try writeReport(report, to: directory)
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
            guard let file = fopen(pinFile, "r") else {
                throw ValidationError("--pin-file \(pinFile): \(String(cString: strerror(errno)))")
            }
            defer { fclose(file) }
            var buffer = [CChar](repeating: 0, count: 256)
            guard fgets(&buffer, Int32(buffer.count), file) != nil else {
                throw ValidationError("--pin-file \(pinFile) is empty")
            }
            let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let pin =
                line.hasSuffix("\r\n")
                ? String(line.dropLast(2)) : line.hasSuffix("\n") ? String(line.dropLast()) : line
            guard !pin.isEmpty else { throw ValidationError("--pin-file \(pinFile): the first line is empty") }
            return pin
        }
        if let value = getenv("FIDOSIM_PIN").map({ String(cString: $0) }), !value.isEmpty { return value }
        return nil
    }

    func writeReport(_ report: ConformanceReport, to directory: String) throws {
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            throw ValidationError("--report \(directory): \(String(cString: strerror(errno)))")
        }
        for (name, text) in [("report.json", report.json.prettyEncoded + "\n"), ("report.md", report.markdown)] {
            let path = "\(directory)/\(name)"
            guard let file = fopen(path, "w") else {
                throw ValidationError("cannot write \(path): \(String(cString: strerror(errno)))")
            }
            fputs(text, file)
            fclose(file)
        }
    }

    func chooseOperator(address: DeviceAddress, open: () throws -> CTAPHIDClient) throws -> any DeviceOperator {
        if noControl { return TerminalOperator() }
        if let path = control ?? name.map({ KeyFiles.defaultControlPath(name: $0) }) {
            return try ControlSocketOperator(path: path)
        }
        // The default socket, when the key behind it is this one (same AAGUID and, over UDP, the same port).
        let path = KeyFiles.defaultControlPath(name: "default")
        guard let candidate = try? ControlSocketOperator(path: path), let status = candidate.status,
            let aaguid = status["aaguid"]?.stringValue, let transport = status["transport"]?.stringValue
        else { return try terminalOperator(address: address, open: open, lookedFor: path) }
        let hid = try open()
        try hid.initialize()
        let info = try CTAP2Client(hid: hid).getInfo()
        let sameKey = aaguid.filter { $0 != "-" }.lowercased() == Hex.string(info.aaguid)
        var samePort = true
        if case .udp(_, let port) = address { samePort = transport.hasSuffix(":\(port)") }
        guard sameKey && samePort else { return try terminalOperator(address: address, open: open, lookedFor: path) }
        printError("fidosim conform: using the control socket \(path) for touches and power cycles")
        return candidate
    }
}

extension ConformCommand {
    /// A person answers touches and replugs. A key that says it is a fidosim key (its AAGUID) has a control socket
    /// the runner did not find: say which one it looked for, and without a terminal stop instead of reporting
    /// failures that a person was meant to prevent.
    func terminalOperator(
        address: DeviceAddress,
        open: () throws -> CTAPHIDClient,
        lookedFor path: String
    ) throws
        -> TerminalOperator
    {
        guard let hid = try? open(), (try? hid.initialize()) != nil,
            let info = try? CTAP2Client(hid: hid).getInfo(), info.aaguid == AuthenticatorConfiguration.fidosimAAGUID
        else { return TerminalOperator() }
        let hint =
            "the key at \(address) is a fidosim key (its AAGUID), but its control socket is not \(path): give "
            + "--name NAME or --control PATH (fidosim serve prints its socket), or --no-control to answer its touches "
            + "and replugs yourself"
        guard isatty(STDIN_FILENO) != 0 else { throw ValidationError(hint) }
        printError("fidosim conform: \(hint)")
        return TerminalOperator()
    }
}

extension String {
    var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
