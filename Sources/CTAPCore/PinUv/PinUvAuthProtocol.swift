import CTAPCBOR
import Crypto
import _CryptoExtras

/// PIN/UV auth protocols one and two (CTAP 2.1 §6.5.6 and §6.5.7): key agreement, the shared secret's
/// key derivation, encryption of PINs and salts, and the HMAC that authenticates requests.
///
/// Pure functions over byte arrays; the key-agreement key pair lives in ``PinUvState``.
enum PinUvAuthProtocol: Int, Sendable, CaseIterable {
    case one = 1
    case two = 2

    /// The protocols this key supports, in order of preference (getInfo key 0x06).
    static let supported: [PinUvAuthProtocol] = [.two, .one]

    /// The protocol a request names, or CTAP1_ERR_INVALID_PARAMETER.
    static func named(_ value: Int) throws(CTAPError) -> PinUvAuthProtocol {
        guard let proto = PinUvAuthProtocol(rawValue: value) else {
            throw CTAPError(.invalidParameter, "unsupported pinUvAuthProtocol \(value)")
        }
        return proto
    }

    /// The length of an authenticate() result: 16 bytes for protocol one, 32 for two.
    var signatureLength: Int { self == .one ? 16 : 32 }

    /// The COSE_Key of the authenticator's key-agreement public key (alg -25, ECDH-ES+HKDF-256).
    static func coseKey(_ key: P256.KeyAgreement.PublicKey) -> CBORValue {
        let point = Array(key.x963Representation)
        return [
            1: 2,
            3: -25,
            -1: 1,
            -2: .byteString(Array(point[1..<33])),
            -3: .byteString(Array(point[33..<65])),
        ]
    }

    /// The platform's key-agreement public key from its COSE_Key, or CTAP1_ERR_INVALID_PARAMETER.
    static func peerKey(_ value: CBORValue) throws(CTAPError) -> P256.KeyAgreement.PublicKey {
        guard let map = value.mapValue else { throw CTAPError(.cborUnexpectedType, "keyAgreement is not a map") }
        guard map[1] == 2, map[-1] == 1 else {
            throw CTAPError(.invalidParameter, "keyAgreement is not an EC2 P-256 key")
        }
        guard let x = map[-2]?.bytesValue, let y = map[-3]?.bytesValue, x.count == 32, y.count == 32 else {
            throw CTAPError(.invalidParameter, "keyAgreement coordinates are not 32-byte strings")
        }
        do {
            return try P256.KeyAgreement.PublicKey(x963Representation: [0x04] + x + y)
        } catch {
            throw CTAPError(.invalidParameter, "keyAgreement is not a point on P-256")
        }
    }

    /// ECDH with the platform's key, then this protocol's KDF: 32 bytes (one) or 64 bytes (two: the HMAC key
    /// followed by the AES key).
    func sharedSecret(
        privateKey: P256.KeyAgreement.PrivateKey,
        peer: P256.KeyAgreement.PublicKey
    ) throws(CTAPError) -> [UInt8] {
        let z: SharedSecret
        do {
            z = try privateKey.sharedSecretFromKeyAgreement(with: peer)
        } catch {
            throw CTAPError(.invalidParameter, "key agreement failed")
        }
        switch self {
        case .one:
            return z.withUnsafeBytes { Array(SHA256.hash(data: $0)) }
        case .two:
            let salt = [UInt8](repeating: 0, count: 32)
            let hmacKey = z.hkdfDerivedSymmetricKey(
                using: SHA256.self,
                salt: salt,
                sharedInfo: Array("CTAP2 HMAC key".utf8),
                outputByteCount: 32
            )
            let aesKey = z.hkdfDerivedSymmetricKey(
                using: SHA256.self,
                salt: salt,
                sharedInfo: Array("CTAP2 AES key".utf8),
                outputByteCount: 32
            )
            return hmacKey.withUnsafeBytes { Array($0) } + aesKey.withUnsafeBytes { Array($0) }
        }
    }

    /// The AES key part of a shared secret.
    private func aesKey(_ secret: [UInt8]) -> SymmetricKey {
        SymmetricKey(data: self == .one ? secret : Array(secret.suffix(32)))
    }

    /// Encrypts `plaintext` (a multiple of 16 bytes) under the shared secret; `iv` is used by protocol two only.
    func encrypt(_ plaintext: [UInt8], secret: [UInt8], iv: [UInt8]) throws(CTAPError) -> [UInt8] {
        do {
            switch self {
            case .one:
                let out = try AES._CBC.encrypt(
                    plaintext,
                    using: aesKey(secret),
                    iv: AES._CBC.IV(ivBytes: [UInt8](repeating: 0, count: 16)),
                    noPadding: true
                )
                return Array(out)
            case .two:
                let out = try AES._CBC.encrypt(
                    plaintext,
                    using: aesKey(secret),
                    iv: AES._CBC.IV(ivBytes: iv),
                    noPadding: true
                )
                return iv + Array(out)
            }
        } catch {
            throw CTAPError(.other, "encryption failed: \(error)")
        }
    }

    /// Decrypts a ciphertext from the platform, or nil when its length is not valid for this protocol.
    func decrypt(_ ciphertext: [UInt8], secret: [UInt8]) -> [UInt8]? {
        let iv: [UInt8]
        let body: ArraySlice<UInt8>
        switch self {
        case .one:
            iv = [UInt8](repeating: 0, count: 16)
            body = ciphertext[...]
        case .two:
            guard ciphertext.count >= 16 else { return nil }
            iv = Array(ciphertext.prefix(16))
            body = ciphertext.dropFirst(16)
        }
        guard !body.isEmpty, body.count % 16 == 0 else { return nil }
        guard
            let ivValue = try? AES._CBC.IV(ivBytes: iv),
            let plain = try? AES._CBC.decrypt(body, using: aesKey(secret), iv: ivValue, noPadding: true)
        else { return nil }
        return Array(plain)
    }

    /// HMAC-SHA-256 of `message` under `key` (a pinUvAuthToken or a shared secret), truncated to 16 bytes for
    /// protocol one; protocol two uses the first 32 bytes of a longer key.
    func authenticate(key: [UInt8], message: [UInt8]) -> [UInt8] {
        let macKey = SymmetricKey(data: self == .two ? Array(key.prefix(32)) : key)
        let mac = Array(HMAC<SHA256>.authenticationCode(for: message, using: macKey))
        return self == .one ? Array(mac.prefix(16)) : mac
    }

    /// Whether `signature` authenticates `message` under `key`, compared in constant time.
    func verify(key: [UInt8], message: [UInt8], signature: [UInt8]) -> Bool {
        guard signature.count == signatureLength else { return false }
        return constantTimeEqual(authenticate(key: key, message: message), signature)
    }
}
