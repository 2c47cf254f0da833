package import CTAPCBOR

/// CTAP2 command bytes (CTAP 2.1 §6).
package enum CTAPCommand {
    package static let makeCredential: UInt8 = 0x01
    package static let getAssertion: UInt8 = 0x02
    package static let getInfo: UInt8 = 0x04
    package static let clientPIN: UInt8 = 0x06
    package static let reset: UInt8 = 0x07
    package static let getNextAssertion: UInt8 = 0x08
    package static let bioEnrollment: UInt8 = 0x09
    package static let credentialManagement: UInt8 = 0x0A
    package static let selection: UInt8 = 0x0B
    package static let largeBlobs: UInt8 = 0x0C
    package static let config: UInt8 = 0x0D
}

/// CTAP status codes (CTAP 2.1 §8.2), by name.
package enum CTAPStatusCode {
    package static let ok: UInt8 = 0x00
    package static let invalidCommand: UInt8 = 0x01
    package static let invalidParameter: UInt8 = 0x02
    package static let invalidLength: UInt8 = 0x03
    package static let cborUnexpectedType: UInt8 = 0x11
    package static let invalidCBOR: UInt8 = 0x12
    package static let missingParameter: UInt8 = 0x14
    package static let limitExceeded: UInt8 = 0x15
    package static let credentialExcluded: UInt8 = 0x19
    package static let unsupportedAlgorithm: UInt8 = 0x26
    package static let operationDenied: UInt8 = 0x27
    package static let keyStoreFull: UInt8 = 0x28
    package static let unsupportedOption: UInt8 = 0x2B
    package static let invalidOption: UInt8 = 0x2C
    package static let keepaliveCancel: UInt8 = 0x2D
    package static let noCredentials: UInt8 = 0x2E
    package static let userActionTimeout: UInt8 = 0x2F
    package static let notAllowed: UInt8 = 0x30
    package static let pinInvalid: UInt8 = 0x31
    package static let pinBlocked: UInt8 = 0x32
    package static let pinAuthInvalid: UInt8 = 0x33
    package static let pinAuthBlocked: UInt8 = 0x34
    package static let pinNotSet: UInt8 = 0x35
    package static let puatRequired: UInt8 = 0x36
    package static let pinPolicyViolation: UInt8 = 0x37
    package static let requestTooLarge: UInt8 = 0x39
    package static let integrityFailure: UInt8 = 0x3D
    package static let invalidSubcommand: UInt8 = 0x3E
    package static let unauthorizedPermission: UInt8 = 0x40

    static let names: [UInt8: String] = [
        0x00: "CTAP2_OK", 0x01: "CTAP1_ERR_INVALID_COMMAND", 0x02: "CTAP1_ERR_INVALID_PARAMETER",
        0x03: "CTAP1_ERR_INVALID_LENGTH", 0x04: "CTAP1_ERR_INVALID_SEQ", 0x05: "CTAP1_ERR_TIMEOUT",
        0x06: "CTAP1_ERR_CHANNEL_BUSY", 0x0A: "CTAP1_ERR_LOCK_REQUIRED", 0x0B: "CTAP1_ERR_INVALID_CHANNEL",
        0x11: "CTAP2_ERR_CBOR_UNEXPECTED_TYPE", 0x12: "CTAP2_ERR_INVALID_CBOR", 0x14: "CTAP2_ERR_MISSING_PARAMETER",
        0x15: "CTAP2_ERR_LIMIT_EXCEEDED", 0x17: "CTAP2_ERR_FP_DATABASE_FULL", 0x18: "CTAP2_ERR_LARGE_BLOB_STORAGE_FULL",
        0x19: "CTAP2_ERR_CREDENTIAL_EXCLUDED", 0x21: "CTAP2_ERR_PROCESSING", 0x22: "CTAP2_ERR_INVALID_CREDENTIAL",
        0x23: "CTAP2_ERR_USER_ACTION_PENDING", 0x24: "CTAP2_ERR_OPERATION_PENDING", 0x25: "CTAP2_ERR_NO_OPERATIONS",
        0x26: "CTAP2_ERR_UNSUPPORTED_ALGORITHM", 0x27: "CTAP2_ERR_OPERATION_DENIED", 0x28: "CTAP2_ERR_KEY_STORE_FULL",
        0x2B: "CTAP2_ERR_UNSUPPORTED_OPTION", 0x2C: "CTAP2_ERR_INVALID_OPTION", 0x2D: "CTAP2_ERR_KEEPALIVE_CANCEL",
        0x2E: "CTAP2_ERR_NO_CREDENTIALS", 0x2F: "CTAP2_ERR_USER_ACTION_TIMEOUT", 0x30: "CTAP2_ERR_NOT_ALLOWED",
        0x31: "CTAP2_ERR_PIN_INVALID", 0x32: "CTAP2_ERR_PIN_BLOCKED", 0x33: "CTAP2_ERR_PIN_AUTH_INVALID",
        0x34: "CTAP2_ERR_PIN_AUTH_BLOCKED", 0x35: "CTAP2_ERR_PIN_NOT_SET", 0x36: "CTAP2_ERR_PUAT_REQUIRED",
        0x37: "CTAP2_ERR_PIN_POLICY_VIOLATION", 0x39: "CTAP2_ERR_REQUEST_TOO_LARGE",
        0x3A: "CTAP2_ERR_ACTION_TIMEOUT", 0x3B: "CTAP2_ERR_UP_REQUIRED", 0x3C: "CTAP2_ERR_UV_BLOCKED",
        0x3D: "CTAP2_ERR_INTEGRITY_FAILURE", 0x3E: "CTAP2_ERR_INVALID_SUBCOMMAND", 0x3F: "CTAP2_ERR_UV_INVALID",
        0x40: "CTAP2_ERR_UNAUTHORIZED_PERMISSION", 0x7F: "CTAP1_ERR_OTHER",
    ]

    /// `0x2E CTAP2_ERR_NO_CREDENTIALS`, or the bare byte for a code the spec does not name.
    package static func describe(_ code: UInt8) -> String {
        "0x\(Hex.string(code))" + (names[code].map { " \($0)" } ?? "")
    }
}

