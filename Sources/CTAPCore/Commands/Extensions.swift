import CTAPCBOR
import Crypto

/// The extension names this key processes (getInfo key 0x02); every other extension is ignored.
enum ExtensionName {
    static let credBlob = "credBlob"
    static let credProtect = "credProtect"
    static let hmacSecret = "hmac-secret"
    static let largeBlobKey = "largeBlobKey"
    static let minPinLength = "minPinLength"
    static let hmacSecretMC = "hmac-secret-mc"
    static let thirdPartyPayment = "thirdPartyPayment"
    static let pinComplexityPolicy = "pinComplexityPolicy"

    static let supported = [
        credBlob, credProtect, hmacSecret, hmacSecretMC, largeBlobKey, minPinLength, pinComplexityPolicy,
        thirdPartyPayment,
    ]
}

/// The longest credBlob this key stores (getInfo maxCredBlobLength).
let maxCredBlobLength = 32

/// The makeCredential extension inputs this key understands, type-checked.
struct MakeCredentialExtensions: Sendable {
    var credProtect: CredProtect?
    var hmacSecret = false
    var credBlob: [UInt8]?
    var largeBlobKey = false
    var minPinLength = false
    /// hmac-secret-mc (CTAP 2.2): the hmac-secret outputs of the new credential, at registration.
    var hmacSecretMC: HMACSecretInput?
    var thirdPartyPayment = false
    /// pinComplexityPolicy (CTAP 2.3): the RP asks whether the PIN complexity policy is on.
    var pinComplexityPolicy = false

    init(_ map: [CBORValue: CBORValue]?) throws(CTAPError) {
        guard let map else { return }
        if let value = map[.textString(ExtensionName.hmacSecretMC)] { hmacSecretMC = try HMACSecretInput(value) }
        thirdPartyPayment = try map.optionalBool(ExtensionName.thirdPartyPayment) ?? false
        if let value = map[.textString(ExtensionName.credProtect)] {
            guard let raw = value.intValue else {
                throw CTAPError(.cborUnexpectedType, "credProtect is not an integer")
            }
            guard let level = CredProtect(rawValue: UInt8(clamping: raw)), raw >= 1 else {
                throw CTAPError(.invalidParameter, "credProtect \(raw) is not a level")
            }
            credProtect = level
        }
        hmacSecret = try map.optionalBool(ExtensionName.hmacSecret) ?? false
        credBlob = try map.optionalBytes(ExtensionName.credBlob)
        if let wanted = try map.optionalBool(ExtensionName.largeBlobKey) {
            guard wanted else { throw CTAPError(.invalidOption, "largeBlobKey must be true when present") }
            largeBlobKey = true
        }
        minPinLength = try map.optionalBool(ExtensionName.minPinLength) ?? false
        pinComplexityPolicy = try map.optionalBool(ExtensionName.pinComplexityPolicy) ?? false
    }
}

/// The hmac-secret input of getAssertion: the platform's key, the encrypted salts and their MAC.
struct HMACSecretInput: Sendable {
    var keyAgreement: CBORValue
    var saltEnc: [UInt8]
    var saltAuth: [UInt8]
    var pinUvAuthProtocol: PinUvAuthProtocol

    init(_ value: CBORValue) throws(CTAPError) {
        guard let map = value.mapValue else { throw CTAPError(.cborUnexpectedType, "hmac-secret input is not a map") }
        guard let keyAgreement = map[1] else { throw CTAPError(.missingParameter, "hmac-secret keyAgreement missing") }
        guard let saltEnc = map[2] else { throw CTAPError(.missingParameter, "hmac-secret saltEnc missing") }
        guard let saltAuth = map[3] else { throw CTAPError(.missingParameter, "hmac-secret saltAuth missing") }
        guard let saltEncBytes = saltEnc.bytesValue, let saltAuthBytes = saltAuth.bytesValue else {
            throw CTAPError(.cborUnexpectedType, "hmac-secret salts are not byte strings")
        }
        var proto = PinUvAuthProtocol.one
        if let value = map[4] {
            guard let number = value.intValue else {
                throw CTAPError(.cborUnexpectedType, "hmac-secret pinUvAuthProtocol is not an integer")
            }
            guard let named = PinUvAuthProtocol(rawValue: number) else {
                throw CTAPError(.invalidParameter, "hmac-secret pinUvAuthProtocol \(number) is not supported")
            }
            proto = named
        }
        self.keyAgreement = keyAgreement
        self.saltEnc = saltEncBytes
        self.saltAuth = saltAuthBytes
        self.pinUvAuthProtocol = proto
    }
}

