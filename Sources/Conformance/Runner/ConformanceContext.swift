package import CTAPCBOR
package import FIDOClient

#if canImport(Glibc)
import Glibc
#endif

/// What a check works with: the key, the operator, what earlier checks learned.
package final class ConformanceContext {
    package private(set) var client: CTAP2Client
    /// The CTAPHID client (the checks of the CTAPHID group run on HID keys only).
    package var hid: CTAPHIDClient {
        get throws {
            guard let hid = client.hid else { throw CheckFailure("not a HID key: this check is for CTAPHID") }
            return hid
        }
    }
    /// The card (the checks of the NFC group run on cards in PC/SC readers only).
    package var card: PCSCCard {
        get throws {
            guard let card = client.card else { throw CheckFailure("not a card: this check is for the NFC binding") }
            return card
        }
    }
    /// Whether the key is a card in a PC/SC reader.
    package var isCard: Bool { client.card != nil }
    package let deviceOperator: any DeviceOperator
    let open: () throws -> KeyLink
    package private(set) var info: AuthenticatorInfo
    package let allowDestructive: Bool
    /// The PIN the key has, when the runner knows it.
    package var pin: String?
    /// Milliseconds (monotonic) of the last power-up the runner caused or saw.
    package private(set) var poweredUpAtMs: Double
    /// Credentials made by earlier checks, by a name the checks agree on.
    package var credentials: [String: MadeCredential] = [:]
    /// Notes a check leaves for the report (the figures it measured).
    package var notes: [String] = []
    /// What the key chose where the specification leaves a choice (firmware-spec/commands.md, "Where the
    /// specification leaves a choice"): reported, never a failure.
    package var observations: [String] = []

    /// Records a choice the key made.
    package func observe(_ text: String) { observations.append(text) }

    package static let firstPIN = "31415926"
    package static let secondPIN = "27182818"

    package init(
        open: @escaping () throws -> KeyLink,
        deviceOperator: any DeviceOperator,
        allowDestructive: Bool,
        pin: String?
    )
        throws
    {
        self.open = open
        self.deviceOperator = deviceOperator
        self.allowDestructive = allowDestructive
        self.pin = pin
        let link = try open()
        try link.initialize()
        client = CTAP2Client(link: link)
        info = try Self.info(client)
        poweredUpAtMs = CTAPHIDClient.nowMs()
    }

    /// getInfo, or for a key without the CBOR capability a U2F-only description. A card has no capabilities to say
    /// it: one that answers getInfo with an error is U2F-only (as python-fido2 decides).
    static func info(_ client: CTAP2Client) throws -> AuthenticatorInfo {
        if client.card != nil {
            let response = try client.send(CTAPCommand.getInfo)
            guard response.ok else { return .u2fOnly }
            return try AuthenticatorInfo(response.map())
        }
        return client.hid?.info?.cbor == false ? .u2fOnly : try client.getInfo()
    }

    /// Whether the key speaks CTAP2 (CTAPHID_INIT's CBOR capability; for a card, an answer to getInfo).
    package var speaksCTAP2: Bool {
        if client.card != nil { return info.versions != AuthenticatorInfo.u2fOnly.versions }
        return client.hid?.info?.cbor != false
    }

    /// getInfo again (after a change of PIN, options or a reset).
    package func refreshInfo() throws {
        info = try Self.info(client)
    }

    /// A new channel on the same transport, for checks about several channels.
    package func newChannel() throws -> CTAPHIDClient {
        let other = CTAPHIDClient(channel: try hid.channel)
        try other.initialize()
        return other
    }

    /// Unplug and plug back in (through the operator), then reopen the key and allocate a channel.
    package func powerCycle() throws {
        try deviceOperator.powerCycle()
        var lastError: (any Error)?
        for _ in 0..<50 {
            do {
                let link = try open()
                try link.initialize(timeoutMs: 1000)
                client = CTAP2Client(link: link)
                poweredUpAtMs = CTAPHIDClient.nowMs()
                info = try Self.info(client)
                return
            } catch {
                lastError = error
                sleepMs(100)
            }
        }
        throw CheckFailure("the key did not come back after a power cycle: \(lastError.map { "\($0)" } ?? "")")
    }

    /// Drops what the last check left on the channel and makes sure the key still answers (a PING, else a new
    /// INIT, else the key opened again). False when it does not.
    func recover() -> Bool {
        if let card = client.card {
            // A card is asked again from the start: connected anew, the applet selected.
            return (try? card.connect()) != nil
        }
        guard let hid = client.hid else { return false }
        hid.drain(ms: 20)
        if (try? hid.transact(command: HIDCommand.ping, payload: [1, 2, 3], timeoutMs: 1000))?.payload == [1, 2, 3] {
            return true
        }
        if (try? hid.initialize(timeoutMs: 1000)) != nil { return true }
        guard let again = try? open(), (try? again.initialize(timeoutMs: 2000)) != nil else { return false }
        client = CTAP2Client(link: again)
        return true
    }

    // MARK: Requests checks share

    /// A CTAP2 request; the operator hears about touches when `touch` says one is needed.
    package func send(_ command: UInt8, _ parameters: CBORValue?, touch: String? = nil) throws -> CTAPResponse {
        if let touch { try deviceOperator.touchNeeded(touch) }
        return try client.send(command, parameters)
    }

    /// pinUvAuthParam (8) and pinUvAuthProtocol (9) of makeCredential for a request, when the key has a PIN the runner knows.
    package func userVerification(
        permission: Int,
        rpId: String?,
        clientDataHash: [UInt8]
    ) throws -> [CBORValue: CBORValue] {
        guard info.hasPIN, let pin else { return [:] }
        let version = info.pinUvAuthProtocols.contains(2) ? 2 : 1
        let pinClient = ClientPIN(client: client, version: version)
        let result = try pinClient.token(
            pin: pin,
            permissions: info.options["pinUvAuthToken"] == true ? permission : nil,
            rpId: rpId
        )
        guard let token = result.token else {
            throw CheckFailure(
                "a pinUvAuthToken for the request",
                expected: "CTAP2_OK",
                actual: CTAPStatusCode.describe(result.response.status)
            )
        }
        return [
            8: .byteString(PlatformPinProtocol.authenticate(version: version, key: token, clientDataHash)),
            9: CBORValue(version),
        ]
    }
}

/// A credential a check made, with what is needed to use it again.
package struct MadeCredential: Sendable {
    package var rpId: String
    package var id: [UInt8]
    package var publicKey: COSEPublicKey
    package var userId: [UInt8]
    package var signCount: UInt32
    package var discoverable: Bool
}

func sleepMs(_ ms: Int) {
    var request = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
    _ = nanosleep(&request, nil)
}