/// A CTAP2 answer: its status byte and, on success, its CBOR body.
package struct CTAPResponse: Sendable {
    package var status: UInt8
    /// The bytes after the status byte.
    package var body: [UInt8]

    package var ok: Bool { status == CTAPStatusCode.ok }

    /// The decoded body: a map for every CTAP2 command that answers one; `nil` for an empty body.
    package func decoded() throws(ClientError) -> CBORValue? {
        guard !body.isEmpty else { return nil }
        do {
            return try CBORDecoder.decode(body, maxDepth: 8)
        } catch {
            throw .malformed("the CBOR of the answer: \(error)")
        }
    }

    /// The decoded body as a map keyed by integers (what every CTAP2 command answers).
    package func map() throws(ClientError) -> [Int: CBORValue] {
        guard let value = try decoded() else { return [:] }
        guard let entries = value.mapValue else { throw .malformed("the answer is not a CBOR map") }
        var out: [Int: CBORValue] = [:]
        for (key, item) in entries {
            guard let index = key.intValue else { throw .malformed("a key of the answer is not an integer: \(key)") }
            out[index] = item
        }
        return out
    }
}

/// How a client reaches a key: CTAPHID (a HID device, or UDP), or the NFC binding (a card in a PC/SC reader).
package enum KeyLink {
    case hid(CTAPHIDClient)
    case card(PCSCCard)

    /// Makes the link usable: CTAPHID_INIT allocates a channel; a card is connected and its applet selected.
    package func initialize(timeoutMs: Int = 5000) throws(ClientError) {
        switch self {
        case .hid(let hid): try hid.initialize(timeoutMs: timeoutMs)
        case .card(let card): if !card.connected { try card.connect() }
        }
    }
}