/// hmac-secret, decrypted and checked at getAssertion: the shared secret and one or two salts, applied to each
/// credential the assertion signs (also in getNextAssertion).
struct HMACSecretRequest: Sendable {
    var proto: PinUvAuthProtocol
    var sharedSecret: [UInt8]
    var salts: [[UInt8]]
}

/// The getAssertion extension inputs this key understands, type-checked.
struct AssertionExtensions: Sendable {
    var hmacSecret: HMACSecretInput?
    var credBlob = false
    var largeBlobKey = false
    var thirdPartyPayment = false

    init(_ map: [CBORValue: CBORValue]?) throws(CTAPError) {
        guard let map else { return }
        thirdPartyPayment = try map.optionalBool(ExtensionName.thirdPartyPayment) ?? false
        if let value = map[.textString(ExtensionName.hmacSecret)] { hmacSecret = try HMACSecretInput(value) }
        credBlob = try map.optionalBool(ExtensionName.credBlob) ?? false
        if let wanted = try map.optionalBool(ExtensionName.largeBlobKey) {
            guard wanted else { throw CTAPError(.invalidOption, "largeBlobKey must be true when present") }
            largeBlobKey = true
        }
    }
}

/// The two CredRandoms of hmac-secret, derived from the device secret and the credential id so that
/// non-discoverable credentials need no storage; a reset replaces the device secret and so every CredRandom.
struct CredRandomDeriver: Sendable {
    private let key: SymmetricKey

    init(deviceSecret: [UInt8]) {
        key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: deviceSecret),
            salt: Array("fidosim".utf8),
            info: Array("hmac-secret CredRandom v1".utf8),
            outputByteCount: 32
        )
    }

    /// CredRandomWithUV (`userVerified`) or CredRandomWithoutUV of the credential `credentialId`.
    func credRandom(credentialId: [UInt8], userVerified: Bool) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: credentialId + [userVerified ? 1 : 0], using: key))
    }
}

extension Authenticator {
    /// Checks and decrypts the hmac-secret input (CTAP 2.1 §12.5): the salts' MAC under the shared secret,
    /// and one or two 32-byte salts.
    func hmacSecretRequest(_ input: HMACSecretInput) throws(CTAPError) -> HMACSecretRequest {
        let proto = input.pinUvAuthProtocol
        if configuration.profile.behaviour.saltLength == .onTheWire {
            let plain = proto == .one ? 0 : 16
            guard [32 + plain, 64 + plain].contains(input.saltEnc.count) else {
                throw CTAPError(.invalidLength, "hmac-secret saltEnc is \(input.saltEnc.count) bytes")
            }
        }
        let secret = try pinUv.sharedSecret(proto, peer: PinUvAuthProtocol.peerKey(input.keyAgreement))
        guard proto.verify(key: secret, message: input.saltEnc, signature: input.saltAuth) else {
            throw CTAPError(.pinAuthInvalid, "hmac-secret saltAuth does not authenticate saltEnc")
        }
        guard let salts = proto.decrypt(input.saltEnc, secret: secret), salts.count == 32 || salts.count == 64 else {
            throw CTAPError(.invalidParameter, "hmac-secret salts are not 32 or 64 bytes")
        }
        let split = salts.count == 64 ? [Array(salts[0..<32]), Array(salts[32..<64])] : [salts]
        return HMACSecretRequest(proto: proto, sharedSecret: secret, salts: split)
    }

    /// The encrypted hmac-secret output of one credential.
    mutating func hmacSecretOutput(
        _ request: HMACSecretRequest,
        credentialId: [UInt8],
        userVerified: Bool
    ) throws(CTAPError) -> [UInt8] {
        var credRandom = credRandoms.credRandom(credentialId: credentialId, userVerified: userVerified)
        defer { credRandom.wipe() }
        var output: [UInt8] = []
        for salt in request.salts {
            output += HMAC<SHA256>.authenticationCode(for: salt, using: SymmetricKey(data: credRandom))
        }
        return try request.proto.encrypt(output, secret: request.sharedSecret, iv: entropy.bytes(16))
    }
}
