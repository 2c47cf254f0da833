import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing
import _CryptoExtras

/// The platform side of a PIN/UV auth protocol, written from CTAP 2.1 §6.5.6–6.5.7 independently of the
/// authenticator's code: key agreement with the key's public key, the KDF, encryption and authenticate().
struct PinPlatform {
    var version: Int
    /// The platform's ephemeral key for this exchange.
    let ephemeral = P256.KeyAgreement.PrivateKey()
    /// The shared secret: 32 bytes (protocol 1) or the HMAC key followed by the AES key (protocol 2).
    var secret: [UInt8]

    /// Runs getKeyAgreement on `harness` and derives the shared secret.
    init(_ harness: inout Harness, version: Int = 2) throws {
        self.version = version
        let response = try responseMap(harness.cbor(.clientPIN, [1: CBORValue(version), 2: 2]))
        let cose = try #require(response[1])
        #expect(cose[1] == 2 && cose[3] == -25 && cose[-1] == 1, "getKeyAgreement COSE key: \(cose)")
        let x = try #require(cose[-2]?.bytesValue)
        let y = try #require(cose[-3]?.bytesValue)
        let peer = try P256.KeyAgreement.PublicKey(x963Representation: [0x04] + x + y)
        let z = try ephemeral.sharedSecretFromKeyAgreement(with: peer).withUnsafeBytes { Array($0) }
        if version == 1 {
            secret = Array(SHA256.hash(data: z))
        } else {
            func hkdf(_ info: String) -> [UInt8] {
                let key = HKDF<SHA256>.deriveKey(
                    inputKeyMaterial: SymmetricKey(data: z),
                    salt: [UInt8](repeating: 0, count: 32),
                    info: Array(info.utf8),
                    outputByteCount: 32
                )
                return key.withUnsafeBytes { Array($0) }
            }
            secret = hkdf("CTAP2 HMAC key") + hkdf("CTAP2 AES key")
        }
    }

    /// The platform's public key as the COSE_Key CTAP sends (alg -25).
    var keyAgreement: CBORValue {
        let point = Array(ephemeral.publicKey.x963Representation)
        return [1: 2, 3: -25, -1: 1, -2: .byteString(Array(point[1..<33])), -3: .byteString(Array(point[33...]))]
    }

    func encrypt(_ plaintext: [UInt8], iv: [UInt8] = (0..<16).map { UInt8($0 * 3) }) throws -> [UInt8] {
        if version == 1 {
            return Array(
                try AES._CBC.encrypt(
                    plaintext,
                    using: SymmetricKey(data: secret),
                    iv: AES._CBC.IV(ivBytes: [UInt8](repeating: 0, count: 16)),
                    noPadding: true
                )
            )
        }
        let out = try AES._CBC.encrypt(
            plaintext,
            using: SymmetricKey(data: Array(secret[32...])),
            iv: AES._CBC.IV(ivBytes: iv),
            noPadding: true
        )
        return iv + Array(out)
    }

    func decrypt(_ ciphertext: [UInt8]) throws -> [UInt8] {
        if version == 1 {
            return Array(
                try AES._CBC.decrypt(
                    ciphertext,
                    using: SymmetricKey(data: secret),
                    iv: AES._CBC.IV(ivBytes: [UInt8](repeating: 0, count: 16)),
                    noPadding: true
                )
            )
        }
        return Array(
            try AES._CBC.decrypt(
                ciphertext.dropFirst(16),
                using: SymmetricKey(data: Array(secret[32...])),
                iv: AES._CBC.IV(ivBytes: ciphertext.prefix(16)),
                noPadding: true
            )
        )
    }

    /// authenticate(key, message) of this protocol.
    static func authenticate(version: Int, key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        let mac = Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Array(key.prefix(32)))))
        return version == 1 ? Array(mac.prefix(16)) : mac
    }

    func authenticate(_ message: [UInt8]) -> [UInt8] {
        Self.authenticate(version: version, key: secret, message)
    }

    /// The PIN padded with zeros to 64 bytes.
    static func padded(_ pin: String) -> [UInt8] {
        let bytes = Array(pin.utf8)
        return bytes + [UInt8](repeating: 0, count: max(0, 64 - bytes.count))
    }

    static func pinHash(_ pin: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(pin.utf8)).prefix(16))
    }
}