/// CTAP2 and U2F requests over CTAPHID or the NFC binding.
package final class CTAP2Client {
    package let link: KeyLink
    /// Called with each keepalive status while a request waits (UPNEEDED = 2 asks for a touch); over NFC, with
    /// each status update.
    package var onKeepalive: ((UInt8) -> Void)?
    package var timeoutMs = 40000

    package init(hid: CTAPHIDClient) {
        link = .hid(hid)
    }

    package init(link: KeyLink) {
        self.link = link
    }

    /// The CTAPHID client, when the key is a HID key.
    package var hid: CTAPHIDClient? {
        if case .hid(let hid) = link { hid } else { nil }
    }

    /// The card, when the key is in a PC/SC reader.
    package var card: PCSCCard? {
        if case .card(let card) = link { card } else { nil }
    }

    /// Sends a CTAP2 command with CBOR parameters (or none).
    package func send(_ command: UInt8, _ parameters: CBORValue? = nil) throws(ClientError) -> CTAPResponse {
        try sendRaw([command] + (parameters.map { CBOREncoder.encode($0) } ?? []))
    }

    /// Sends `bytes` as the payload of a CTAPHID_CBOR message.
    package func sendRaw(_ bytes: [UInt8]) throws(ClientError) -> CTAPResponse {
        let hid: CTAPHIDClient
        switch link {
        case .hid(let client):
            hid = client
        case .card(let card):
            let answer = try card.cbor(bytes, timeoutMs: timeoutMs, onKeepalive: onKeepalive)
            return CTAPResponse(status: answer[0], body: Array(answer.dropFirst()))
        }
        let answer = try hid.transact(
            command: HIDCommand.cbor,
            payload: bytes,
            timeoutMs: timeoutMs,
            onKeepalive: onKeepalive
        )
        if answer.command == HIDCommand.error { throw .hidError(answer.payload.first ?? 0) }
        guard answer.command == HIDCommand.cbor, let status = answer.payload.first else {
            throw .malformed(
                "a CBOR request answered with command 0x\(Hex.string(answer.command)), \(answer.payload.count) bytes"
            )
        }
        return CTAPResponse(status: status, body: Array(answer.payload.dropFirst()))
    }

    /// authenticatorGetInfo, decoded.
    package func getInfo() throws(ClientError) -> AuthenticatorInfo {
        let response = try send(CTAPCommand.getInfo)
        guard response.ok else { throw .malformed("getInfo answered \(CTAPStatusCode.describe(response.status))") }
        return try AuthenticatorInfo(response.map())
    }

    /// A U2F APDU through CTAPHID_MSG: the response data and the status word.
    package func u2f(_ apdu: [UInt8]) throws(ClientError) -> (data: [UInt8], status: UInt16) {
        let hid: CTAPHIDClient
        switch link {
        case .hid(let client):
            hid = client
        case .card(let card):
            let p = try card.u2f(apdu)
            return (Array(p.dropLast(2)), UInt16(p[p.count - 2]) << 8 | UInt16(p[p.count - 1]))
        }
        let answer = try hid.transact(
            command: HIDCommand.msg,
            payload: apdu,
            timeoutMs: timeoutMs,
            onKeepalive: onKeepalive
        )
        if answer.command == HIDCommand.error { throw .hidError(answer.payload.first ?? 0) }
        guard answer.command == HIDCommand.msg, answer.payload.count >= 2 else {
            throw .malformed(
                "a U2F request answered with command 0x\(Hex.string(answer.command)), \(answer.payload.count) bytes"
            )
        }
        let p = answer.payload
        return (Array(p.dropLast(2)), UInt16(p[p.count - 2]) << 8 | UInt16(p[p.count - 1]))
    }
}

/// What authenticatorGetInfo answers (CTAP 2.1 §6.4), with the raw map kept for checks of its own.
package struct AuthenticatorInfo: Sendable {
    package var raw: [Int: CBORValue]
    package var versions: [String]
    package var extensions: [String]
    package var aaguid: [UInt8]
    package var options: [String: Bool]
    package var maxMsgSize: Int?
    package var pinUvAuthProtocols: [Int]
    package var maxCredentialCountInList: Int?
    package var maxCredentialIdLength: Int?
    package var algorithms: [Int]?
    package var maxSerializedLargeBlobArray: Int?
    package var minPINLength: Int?
    package var maxCredBlobLength: Int?

    package init(_ map: [Int: CBORValue]) throws(ClientError) {
        raw = map
        guard let versions = map[1]?.arrayValue?.compactMap(\.textValue) else {
            throw .malformed("getInfo has no versions (0x01)")
        }
        self.versions = versions
        extensions = map[2]?.arrayValue?.compactMap(\.textValue) ?? []
        guard let aaguid = map[3]?.bytesValue else { throw .malformed("getInfo has no aaguid (0x03)") }
        self.aaguid = aaguid
        var options: [String: Bool] = [:]
        for (key, value) in map[4]?.mapValue ?? [:] {
            if let name = key.textValue, let flag = value.boolValue { options[name] = flag }
        }
        self.options = options
        maxMsgSize = map[5]?.intValue
        pinUvAuthProtocols = map[6]?.arrayValue?.compactMap(\.intValue) ?? []
        maxCredentialCountInList = map[7]?.intValue
        maxCredentialIdLength = map[8]?.intValue
        algorithms = map[10]?.arrayValue?.compactMap { $0.mapValue?[.textString("alg")]?.intValue }
        maxSerializedLargeBlobArray = map[11]?.intValue
        minPINLength = map[13]?.intValue
        maxCredBlobLength = map[15]?.intValue
    }

    /// What a key without CTAP2 (no CBOR capability at CTAPHID_INIT) is taken to be: U2F only.
    package static let u2fOnly = try! AuthenticatorInfo([
        1: .array(["U2F_V2"]), 3: .byteString([UInt8](repeating: 0, count: 16)),
    ])

    package var hasPIN: Bool { options["clientPin"] == true }
    package var supportsPIN: Bool { options["clientPin"] != nil }
    package var isCTAP21: Bool { versions.contains("FIDO_2_1") || versions.contains("FIDO_2_1_PRE") }
}
