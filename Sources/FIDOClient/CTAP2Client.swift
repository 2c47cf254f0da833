import CTAPCBOR

/// CTAP2 command bytes (CTAP 2.1 §6).
public enum CTAPCommand {
    public static let makeCredential: UInt8 = 0x01
    public static let getAssertion: UInt8 = 0x02
    public static let getInfo: UInt8 = 0x04
    public static let clientPIN: UInt8 = 0x06
    public static let reset: UInt8 = 0x07
    public static let getNextAssertion: UInt8 = 0x08
    public static let bioEnrollment: UInt8 = 0x09
    public static let credentialManagement: UInt8 = 0x0A
    public static let selection: UInt8 = 0x0B
    public static let largeBlobs: UInt8 = 0x0C
    public static let config: UInt8 = 0x0D
}

/// CTAP status codes (CTAP 2.1 §8.2), by name.
public enum CTAPStatusCode {
    public static let ok: UInt8 = 0x00
    public static let invalidCommand: UInt8 = 0x01
    public static let invalidParameter: UInt8 = 0x02
    public static let invalidLength: UInt8 = 0x03
    public static let cborUnexpectedType: UInt8 = 0x11
    public static let invalidCBOR: UInt8 = 0x12
    public static let missingParameter: UInt8 = 0x14
    public static let limitExceeded: UInt8 = 0x15
    public static let credentialExcluded: UInt8 = 0x19
    public static let unsupportedAlgorithm: UInt8 = 0x26
    public static let operationDenied: UInt8 = 0x27
    public static let keyStoreFull: UInt8 = 0x28
    public static let unsupportedOption: UInt8 = 0x2B
    public static let invalidOption: UInt8 = 0x2C
    public static let keepaliveCancel: UInt8 = 0x2D
    public static let noCredentials: UInt8 = 0x2E
    public static let userActionTimeout: UInt8 = 0x2F
    public static let notAllowed: UInt8 = 0x30
    public static let pinInvalid: UInt8 = 0x31
    public static let pinBlocked: UInt8 = 0x32
    public static let pinAuthInvalid: UInt8 = 0x33
    public static let pinAuthBlocked: UInt8 = 0x34
    public static let pinNotSet: UInt8 = 0x35
    public static let puatRequired: UInt8 = 0x36
    public static let pinPolicyViolation: UInt8 = 0x37
    public static let requestTooLarge: UInt8 = 0x39
    public static let integrityFailure: UInt8 = 0x3D
    public static let invalidSubcommand: UInt8 = 0x3E
    public static let unauthorizedPermission: UInt8 = 0x40

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
    public static func describe(_ code: UInt8) -> String {
        "0x\(Hex.string(code))" + (names[code].map { " \($0)" } ?? "")
    }
}

/// A CTAP2 answer: its status byte and, on success, its CBOR body.
public struct CTAPResponse: Sendable {
    public var status: UInt8
    /// The bytes after the status byte.
    public var body: [UInt8]

    public var ok: Bool { status == CTAPStatusCode.ok }

    /// The decoded body: a map for every CTAP2 command that answers one; `nil` for an empty body.
    public func decoded() throws(ClientError) -> CBORValue? {
        guard !body.isEmpty else { return nil }
        do {
            return try CBORDecoder.decode(body, maxDepth: 8)
        } catch {
            throw .malformed("the CBOR of the answer: \(error)")
        }
    }

    /// The decoded body as a map keyed by integers (what every CTAP2 command answers).
    public func map() throws(ClientError) -> [Int: CBORValue] {
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

/// CTAP2 and U2F requests over CTAPHID.
public final class CTAP2Client {
    public let hid: CTAPHIDClient
    /// Called with each keepalive status while a request waits (UPNEEDED = 2 asks for a touch).
    public var onKeepalive: ((UInt8) -> Void)?
    public var timeoutMs = 40000

    public init(hid: CTAPHIDClient) {
        self.hid = hid
    }

    /// Sends a CTAP2 command with CBOR parameters (or none).
    public func send(_ command: UInt8, _ parameters: CBORValue? = nil) throws(ClientError) -> CTAPResponse {
        try sendRaw([command] + (parameters.map { CBOREncoder.encode($0) } ?? []))
    }

    /// Sends `bytes` as the payload of a CTAPHID_CBOR message.
    public func sendRaw(_ bytes: [UInt8]) throws(ClientError) -> CTAPResponse {
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
    public func getInfo() throws(ClientError) -> AuthenticatorInfo {
        let response = try send(CTAPCommand.getInfo)
        guard response.ok else { throw .malformed("getInfo answered \(CTAPStatusCode.describe(response.status))") }
        return try AuthenticatorInfo(response.map())
    }

    /// A U2F APDU through CTAPHID_MSG: the response data and the status word.
    public func u2f(_ apdu: [UInt8]) throws(ClientError) -> (data: [UInt8], status: UInt16) {
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
public struct AuthenticatorInfo: Sendable {
    public var raw: [Int: CBORValue]
    public var versions: [String]
    public var extensions: [String]
    public var aaguid: [UInt8]
    public var options: [String: Bool]
    public var maxMsgSize: Int?
    public var pinUvAuthProtocols: [Int]
    public var maxCredentialCountInList: Int?
    public var maxCredentialIdLength: Int?
    public var algorithms: [Int]?
    public var maxSerializedLargeBlobArray: Int?
    public var minPINLength: Int?
    public var maxCredBlobLength: Int?

    public init(_ map: [Int: CBORValue]) throws(ClientError) {
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
    public static let u2fOnly = try! AuthenticatorInfo([
        1: .array(["U2F_V2"]), 3: .byteString([UInt8](repeating: 0, count: 16)),
    ])

    public var hasPIN: Bool { options["clientPin"] == true }
    public var supportsPIN: Bool { options["clientPin"] != nil }
    public var isCTAP21: Bool { versions.contains("FIDO_2_1") || versions.contains("FIDO_2_1_PRE") }
}
