import ArgumentParser
import CTAPCore
import CTAPHID
import HIDBridge
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Where a virtual key's reports travel.
enum TransportChoice: String, ExpressibleByArgument, CaseIterable {
    case auto, udp, uhid, hid
}

enum OnOff: String, ExpressibleByArgument, CaseIterable {
    case on, off
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a virtual security key.",
        discussion: """
            The key runs until SIGINT or SIGTERM. On UDP, the 64-byte power-cycle datagram \
            (ac1052ca…7250dc) unplugs and re-plugs it: volatile state goes, credentials stay.
            """
    )

    @Option(help: "Transport: auto picks uhid when /dev/uhid is writable, else udp. (This build: udp.)")
    var transport: TransportChoice = .auto

    @Option(help: "UDP address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "UDP port to listen on (0 picks a free one).")
    var port: UInt16 = 8111

    @Option(
        help: ArgumentHelp(
            "How the simulated user answers a touch request: approve, deny, prompt, or delay:MS.",
            discussion: "approve touches after --presence-delay; prompt asks on the terminal (Enter touches).",
            valueName: "mode"))
    var presence: String = "approve"

    @Option(help: "Milliseconds before the automatic touch of approve and deny.")
    var presenceDelay: Int = 200

    @Option(help: "Refuse authenticatorReset more than 10 s after power-up (on), or allow it any time (off).")
    var resetWindow: OnOff = .on

    @Option(help: "Where credentials live: memory (lost when the process ends). Flash images come later.")
    var flash: String = "memory"

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("unknown --log-level '\(logLevel)': use trace, debug, info, notice, warning, error or critical")
        }
        guard (0...600_000).contains(presenceDelay) else {
            throw ValidationError("--presence-delay must be between 0 and 600000 ms")
        }
        guard PresenceMode(argument: presence) != nil else {
            throw ValidationError("unknown --presence '\(presence)': use approve, deny, prompt or delay:MS")
        }
        guard flash == "memory" else {
            throw ValidationError(
                "--flash \(flash): flash images are not supported by this build yet; use --flash memory")
        }
        if transport == .uhid || transport == .hid {
            throw ValidationError("--transport \(transport.rawValue) is not supported by this build yet; use udp")
        }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "fidosim")
        let mode = PresenceMode(argument: presence, approveDelay: .milliseconds(presenceDelay)) ?? .prompt

        if transport == .auto {
            logger.notice("transport auto: uhid is not in this build yet, using UDP")
        }
        DeviceRunner.installSignalHandlers()
        let udp: UDPTransport
        do {
            udp = try UDPTransport(host: host, port: port)
        } catch {
            throw ValidationError(error.description)
        }

        var entropy = EntropySource.system
        let storage = MemoryStorage(deviceSecret: entropy.bytes(32))
        let configuration = AuthenticatorConfiguration(resetWindowEnabled: resetWindow == .on)
        let authenticator: Authenticator
        do {
            authenticator = try Authenticator(
                configuration: configuration, storage: storage, entropy: entropy, now: .zero)
        } catch {
            throw ValidationError("cannot start the authenticator: \(error)")
        }
        let hid = CTAPHIDMachine(channelSeed: UInt32(truncatingIfNeeded: entropy.next()))
        let key = VirtualKey(hid: hid, authenticator: authenticator, presence: mode)
        printLine("fidosim: serving a virtual key on udp \(udp.host):\(udp.port) (flash: memory, presence: \(mode))")
        DeviceRunner(key: key, transport: udp, logger: logger).run()
    }
}
