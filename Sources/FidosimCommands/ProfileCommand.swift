import ArgumentParser
import Capture
import Conformance
import Console
import ControlProtocol
import FIDOClient
import HIDAPIDevice
import Profiles

#if canImport(Glibc)
import Glibc
#endif

/// `fidosim profile capture`: a profile file from what a key shows (firmware-spec/profiles.md, "Captured
/// profiles"), which `serve --profile FILE` reproduces.
struct ProfileCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile",
        abstract: "Capture a key's profile: what it shows, recorded without changing it, for serve --profile.",
        subcommands: [Capture.self]
    )

    struct Capture: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record a key's getInfo, CTAPHID identity, USB identity, answers to harmless probes and timing.",
            discussion: """
                Without --allow-destructive nothing on the key changes: no credential is made, no PIN is tried, \
                nothing needs a touch (but with --touch). With it the key is reset at the start and at the end, and \
                its PIN, token, credential management and capacity rules are recorded. The file is a profile: \
                fidosim serve --profile FILE presents the captured key (firmware-spec/profiles.md).
                """
        )

        @Option(help: "The key: hid:/dev/hidrawN, hid:VID:PID, hid:auto, udp:HOST:PORT[?reply-port=N] or pcsc:READER.")
        var device: String

        @Option(name: [.customShort("o"), .long], help: "Write the profile here (- for standard output).")
        var output: String

        @Option(help: "The profile's name (serve --profile shows it in status).")
        var name: String = "captured"

        @Option(help: "hidapi backend for hid: devices: hidraw or libusb.")
        var hidBackend: String = "hidraw"

        @Flag(
            help: ArgumentHelp(
                "Also time the key's keepalives while it waits for a touch: one authenticatorSelection (FIDO_2_1), "
                    + "touched by --touch-command, a fidosim key's control socket, or you when the terminal asks."
            )
        )
        var touch = false

        @Option(
            help: ArgumentHelp(
                "Run this shell command to touch the key instead of asking (as conform's; with --touch or "
                    + "--allow-destructive).",
                valueName: "command"
            )
        )
        var touchCommand: String?

        @Flag(
            help: ArgumentHelp(
                "Also record what needs a reset: PIN, token and credential management rules and the key's capacity. "
                    + "The key is RESET at the start and at the end; everything on it is erased."
            )
        )
        var allowDestructive = false

        @Option(help: "With --allow-destructive: make at most this many discoverable credentials to find the capacity.")
        var capacityLimit = 256

        @Option(help: "A fidosim key's control socket: touches and power cycles go through it.")
        var control: String?

        @Flag(help: "Never use a control socket, even the default one: ask a person.")
        var noControl = false

        @Option(
            help: ArgumentHelp(
                "With --allow-destructive: run this shell command to unplug the key and plug it back in (as conform's).",
                valueName: "command"
            )
        )
        var replugCommand: String?

        @Option(
            help: ArgumentHelp(
                "With --allow-destructive: replug the key by switching this hub port (uhubctl -a cycle).",
                valueName: "location:port"
            )
        )
        var uhubctl: String?

        @Option(
            help: ArgumentHelp(
                "Who is asked for what has no command: terminal or stdio-json (as conform's).",
                valueName: "kind"
            )
        )
        var `operator`: String = "terminal"

        func validate() throws {
            do { _ = try DeviceAddress(parsing: device) } catch { throw ValidationError("\(error)") }
            guard HIDBackend(rawValue: hidBackend) != nil else {
                throw ValidationError("--hid-backend: hidraw or libusb")
            }
            guard !name.isEmpty else { throw ValidationError("--name must not be empty") }
            if touchCommand != nil && !touch && !allowDestructive {
                throw ValidationError("--touch-command goes with --touch or --allow-destructive")
            }
            if (replugCommand != nil || uhubctl != nil) && !allowDestructive {
                throw ValidationError("--replug-command and --uhubctl go with --allow-destructive")
            }
            guard (1...10_000).contains(capacityLimit) else { throw ValidationError("--capacity-limit: 1 to 10000") }
            guard ["terminal", "stdio-json"].contains(`operator`) else {
                throw ValidationError("--operator \(`operator`): terminal or stdio-json")
            }
            let commands = try rigCommands()
            if (commands.any || `operator` != "terminal") && control != nil {
                throw ValidationError("--control acts on a fidosim key through its socket: not with the rig's commands")
            }
        }

        func rigCommands() throws -> CommandOperator.Commands {
            do {
                return try CommandOperator.Commands(touch: touchCommand, replug: replugCommand, uhubctl: uhubctl)
            } catch {
                throw ValidationError(error.description)
            }
        }

        func run() throws {
            let address = try DeviceAddress(parsing: device)
            let backend = HIDBackend(rawValue: hidBackend)!
            var hidDevice: HIDDeviceInfo?
            switch address {
            case .hidPath, .hidID, .hidAuto:
                let devices = (try? HIDAPIReportChannel.devices(backend: backend, fidoOnly: false)) ?? []
                if let path = address.hidDevicePath(among: devices, knownSerial: nil) {
                    hidDevice = devices.first { $0.path == path }
                }
            case .udp, .pcsc:
                break
            }
            let open = KeyLink.opener(address, backend: backend)
            var deviceOperator: (any DeviceOperator)?
            if touch || allowDestructive {
                deviceOperator = try OperatorSetup.make(
                    address: address,
                    open: open,
                    commands: try rigCommands(),
                    kind: `operator`,
                    noControl: noControl,
                    socket: control,
                    command: "profile capture"
                )
            }
            // Where the profile goes is checked before the key is touched: a destructive capture that cannot be
            // written would have erased the key for nothing.
            if output != "-" {
                let slash = output.lastIndex(of: "/")
                let directory = slash.map { output[..<$0].isEmpty ? "/" : String(output[..<$0]) } ?? "."
                let writable = access(output, F_OK) == 0 ? access(output, W_OK) == 0 : access(directory, W_OK) == 0
                guard writable else {
                    throw ValidationError("-o \(output): \(String(cString: strerror(errno))); nothing was done")
                }
            }
            if allowDestructive, let deviceOperator {
                printError(
                    "fidosim profile capture: --allow-destructive: the key at \(address) will be RESET, at the start "
                        + "and at the end. Every credential on it and its PIN are erased."
                )
                if !deviceOperator.isAutomatic {
                    printError("Press Enter to go on, or Ctrl-C to stop.")
                    guard readLine() != nil else {
                        throw Failed("profile capture: no answer on standard input; nothing was done")
                    }
                }
            }
            let capture: CaptureRecord
            do {
                capture = try KeyCapture(
                    open: open,
                    hidDevice: hidDevice,
                    toucher: touch ? deviceOperator : nil,
                    destructive: allowDestructive ? deviceOperator.map { ($0, capacityLimit) } : nil
                )
                .run()
            } catch let stopped as CaptureStopped {
                throw Failed("profile capture: the key at \(address): \(stopped); nothing was written")
            } catch {
                throw Unreachable("profile capture: cannot capture the key at \(address): \(error)")
            }
            let document: JSONValue
            do {
                document = try ProfileFile.document(capture: capture, name: name)
                // What is written must load as a profile.
                _ = try ProfileFile.parse(document)
            } catch {
                let why = TerminalText.escape("\(error)")  // quotes the key's strings
                throw Failed("profile capture: the key at \(address) answered so that no profile can be made: \(why)")
            }
            for difference in ProfileFile.unreproduced(capture) {
                printError(
                    "fidosim profile capture: the copy will answer otherwise (fidosim's fixed rule): "
                        + TerminalText.escape(difference)
                )
            }
            let text = document.prettyEncoded
            if output == "-" {
                print(text, terminator: "")
                return
            }
            // Written whole and never through a link planted at the name (WholeFile).
            do {
                try WholeFile.write(Array(text.utf8), to: output, mode: 0o644)
            } catch {
                throw ValidationError("-o \(error)")
            }
            printError("fidosim profile capture: \(output) (serve --profile \(output) presents this key)")
        }
    }
}
