import CTAPCore
import CTAPHID
package import Console
import HIDAPIDevice
package import Logging
import Profiles
import USBIP
package import VirtualKey

#if canImport(Glibc)
import CProcessControl
import Glibc
#endif

/// Builds the keys `serve` runs from a ``KeySpec`` and the options every key of one `serve` shares: the image,
/// the authenticator with its profile, the CTAPHID machine, the transport, the control socket and the trace.
package struct KeyFactory {
    package var presenceDelay: Duration = .milliseconds(200)
    package var presenceTimeout: Duration = .seconds(30)
    package var flashGeometry: GeometryChoice?
    package var durability: Durability = .process
    package var uhidPath = "/dev/uhid"
    package var deviceName = "fidosim virtual FIDO2 key"
    package var vendorID: UInt32 = 0x1209
    package var productID: UInt32 = 0xF1D0
    /// The command line gave the USB identity: it wins over a captured profile's.
    package var identityGiven = false
    /// The manufacturer string of a USB/IP device (a captured profile's, else fidosim).
    package var manufacturer = "fidosim"
    package var udc: String?
    /// The bridge board's address (the `hid` transport).
    package var board: String?
    package var hidBackend = "hidraw"
    package var host = "127.0.0.1"
    /// Other local users' programs may use the key's transports (`--any-local-user`, ``PeerAccess``).
    package var anyLocalUser = false
    package var udpPowerCycle = true
    /// UDP answers go to this port of the sender's address (`--udp-reply-port`).
    package var udpReplyPort: UInt16?
    package var allowRemote = false
    package var maxMessageSize: Int?
    package var resetWindow = true
    package var minPinLengthRPs: [String] = []
    package var enterpriseRPs: [String] = []
    /// getInfo transportsForReset: where authenticatorReset is allowed (nil: every transport the key is on).
    package var resetTransports: [String]?
    /// Where vpcd listens for the card (`--transport pcsc`): the first key's port; key N takes port + N - 1.
    package var vpcdHost = "127.0.0.1"
    package var vpcdPort: UInt16 = 35963
    /// Where the USB/IP server listens (`--transport usbip`): the first key's port; key N takes port + N - 1.
    package var usbipHost = "127.0.0.1"
    package var usbipPort: UInt16 = 3240
    /// getInfo pinComplexityPolicyURL, if the key names one.
    package var pinPolicyURL: String?
    /// New credentials are backup eligible / backed up (WebAuthn Level 3); nil: the profile says.
    package var backupEligible: Bool?
    package var backupState: Bool?

    package init() {}

    /// Whether `host` is a loopback address (127.0.0.0/8 or `localhost`).
    package static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host.hasPrefix("127.")
    }

    /// Opens one key's image, device, authenticator, control socket and trace; returns it with the lines that tell
    /// the person what started (serve prints them).
    package func makeSlot(
        _ spec: KeySpec,
        transport chosen: TransportChoice,
        card cardPort: UInt16? = nil,
        usbipPort usbipPortOverride: UInt16? = nil,
        alsoUSBIP: Bool = false,
        index: Int = 0,
        several: Bool,
        logger: Logger
    ) throws -> (SlotIO, [ConsoleLine]) {
        var lines: [ConsoleLine] = []
        let cardPort = chosen == .pcsc ? cardPort ?? vpcdPort : cardPort
        // Only a key that no desktop sees defaults to approve: over USB/IP a host sees a USB device; the private
        // key is seen only by the programs of its own tree.
        let unseen = (chosen == .udp || chosen == .privateHID) && !alsoUSBIP
        let presenceArgument = spec.presence ?? (unseen ? "approve" : "prompt")
        guard let mode = PresenceMode(argument: presenceArgument, approveDelay: presenceDelay) else {
            throw KeyStartError("unknown presence '\(presenceArgument)'", aboutKey: true)
        }
        let profileFile: ProfileFile
        do {
            profileFile = try ProfileFile.load(spec.profile)
        } catch {
            throw KeyStartError("\(error)", aboutKey: true)
        }
        var entropy = EntropySource.system
        let persistent: PersistentKey
        do {
            persistent = try PersistentKey.open(
                flash: spec.flash,
                geometry: flashGeometry,
                durability: durability,
                entropy: &entropy
            )
            // Mounting decodes every record once; hand the freed heap pages back.
            fidosim_trim_heap()
        } catch {
            throw KeyStartError("\(error)")
        }
        // The control socket exists before the device appears, so a client that sees the device can connect.
        var server: ControlServer?
        if spec.control != "off" {
            do {
                server = try ControlServer(path: spec.control)
            } catch {
                throw KeyStartError("\(error)")
            }
            lines.append(.out("fidosim: control socket \(spec.control)"))
        }
        // A captured profile presents the captured key's USB identity, unless the command line gave one.
        var factory = self
        var serial = spec.serial ?? persistent.serial
        if !identityGiven {
            let identity = profileFile.identity
            factory.vendorID = identity.vendorID.map(UInt32.init) ?? vendorID
            factory.productID = identity.productID.map(UInt32.init) ?? productID
            factory.deviceName = identity.product ?? deviceName
            factory.manufacturer = identity.manufacturer ?? manufacturer
        }
        if spec.serial == nil, let patterned = profileFile.identity.serial(random: Array(persistent.serial.utf8)) {
            serial = patterned
        }
        let (device, deviceLines) = try factory.makeDevice(
            spec,
            transport: chosen,
            serial: serial,
            index: index,
            usbipPort: usbipPortOverride,
            alsoUSBIP: alsoUSBIP
        )
        lines += deviceLines
        var card: VPCDCard?
        if let cardPort {
            do {
                card = try VPCDCard(host: vpcdHost, port: cardPort, access: access)
            } catch {
                throw KeyStartError(error.description)
            }
        }

        // Every write goes through the fault switch of the control plane (a failed flash write on demand).
        var key = try recipe.makeKey(
            spec,
            profile: profileFile,
            storage: FaultInjectingStorage(persistent.storage),
            entropy: entropy,
            presence: mode,
            transport: chosen,
            card: card != nil
        )
        if let joined = device as? JoinedTransport {
            // A CTAPHID machine for each further host: one host's half-sent message or LOCK holds only its channels.
            for _ in joined.members.dropFirst() { key.addHost(channelKey: entropy.bytes(16)) }
        }
        if !enterpriseRPs.isEmpty && key.authenticator.storage.batchAttestation == nil {
            lines.append(
                .error(
                    "fidosim: --ep-rp: this key has no batch attestation, so it offers no enterprise attestation (ep) "
                        + "until one is provisioned: fidosim attestation provision --name \(spec.name)"
                )
            )
        }
        let whereServed = [device.summary, card?.summary ?? ""].filter { !$0.isEmpty }.joined(separator: " and ")
        // A key the desktop sees is a daily key: a person touches it unless a test rig says otherwise.
        let defaulted =
            spec.presence == nil && (!unseen || chosen == .privateHID)
            ? ", the default on \(alsoUSBIP && chosen != .usbip ? "usbip" : chosen.rawValue)" : ""
        var named = several ? "key \(spec.name), " : ""
        if spec.profile != "fidosim" { named += "profile \(profileFile.profile.name), " }
        lines.append(
            .out(
                "fidosim: serving a virtual key on \(whereServed) (\(named)flash: \(persistent.summary), presence: \(mode)\(defaulted))"
            )
        )
        if !unseen, case .approve = mode {
            let served = alsoUSBIP && chosen != .usbip ? "\(chosen.rawValue) and usbip" : chosen.rawValue
            lines.append(
                .error(
                    "fidosim: warning: presence \(mode) on \(served): "
                        + (chosen == .usbip || alsoUSBIP
                            ? "the host that attaches the key, and any program there that can open it, "
                            : "any local program that can open the key ")
                        + "uses it without a touch (signs in, resets it); use --presence prompt for a daily key"
                )
            )
        }
        // With several keys, the terminal's answer goes to the key that asked.
        let slot = SlotIO(key: key, transport: device, logger: logger, control: server, name: spec.name, card: card)
        if let trace = spec.trace {
            do {
                slot.tracer = try TraceWriter(path: trace)
            } catch {
                throw KeyStartError("\(error)")
            }
            lines.append(.out("fidosim: tracing to \(trace) (\(slot.tracer?.format.rawValue ?? ""))"))
        }
        return (slot, lines)
    }

    /// The key's device on its transport (and USB/IP beside it when asked), with the lines that warn about it.
    func makeDevice(
        _ spec: KeySpec,
        transport chosen: TransportChoice,
        serial: String,
        index: Int,
        usbipPort usbipPortOverride: UInt16?,
        alsoUSBIP: Bool
    ) throws(KeyStartError) -> (any ReportTransport, [ConsoleLine]) {
        var lines: [ConsoleLine] = []
        // How the key presents itself where it is a USB HID device of this machine (uhid, gadget, private).
        let info = UHIDDeviceInfo(
            name: deviceName,
            vendorID: vendorID,
            productID: productID,
            serial: serial
        )
        do {
            let plain: any ReportTransport
            if chosen == .uhid {
                plain = try UHIDTransport(path: uhidPath, info: info)
            } else if chosen == .gadget {
                plain = try GadgetTransport(name: spec.name, info: info, udc: udc)
            } else if chosen == .hid, let board {
                plain = try HIDAPITransport(device: board, backend: HIDBackend(rawValue: hidBackend) ?? .hidraw)
            } else if chosen == .pcsc {
                plain = NoReportTransport()
            } else if chosen == .privateHID {
                let tree = PrivateDeviceTree(index: index, info: info, manufacturer: manufacturer)
                plain = try PrivateHIDTransport(tree: tree, testbed: PrivateTestbed.open())
            } else if chosen == .usbip {
                plain = try usbipServer(serial: serial, port: usbipPortOverride)
            } else {
                plain = try UDPTransport(
                    host: host,
                    port: spec.port,
                    policy: UDPKeyPolicy(
                        anyUser: anyLocalUser,
                        powerCycleDatagram: udpPowerCycle,
                        remote: allowRemote,
                        replyPort: udpReplyPort
                    )
                )
                if !Self.isLoopback(host) {
                    lines.append(
                        .error(
                            "fidosim: warning: listening on udp \(host):\(spec.port): any machine that reaches this address "
                                + "can use the key (no touch is asked in approve mode)"
                        )
                    )
                }
            }
            if alsoUSBIP && chosen != .usbip {
                // The same key on this machine's transport and, through USB/IP, on another host.
                let usbip = try usbipServer(serial: serial, port: usbipPortOverride)
                return (try JoinedTransport([plain, usbip]), lines)
            } else {
                return (plain, lines)
            }
        } catch {
            throw KeyStartError(error.description)
        }
    }

    /// Who may reach the key's transports (one rule for all, ``PeerAccess``).
    package var access: PeerAccess {
        PeerAccess(owner: geteuid(), anyLocalUser: anyLocalUser, allowRemote: allowRemote)
    }

    /// The USB/IP server that exports the key (`--transport usbip`), with the same identity uhid would give it.
    func usbipServer(serial: String, port: UInt16?) throws(TransportError) -> USBIPTransport {
        let exported = USBDevice(
            vendorID: UInt16(vendorID),
            productID: UInt16(productID),
            manufacturer: manufacturer,
            product: deviceName,
            serial: serial,
            reportDescriptor: UHIDDeviceInfo.reportDescriptor
        )
        return try USBIPTransport(host: usbipHost, port: port ?? usbipPort, device: exported, access: access)
    }

    /// The options of the key itself that this factory carries.
    package var recipe: KeyRecipe {
        var recipe = KeyRecipe()
        recipe.presenceTimeout = presenceTimeout
        recipe.maxMessageSize = maxMessageSize
        recipe.resetWindow = resetWindow
        recipe.minPinLengthRPs = minPinLengthRPs
        recipe.enterpriseRPs = enterpriseRPs
        recipe.resetTransports = resetTransports
        recipe.pinPolicyURL = pinPolicyURL
        recipe.backupEligible = backupEligible
        recipe.backupState = backupState
        return recipe
    }
}
