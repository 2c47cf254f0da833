import ArgumentParser
import Conformance
import Console
import ControlProtocol
import FIDOClient
import HIDAPIDevice
import HIDBridge

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
                Nothing on the key changes: no credential is made, no PIN is tried, nothing needs a touch. The file \
                is a profile: fidosim serve --profile FILE presents the captured key.
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
                    + "touched by you when the terminal asks."
            )
        )
        var touch = false

        @Option(
            help: ArgumentHelp(
                "With --touch: run this shell command to touch the key instead of asking (as conform's).",
                valueName: "command"
            )
        )
        var touchCommand: String?

        func validate() throws {
            do { _ = try DeviceAddress(parsing: device) } catch { throw ValidationError("\(error)") }
            guard HIDBackend(rawValue: hidBackend) != nil else {
                throw ValidationError("--hid-backend: hidraw or libusb")
            }
            guard !name.isEmpty else { throw ValidationError("--name must not be empty") }
            if touchCommand != nil && !touch { throw ValidationError("--touch-command goes with --touch") }
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
            let capture: JSONValue
            do {
                var toucher: (any DeviceOperator)?
                if touch {
                    let person = TerminalOperator()
                    toucher =
                        touchCommand == nil
                        ? person : CommandOperator(try CommandOperator.Commands(touch: touchCommand), person: person)
                }
                capture = try KeyCapture(
                    open: KeyLink.opener(address, backend: backend),
                    hidDevice: hidDevice,
                    toucher: toucher
                )
                .run()
            } catch {
                throw Unreachable("profile capture: cannot capture the key at \(address): \(error)")
            }
            let document: JSONValue
            do {
                document = try ProfileFile.document(capture: capture, name: name)
                // What is written must load as a profile.
                _ = try ProfileFile.parse(document)
            } catch {
                throw Failed("profile capture: the key at \(address) answered so that no profile can be made: \(error)")
            }
            let text = document.prettyEncoded
            if output == "-" {
                print(text, terminator: "")
                return
            }
            guard let file = fopen(output, "w") else {
                throw ValidationError("-o \(output): \(String(cString: strerror(errno)))")
            }
            fputs(text, file)
            fclose(file)
            printError("fidosim profile capture: \(output) (serve --profile \(output) presents this key)")
        }
    }
}