/// A pinUvAuthToken the platform holds: its bytes and protocol.
struct PlatformToken {
    var version: Int
    var value: [UInt8]

    /// pinUvAuthParam over `message`.
    func authenticate(_ message: [UInt8]) -> [UInt8] {
        PinPlatform.authenticate(version: version, key: value, message)
    }
}

extension Harness {
    /// setPIN with a new key agreement.
    mutating func setPIN(_ pin: String, version: Int = 2) throws -> AuthenticatorOutcome {
        let platform = try PinPlatform(&self, version: version)
        let newPinEnc = try platform.encrypt(PinPlatform.padded(pin))
        return cbor(
            .clientPIN,
            [
                1: CBORValue(version), 2: 3, 3: platform.keyAgreement, 4: .byteString(platform.authenticate(newPinEnc)),
                5: .byteString(newPinEnc),
            ]
        )
    }

    /// changePIN with a new key agreement.
    mutating func changePIN(from old: String, to new: String, version: Int = 2) throws -> AuthenticatorOutcome {
        let platform = try PinPlatform(&self, version: version)
        let newPinEnc = try platform.encrypt(PinPlatform.padded(new))
        let pinHashEnc = try platform.encrypt(PinPlatform.pinHash(old))
        return cbor(
            .clientPIN,
            [
                1: CBORValue(version), 2: 4, 3: platform.keyAgreement,
                4: .byteString(platform.authenticate(newPinEnc + pinHashEnc)), 5: .byteString(newPinEnc),
                6: .byteString(pinHashEnc),
            ]
        )
    }

    /// getPinUvAuthTokenUsingPinWithPermissions (or getPinToken when `permissions` is nil); the raw outcome.
    mutating func requestToken(
        _ pin: String,
        permissions: Int?,
        rpId: String? = nil,
        version: Int = 2
    ) throws -> (AuthenticatorOutcome, PinPlatform) {
        let platform = try PinPlatform(&self, version: version)
        var params: [CBORValue: CBORValue] = [
            1: CBORValue(version), 2: permissions == nil ? 5 : 9, 3: platform.keyAgreement,
            6: .byteString(try platform.encrypt(PinPlatform.pinHash(pin))),
        ]
        if let permissions { params[9] = CBORValue(permissions) }
        if let rpId { params[10] = .textString(rpId) }
        return (cbor(.clientPIN, params), platform)
    }

    /// A decrypted pinUvAuthToken; the request must succeed.
    mutating func token(
        _ pin: String,
        permissions: Int? = 0x03,
        rpId: String? = nil,
        version: Int = 2
    ) throws -> PlatformToken {
        let (outcome, platform) = try requestToken(pin, permissions: permissions, rpId: rpId, version: version)
        let encrypted = try #require(try responseMap(outcome)[2]?.bytesValue)
        let value = try platform.decrypt(encrypted)
        #expect(value.count == 32)
        return PlatformToken(version: version, value: value)
    }

    /// getPINRetries: the retries and the power-cycle state.
    mutating func pinRetries() throws -> (retries: Int?, powerCycle: Bool?) {
        let response = try responseMap(cbor(.clientPIN, [1: 2, 2: 1]))
        return (response[3]?.intValue, response[4]?.boolValue)
    }
}

/// The MakeCredential/GetAssertion request with pinUvAuthParam and protocol for `token`.
func authorized(
    _ parameters: [CBORValue: CBORValue],
    _ token: PlatformToken,
    paramKey: Int,
    clientDataHash: [UInt8] = Request.clientDataHash
) -> [CBORValue: CBORValue] {
    parameters.setting(paramKey, .byteString(token.authenticate(clientDataHash)))
        .setting(paramKey + 1, CBORValue(token.version))
}
