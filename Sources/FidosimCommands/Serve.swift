import ArgumentParser
import Console
import ControlProtocol
import HIDAPIDevice
import HIDBridge
import Logging
import Profiles
import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

extension TransportChoice: ExpressibleByArgument {}
extension Durability: ExpressibleByArgument {}
extension GeometryChoice: ExpressibleByArgument {}

enum OnOff: String, ExpressibleByArgument, CaseIterable {
    case on, off
}

enum NotifyChoice: String, ExpressibleByArgument, CaseIterable {
    case auto, on, off
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a virtual security key.",
        discussion: """
            The key runs until SIGINT or SIGTERM. On UDP, the 64-byte power-cycle datagram \
            (ac1052ca…7250dc) unplugs and re-plugs it: volatile state goes, credentials stay.
            """
    )

    @OptionGroup var options: ServeOptions

    func run() throws { try options.serve() }
}

/// `serve`'s options, which `run` and `webdriver` share as an option group (a group of arguments, not a command:
/// their usage is their own, `fidosim run ...`, not `fidosim serve run ...`).
struct ServeOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Transport: auto picks uhid when /dev/uhid is writable, else udp; hid serves through a HID bridge board "
                + "(--device); pcsc is a card in vsmartcard's vpcd reader (NFC), alone or given beside another "
                + "(--transport uhid --transport pcsc: one key on USB and NFC); usbip exports the key over USB/IP, alone "
                + "or beside another (--transport uhid --transport usbip: one key on this machine and another host)."
        )
    )
    var transport: [TransportChoice] = []

    @Option(
        help: "--transport usbip: the address the USB/IP server listens on (another machine's needs --allow-remote)."
    )
    var usbipHost: String = "127.0.0.1"

    @Option(
        help:
            "--transport usbip: the USB/IP server's TCP port (0 picks a free one; key N of --keys takes port + N - 1)."
    )
    var usbipPort: UInt16 = 3240

    @Option(help: "--transport pcsc: the address vpcd listens on for the card.")
    var vpcdHost: String = "127.0.0.1"

    @Option(help: "--transport pcsc: vpcd's port (key N of --keys takes port + N - 1).")
    var vpcdPort: UInt16 = 35963

    @Option(help: "--transport hid: the bridge board, as VID:PID in hex (1209:0001) or a hidraw path.")
    var device: String?

    @Option(help: "--transport hid: hidapi backend, hidraw or libusb.")
    var hidBackend: String = "hidraw"

    @Option(help: "--transport gadget: the USB device controller (default: the first in /sys/class/udc).")
    var udc: String?

    @Option(help: "The uhid character device.")
    var uhidPath: String = "/dev/uhid"

    // The USB identity options are optional so that a captured profile's identity yields to any of them given, even
    // one equal to fidosim's default.
    @Option(help: "USB vendor id of the uhid device (hex with 0x, or decimal; default 0x1209).")
    var vendorId: String?

    @Option(help: "USB product id of the uhid device (hex with 0x, or decimal; default 0xF1D0).")
    var productId: String?

    @Option(help: "Product name of the uhid device (default \"fidosim virtual FIDO2 key\").")
    var deviceName: String?

    @Option(help: "Serial number of the uhid device (default: random per run with --flash memory).")
    var serial: String?

    @Option(help: "UDP address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "UDP port to listen on (0 picks a free one).")
    var port: UInt16 = 8111

    @Flag(help: "Let --host be an address other machines reach (anyone who reaches it can use the key).")
    var allowRemote = false

    @Flag(
        name: [.customLong("any-local-user"), .customLong("udp-any-user")],
        help: ArgumentHelp(
            "Let every local user's programs use the key over UDP, USB/IP and the card (test rigs that run a client "
                + "as another user); by default only this user's and root's may. Never the control socket."
        )
    )
    var anyLocalUser = false

    @Option(
        help: ArgumentHelp(
            "On UDP, whether the power-cycle datagram unplugs the key (any program that may send to the key can "
                + "then unplug it): on or off."
        )
    )
    var udpPowerCycle: OnOff = .on

    @Option(
        help: ArgumentHelp(
            "On UDP, answer to this port of the sender's address instead of the sender's port (solo1's simulation "
                + "answers to 7112; clients written for it listen there).",
            valueName: "port"
        )
    )
    var udpReplyPort: UInt16?

    @Option(
        help: ArgumentHelp(
            "How the simulated user answers a touch request: approve, deny, prompt, or delay:MS (default: prompt on "
                + "uhid, gadget and hid, where the desktop sees the key; approve on UDP).",
            discussion: "approve touches after --presence-delay; prompt asks the person: on the terminal (y or Enter "
                + "touches, n refuses) and, in a graphical session, with a desktop notification.",
            valueName: "mode"
        )
    )
    var presence: String?

    @Option(help: "Seconds a prompt waits for an answer before the request fails with USER_ACTION_TIMEOUT (1 to 600).")
    var presenceTimeout: Int = 30

    @Option(
        help: ArgumentHelp(
            "Desktop notifications for prompts (freedesktop Notifications through notify-send): auto (when a session "
                + "bus and notify-send exist), on, or off.",
            valueName: "auto|on|off"
        )
    )
    var notify: NotifyChoice = .auto

    @Option(help: "Milliseconds before the automatic touch of approve and deny.")
    var presenceDelay: Int = 200

    @Option(help: "Refuse authenticatorReset more than 10 s after power-up (on), or allow it any time (off).")
    var resetWindow: OnOff = .on

    @Option(
        help: ArgumentHelp(
            "Where credentials live: a flash image file, or memory (lost when the process ends).",
            discussion: "Default: $XDG_DATA_HOME/fidosim/NAME.img, else ~/.local/share/fidosim/NAME.img.",
            valueName: "path|memory"
        )
    )
    var flash: String?

    @Option(
        help: ArgumentHelp(
            "What an acknowledged write to the flash image survives: process (default: written to the file before "
                + "the answer; a killed process loses nothing, a host crash may lose the last writes) or host "
                + "(also flushed to the disk with fdatasync before the answer).",
            valueName: "process|host"
        )
    )
    var durability: Durability = .process

    @Option(help: "Name of this key: its default flash image is NAME.img.")
    var name: String = "default"

    @Option(help: "Geometry of a new flash image: nrf52840 (20 pages of 4 KiB), stm32l4, large (4 MiB).")
    var flashGeometry: GeometryChoice?

    @Option(
        help: ArgumentHelp(
            "Built-in user verification: none, or fingerprint (a simulated sensor; approve = a matching finger, "
                + "deny = one that does not match).",
            valueName: "none|fingerprint"
        )
    )
    var uv: String = "none"

    @Option(
        help: ArgumentHelp(
            "maxMsgSize in getInfo, 1024 to 7609 (default: 1200 over uhid, whose kernel queue holds 32 reports; "
                + "7609 over UDP).",
            valueName: "bytes"
        )
    )
    var maxMsgSize: Int?

    @Option(help: "With --uv fingerprint: fingerprints enrolled at start when none are (test rigs).")
    var enrolledFingers: Int = 0

    @Option(
        name: .customLong("ep-rp"),
        help: ArgumentHelp(
            "An RP ID that gets vendor-facilitated enterprise attestation once it is enabled (repeatable).",
            valueName: "rp-id"
        )
    )
    var enterpriseRPs: [String] = []

    @Option(
        name: .customLong("min-pin-length-rp"),
        help: ArgumentHelp(
            "An RP ID that may read the minimum PIN length through the minPinLength extension (repeatable).",
            valueName: "rp-id"
        )
    )
    var minPinLengthRPs: [String] = []

    @Option(
        help: ArgumentHelp(
            "The transports over which reset is allowed (getInfo transportsForReset); reset over another is refused.",
            valueName: "usb,nfc"
        )
    )
    var resetTransports: String?

    @Option(
        help: ArgumentHelp(
            "The URL of the key's PIN complexity policy (getInfo pinComplexityPolicyURL).",
            valueName: "url"
        )
    )
    var pinPolicyUrl: String?

    @Option(
        help: ArgumentHelp(
            "New credentials are backup eligible (WebAuthn Level 3 BE flag); default: the profile's, off.",
            valueName: "on|off"
        )
    )
    var backupEligible: OnOff?

    @Option(
        help: ArgumentHelp(
            "New credentials are backed up (BS flag; needs backup eligibility); default: the profile's, off.",
            valueName: "on|off"
        )
    )
    var backupState: OnOff?

    @Option(
        help: ArgumentHelp(
            "The control socket (fidosim ctl), or off.",
            discussion: "Default: $XDG_RUNTIME_DIR/fidosim/NAME.sock, else ~/.local/share/fidosim/NAME.sock.",
            valueName: "path|off"
        )
    )
    var control: String?

    @Option(
        help: ArgumentHelp(
            "Record every HID report and each decoded CTAP message: pcapng for a .pcapng path (Wireshark, tshark), "
                + "JSON lines otherwise.",
            valueName: "path"
        )
    )
    var trace: String?

    @Option(
        help: ArgumentHelp(
            "The model of key to present: a built-in profile (fidosim profiles lists them) or a profile JSON file.",
            valueName: "name|path"
        )
    )
    var profile: String = "fidosim"

    @Option(
        help: ArgumentHelp(
            "How many virtual keys to serve (0 to 128; 0 needs --hub): the first is NAME, key i (2 to N) is NAME-i "
                + "with its own image, next UDP port, socket."
        )
    )
    var keys: Int = 1

    @Option(
        help: ArgumentHelp(
            "A control socket that adds and removes keys while the process runs (WebDriver's Add and Remove Virtual "
                + "Authenticator; firmware-spec/control.md, The hub); on the private, uhid and UDP transports.",
            valueName: "path"
        )
    )
    var hub: String?

    @Option(
        help: ArgumentHelp(
            "A JSON file naming each key: {\"keys\": [{\"name\", \"flash\", \"port\", \"serial\", \"control\", "
                + "\"trace\", \"presence\", \"uv\", \"enrolledFingers\"}, ...]}; unnamed members come from the command line.",
            valueName: "path"
        )
    )
    var config: String?

    @Option(
        help: ArgumentHelp(
            "Once every key is up, write one JSON line here: pid, and per key its transport, host and port (UDP), "
                + "serial (uhid), control socket and flash (test rigs read it instead of the status lines).",
            valueName: "path"
        )
    )
    var readyFile: String?

    @Option(
        help: ArgumentHelp(
            "Log level: trace, debug, info, notice, warning, error, critical (default: info; for run and webdriver "
                + "warning, so that a request's line does not land among the program's: info brings it back)."
        )
    )
    var logLevel: String?

    @Option(
        help: ArgumentHelp(
            "After handling reports, poll without sleeping for this many microseconds (0 to 10000) before waiting: "
                + "back-to-back requests then find the loop awake, for a core's time while they come.",
            valueName: "microseconds"
        )
    )
    var busyPoll: Int = 0

    func validate() throws {
        guard (0...Self.maxKeys).contains(keys) else { throw ValidationError("--keys must be 0 to \(Self.maxKeys)") }
        if keys == 0 && hub == nil { throw ValidationError("--keys 0 serves no key until one is added: give --hub") }
        if hub != nil && transport.contains(where: { ![.privateHID, .uhid, .udp, .auto].contains($0) }) {
            throw ValidationError("--hub adds keys on the private, uhid and UDP transports, not on \(transport)")
        }
        if envFile != nil && !transport.contains(.privateHID) {
            throw ValidationError("--env-file is for --transport private")
        }
        if backupState == .on && backupEligible == .off {
            throw ValidationError(
                "--backup-state on needs --backup-eligible on: only an eligible credential is backed up"
            )
        }
        let transports = (resetTransports ?? "usb").split(separator: ",", omittingEmptySubsequences: false)
        guard transports.allSatisfy({ ["usb", "nfc", "ble", "internal", "hybrid", "smart-card"].contains($0) }),
            Set(transports).count == transports.count
        else {
            throw ValidationError(
                "--reset-transports takes distinct transports from usb, nfc, ble, internal, hybrid, smart-card"
            )
        }
        if let url = pinPolicyUrl, url.isEmpty || url.utf8.count > 256 {
            throw ValidationError("--pin-policy-url must be 1 to 256 bytes")
        }
        guard (0...10_000).contains(busyPoll) else {
            throw ValidationError("--busy-poll must be 0 to 10000 microseconds")
        }
        if config != nil && keys != 1 { throw ValidationError("give --keys or --config, not both") }
        guard uv == "none" || uv == "fingerprint" else {
            throw ValidationError("unknown --uv '\(uv)': use none or fingerprint")
        }
        if let maxMsgSize, !(1024...7609).contains(maxMsgSize) {
            throw ValidationError("--max-msg-size must be 1024 to 7609")
        }
        guard (0...5).contains(enrolledFingers) else {
            throw ValidationError("--enrolled-fingers must be 0 to 5")
        }
        if let logLevel, Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError(
                "unknown --log-level '\(logLevel)': use trace, debug, info, notice, warning, error or critical"
            )
        }
        guard (0...600_000).contains(presenceDelay) else {
            throw ValidationError("--presence-delay must be between 0 and 600000 ms")
        }
        if let presence, PresenceMode(argument: presence) == nil {
            throw ValidationError("unknown --presence '\(presence)': use approve, deny, prompt or delay:MS")
        }
        guard (1...600).contains(presenceTimeout) else {
            throw ValidationError("--presence-timeout must be 1 to 600 seconds")
        }
        guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 != UInt8(ascii: "/") }) else {
            throw ValidationError("--name must be a non-empty word without '/'")
        }
        let plan: TransportPlan
        do {
            plan = try TransportPlan(transport)
        } catch {
            throw ValidationError(error.message)
        }
        if let udpReplyPort, udpReplyPort == 0 {
            throw ValidationError("--udp-reply-port takes a port from 1 to 65535")
        }
        if udpReplyPort != nil && !(transport.isEmpty || transport.contains(.udp) || transport.contains(.auto)) {
            throw ValidationError("--udp-reply-port is for --transport udp")
        }
        if !transport.contains(.pcsc) && (vpcdPort != 35963 || vpcdHost != "127.0.0.1") {
            throw ValidationError("--vpcd-host and --vpcd-port are for --transport pcsc")
        }
        if !transport.contains(.usbip) && (usbipPort != 3240 || usbipHost != "127.0.0.1") {
            throw ValidationError("--usbip-host and --usbip-port are for --transport usbip")
        }
        if !KeyFactory.isLoopback(usbipHost) && !allowRemote {
            throw ValidationError(
                "--usbip-host \(usbipHost) can be reached from other machines, and anyone who reaches it can attach the "
                    + "key and use it: add --allow-remote to mean it, or listen on 127.0.0.1"
            )
        }
        if !KeyFactory.isLoopback(vpcdHost) && !allowRemote {
            throw ValidationError(
                "--vpcd-host \(vpcdHost) is another machine: the key would be a card in a reader there; "
                    + "add --allow-remote to mean it"
            )
        }
        let transport = plan.hid
        if transport == .hid {
            guard let device, !device.isEmpty else {
                throw ValidationError("--transport hid needs --device VID:PID (hex, e.g. 1209:0001) or a hidraw path")
            }
            guard HIDAPITransport.parseVIDPID(device) != nil || device.hasPrefix("/") else {
                throw ValidationError(
                    "--device \(device): expected VID:PID in hex (1209:0001) or a path (/dev/hidraw3)"
                )
            }
            guard keys == 1 && config == nil else {
                throw ValidationError("--transport hid serves one key through one device: not with --keys or --config")
            }
        } else if device != nil {
            throw ValidationError("--device is for --transport hid")
        }
        if transport == .gadget {
            guard keys == 1 && config == nil else {
                throw ValidationError("--transport gadget serves one key: not with --keys or --config")
            }
        } else if udc != nil {
            throw ValidationError("--udc is for --transport gadget")
        }
        guard HIDBackend(rawValue: hidBackend) != nil else {
            throw ValidationError("--hid-backend \(hidBackend): hidraw or libusb")
        }
        if let vendorId, Self.parseID(vendorId) == nil {
            throw ValidationError("--vendor-id \(vendorId): not a 16-bit id")
        }
        if let productId, Self.parseID(productId) == nil {
            throw ValidationError("--product-id \(productId): not a 16-bit id")
        }
        if let serial, serial.isEmpty || serial.utf8.count > 63 {
            throw ValidationError("--serial must be 1 to 63 bytes")
        }
        if !KeyFactory.isLoopback(host) && !allowRemote {
            throw ValidationError(
                "--host \(host) can be reached from other machines, and anyone who reaches the key can use it: "
                    + "add --allow-remote to mean it, or listen on 127.0.0.1"
            )
        }
    }

    /// The most keys `--keys` starts (the hub adds more: docs/performance.md has what a key costs).
    static let maxKeys = 128

    /// The keys to serve: from --config, else --keys copies of the command line's key.
    func keySpecs() throws -> [KeySpec] {
        let base = KeySpec(
            name: name,
            flash: flash ?? KeyPaths.defaultImagePath(name: name),
            port: port,
            serial: serial,
            control: control ?? KeyPaths.defaultControlPath(name: name),
            trace: trace,
            presence: presence,
            uv: uv,
            enrolledFingers: enrolledFingers,
            profile: profile
        )
        if let config {
            return try usage { () throws(KeySetupError) in try ServeConfig.load(config, base: base) }
        }
        return try usage { () throws(KeySetupError) in try base.copies(count: keys, flash: flash, control: control) }
    }

    @Option(
        help: ArgumentHelp(
            "--transport private: where to write the environment that makes a program part of the key's tree "
                + "(LD_PRELOAD and UMOCKDEV_DIR, as shell export lines).",
            discussion: "Default: $XDG_RUNTIME_DIR/fidosim/NAME.env, else ~/.local/share/fidosim/NAME.env.",
            valueName: "path"
        )
    )
    var envFile: String?

    /// `fidosim serve`: the keys, served until a signal stops them.
    func serve() throws {
        let privateKey = transport.contains(.privateHID)
        if privateKey { try PrivateKeySetup.runUnderPreload() }
        let session = try start()
        var extra: [String: JSONValue] = [:]
        if privateKey, let testbed = session.testbed {
            let path = envFile ?? KeyPaths.defaultEnvironmentPath(name: name)
            try PrivateKeySetup.writeEnvironment(testbed, to: path)
            printLine("fidosim: the key's environment is in \(path) (. \(path), then start the program)")
            extra["envFile"] = .string(path)
            extra["umockdevDir"] = .string(testbed.root)
        }
        try session.writeReadyFile(readyFile, extra: extra)
        session.runner().run()
        session.testbed?.close()
    }

    /// The keys of this `serve` (or `run`), started: their slots, ready to be served.
    /// `quietLog`: the level when --log-level is not given is warning, not info (a wrapper's program owns the
    /// terminal).
    func start(forcing forced: TransportChoice? = nil, quietLog: Bool = false) throws -> ServeSession {
        let level = logLevel.flatMap(Logger.Level.init(rawValue:)) ?? (quietLog ? .warning : .info)
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "fidosim")
        if let warning = SecretsInMemory.protect() { printError(warning) }
        let specs = try keySpecs()
        var plan: TransportPlan
        do {
            plan = try TransportPlan(transport)
        } catch {
            throw ValidationError(error.message)
        }
        if let forced { plan = plan.forcing(forced) }
        let card = plan.card
        let alsoUSBIP = plan.alsoUSBIP
        var chosen = plan.hid
        if chosen == .auto {
            let (automatic, line) = TransportChoice.automatic(uhidPath: uhidPath, udpAddress: "\(host):\(port)")
            chosen = automatic
            printLine(line)
        }
        if forced == nil { DeviceRunner.installSignalHandlers() }
        var slots: [SlotIO] = []
        let factory = keyFactory()
        for spec in specs {
            do {
                let index = UInt16(slots.count)
                let (slot, lines) = try factory.makeSlot(
                    spec,
                    transport: chosen,
                    card: card ? vpcdPort &+ index : nil,
                    usbipPort: usbipPort == 0 ? 0 : usbipPort &+ index,
                    alsoUSBIP: alsoUSBIP,
                    index: Int(index),
                    several: specs.count > 1,
                    logger: logger
                )
                for line in lines { line.print() }
                slots.append(slot)
            } catch let error as KeyStartError where !error.aboutKey {
                printError("fidosim: \(error)")
                throw Exit.failed
            } catch {
                printError("fidosim: \(spec.name): \(error)")
                throw Exit.failed
            }
        }
        let prompting = slots.contains { $0.slot.prompts }
        var notifications = false
        if notify == .on || (notify == .auto && prompting) {
            notifications = DesktopNotifier.isAvailable()
            if !notifications && notify == .on {
                printError(
                    "fidosim: --notify on: no session bus (DBUS_SESSION_BUS_ADDRESS) or no notify-send "
                        + "(Debian: libnotify-bin); prompts stay on the terminal"
                )
            }
        }
        if notifications { printLine("fidosim: touch requests also show as desktop notifications") }
        let testbed = chosen == .privateHID ? try? PrivateTestbed.open() : nil
        var keyHub: KeyHub?
        if let hub {
            do {
                keyHub = try KeyHub(path: hub, firstDevice: slots.count) { spec, device in
                    try factory.makeSlot(spec, transport: chosen, index: device, several: true, logger: logger)
                }
            } catch {
                printError("fidosim: --hub: \(error)")
                throw Exit.failed
            }
            printLine("fidosim: hub socket \(hub) (keys are added and removed there)")
        }
        return ServeSession(
            slots: slots,
            hub: keyHub,
            specs: specs,
            logger: logger,
            busyPoll: busyPoll,
            notifications: notifications,
            testbed: testbed
        )
    }

    /// The options every key of this `serve` shares.
    func keyFactory() -> KeyFactory {
        var factory = KeyFactory()
        factory.presenceDelay = .milliseconds(presenceDelay)
        factory.presenceTimeout = .seconds(presenceTimeout)
        factory.flashGeometry = flashGeometry
        factory.durability = durability
        factory.uhidPath = uhidPath
        factory.deviceName = deviceName ?? "fidosim virtual FIDO2 key"
        factory.vendorID = vendorId.flatMap(Self.parseID) ?? 0x1209
        factory.productID = productId.flatMap(Self.parseID) ?? 0xF1D0
        factory.identityGiven = vendorId != nil || productId != nil || deviceName != nil
        factory.udc = udc
        factory.board = device
        factory.hidBackend = hidBackend
        factory.host = host
        factory.anyLocalUser = anyLocalUser
        factory.udpPowerCycle = udpPowerCycle == .on
        factory.udpReplyPort = udpReplyPort
        factory.allowRemote = allowRemote
        factory.maxMessageSize = maxMsgSize
        factory.resetWindow = resetWindow == .on
        factory.minPinLengthRPs = minPinLengthRPs
        factory.enterpriseRPs = enterpriseRPs
        factory.resetTransports = resetTransports.map { $0.split(separator: ",").map(String.init) }
        factory.vpcdHost = vpcdHost
        factory.vpcdPort = vpcdPort
        factory.usbipHost = usbipHost
        factory.usbipPort = usbipPort
        factory.pinPolicyURL = pinPolicyUrl
        factory.backupEligible = backupEligible.map { $0 == .on }
        factory.backupState = backupState.map { $0 == .on }
        return factory
    }

    /// A 16-bit USB id from `0x1209` or `4617`.
    static func parseID(_ text: String) -> UInt32? {
        let value = text.lowercased().hasPrefix("0x") ? UInt32(text.dropFirst(2), radix: 16) : UInt32(text)
        guard let value, value <= 0xFFFF else { return nil }
        return value
    }
}

