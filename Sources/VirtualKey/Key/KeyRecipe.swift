package import CTAPCore
import CTAPHID
package import Profiles

/// Where a virtual key's reports travel.
package enum TransportChoice: String, CaseIterable, Sendable {
    case auto, udp, uhid, hid, gadget
    /// A USB device exported over USB/IP (TCP), which `usbip attach` makes a USB device on another machine.
    case usbip
    /// A card in vsmartcard's vpcd reader, which pcscd presents to every PC/SC client (the NFC binding).
    case pcsc
    /// A hidraw node in this process's umockdev testbed, which only the programs given its environment see
    /// (`fidosim run`, the environment file): no root, no uhid.
    case privateHID = "private"
}

/// What differs between the keys of one `serve`.
package struct KeySpec: Sendable {
    package var name: String
    package var flash: String
    package var port: UInt16
    package var serial: String?
    package var control: String
    package var trace: String?
    /// Nil: the transport's default (prompt where the desktop sees the key, approve on UDP).
    package var presence: String?
    package var uv: String
    package var enrolledFingers: Int
    package var profile: String
    /// Extensions the key goes without, though its profile has them (a virtual authenticator's options).
    package var withoutExtensions: Set<String> = []
    /// False: no room for discoverable credentials (getInfo rk false; WebDriver's hasResidentKey false).
    package var residentKeys = true
    /// New credentials are backup eligible / backed up (nil: serve's options, else the profile's).
    package var backupEligible: Bool?
    package var backupState: Bool?

    package init(
        name: String = "default",
        flash: String = "memory",
        port: UInt16 = 0,
        serial: String? = nil,
        control: String = "off",
        trace: String? = nil,
        presence: String? = nil,
        uv: String = "none",
        enrolledFingers: Int = 0,
        profile: String = "fidosim"
    ) {
        self.name = name
        self.flash = flash
        self.port = port
        self.serial = serial
        self.control = control
        self.trace = trace
        self.presence = presence
        self.uv = uv
        self.enrolledFingers = enrolledFingers
        self.profile = profile
    }
}

/// Why a key did not start. `aboutKey`: the message is about the key's own settings (serve names the key before
/// it); otherwise it names the file, socket or device it is about.
package struct KeyStartError: Error, CustomStringConvertible {
    package var message: String
    package var aboutKey: Bool

    package init(_ message: String, aboutKey: Bool = false) {
        self.message = message
        self.aboutKey = aboutKey
    }

    package var description: String { message }
}

/// The options of the key itself, without I/O: what `serve`'s options say about the authenticator, its limits and its
/// simulated user. ``makeKey(_:profile:storage:entropy:presence:transport:card:)`` builds the key `serve` runs (through
/// HIDBridge's KeyFactory), and the one the bench and the tests run in process.
package struct KeyRecipe: Sendable {
    /// How long a prompt waits for a touch.
    package var presenceTimeout: Duration = .seconds(30)
    /// The largest message (nil: the profile's, else the transport's default).
    package var maxMessageSize: Int?
    package var resetWindow = true
    package var minPinLengthRPs: [String] = []
    package var enterpriseRPs: [String] = []
    /// transportsForReset (nil: every transport the key is on).
    package var resetTransports: [String]?
    package var pinPolicyURL: String?
    package var backupEligible: Bool?
    package var backupState: Bool?

    package init() {}

    /// The key itself, without I/O: the authenticator with `spec`'s profile and options over `storage`, and its
    /// CTAPHID machine. `serve` builds every key through it; the bench and the tests build theirs with it over
    /// memory. `transport` decides the default largest message (uhid's output queue is short).
    package func makeKey(
        _ spec: KeySpec = KeySpec(),
        profile profileFile: ProfileFile,
        storage: any AuthenticatorStorage,
        entropy: EntropySource,
        presence mode: PresenceMode,
        transport chosen: TransportChoice = .udp,
        card: Bool = false
    ) throws(KeyStartError) -> VirtualKey {
        var profileFile = profileFile
        if !spec.withoutExtensions.isEmpty {
            // hmac-secret-mc is part of hmac-secret: without one, the key has neither.
            var without = spec.withoutExtensions
            if without.contains("hmac-secret") { without.insert("hmac-secret-mc") }
            profileFile.profile.extensions = (profileFile.profile.extensions ?? KeyProfile.allExtensions)
                .filter { !without.contains($0) }
        }
        // getInfo transports: USB for every HID transport, NFC for the card.
        let transports = (chosen == .pcsc ? [] : ["usb"]) + (card || chosen == .pcsc ? ["nfc"] : [])
        var entropy = entropy
        // The kernel's uhid output queue holds 32 reports and never blocks the writer: a host that writes a longer
        // message faster than this process reads loses reports. 1200 bytes (21 reports) is also what common
        // hardware keys announce.
        let messageSize = maxMessageSize ?? profileFile.maxMessageSize ?? (chosen == .uhid ? 1200 : 7609)
        var configuration = AuthenticatorConfiguration(
            resetWindowEnabled: resetWindow,
            maxMessageSize: messageSize,
            minPinLengthRPIDs: minPinLengthRPs,
            fingerprintSensor: spec.uv == "fingerprint",
            preEnrolledFingerprints: spec.enrolledFingers,
            enterpriseAttestationRPIDs: enterpriseRPs,
            profile: profileFile.profile,
            transportsForReset: resetTransports ?? transports.sorted(),
            transports: transports.sorted(),
            pinComplexityPolicyURL: pinPolicyURL,
            backupEligible: spec.backupEligible ?? backupEligible ?? profileFile.backupEligible,
            backupState: spec.backupState ?? backupState ?? profileFile.backupState,
            alwaysUvByDefault: profileFile.alwaysUv
        )
        if let aaguid = profileFile.aaguid { configuration.aaguid = aaguid }
        // fidosim's shared batch unless the profile chooses self attestation (security.md, "Attestation").
        configuration.defaultAttestation = profileFile.selfAttestation ? nil : SharedBatchAttestation.key
        if let capacity = profileFile.maxResidentCredentials { configuration.maxResidentCredentials = capacity }
        if !spec.residentKeys { configuration.maxResidentCredentials = 0 }
        var authenticator: Authenticator
        do {
            authenticator = try Authenticator(
                configuration: configuration,
                storage: storage,
                entropy: entropy,
                now: .zero
            )
            try authenticator.applyFactoryDefaults()
        } catch {
            throw KeyStartError("cannot start the authenticator: \(error)", aboutKey: true)
        }
        // A key without CTAP2 lacks the CBOR capability; one without U2F says NMSG.
        var capabilities = CTAPHIDConfiguration.capabilityWink
        if profileFile.profile.speaksCTAP2 { capabilities |= CTAPHIDConfiguration.capabilityCBOR }
        if !profileFile.profile.speaksU2F { capabilities |= CTAPHIDConfiguration.capabilityNMSG }
        var hidConfiguration = CTAPHIDConfiguration(capabilities: profileFile.identity.capabilities ?? capabilities)
        if let keepalive = profileFile.identity.keepaliveMs {
            // A captured key's keepalive cadence.
            hidConfiguration.keepaliveInterval = .microseconds(Int64((keepalive * 1000).rounded()))
        }
        if let (major, minor, build) = profileFile.identity.deviceVersion {
            // A captured key's INIT answer (a profile from fidosim profile capture).
            hidConfiguration.deviceVersionMajor = major
            hidConfiguration.deviceVersionMinor = minor
            hidConfiguration.deviceVersionBuild = build
        }
        let hid = CTAPHIDMachine(
            configuration: hidConfiguration,
            channelKey: entropy.bytes(16)
        )
        var key = VirtualKey(hid: hid, authenticator: authenticator, presence: mode)
        key.user.presenceTimeout = presenceTimeout
        // A captured key answers INIT and getInfo no faster than it did.
        key.initLatency = CapturedIdentity.extra(profileFile.identity.initMs)
        key.getInfoLatency = CapturedIdentity.extra(profileFile.identity.getInfoMs)
        if transports.contains("nfc") { key.addNFC(only: transports == ["nfc"]) }
        return key
    }
}