/// The keys one `serve` or `run` started.
struct ServeSession {
    var slots: [SlotIO]
    /// The socket that adds and removes keys (`--hub`).
    var hub: KeyHub?
    var specs: [KeySpec]
    var logger: Logger
    var busyPoll: Int
    var notifications: Bool
    /// The umockdev testbed of private keys.
    var testbed: PrivateTestbed?

    /// Writes `--ready-file` (when given), with `extra` members at its top level.
    func writeReadyFile(_ path: String?, extra: [String: JSONValue] = [:]) throws {
        guard let path else { return }
        try Self.write(readyRecord(extra: extra), to: path)
    }

    /// What the ready file says: the keys, the hub, and `extra` at the top level.
    func readyRecord(extra: [String: JSONValue] = [:]) -> JSONValue {
        var record = ReadyFile.record(slots: slots, flashes: specs.map(\.flash), pid: getpid())
        if case .object(var members) = record {
            if let hub { members["hub"] = .string(hub.path) }
            for (name, value) in extra { members[name] = value }
            record = .object(members)
        }
        return record
    }

    static func write(_ record: JSONValue, to path: String, secret: Bool = false) throws {
        do {
            try ReadyFile.write(record, to: path, secret: secret)
        } catch {
            printError("fidosim: \(error)")
            throw Exit.failed
        }
    }

    /// The loop that serves the keys; `terminal` false leaves standard input to another program (`fidosim run`).
    func runner(terminal: Bool = true) -> DeviceRunner {
        let runner = DeviceRunner(
            slots: slots,
            logger: logger,
            busyPoll: .microseconds(busyPoll),
            notifications: notifications,
            terminal: terminal
        )
        runner.hub = hub
        return runner
    }
}
