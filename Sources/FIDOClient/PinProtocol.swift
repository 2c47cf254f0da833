package import CTAPCBOR
import Crypto
import _CryptoExtras

/// The platform's half of a PIN/UV auth protocol (CTAP 2.1 §6.5.6 one, §6.5.7 two): a fresh key agreement with the
/// authenticator's key, then encryption and authentication with the shared secret.
package struct PlatformPinProtocol: Sendable {
    package let version: Int
    /// The platform's key-agreement public key as a COSE_Key (alg -25), for parameter keyAgreement (0x03).
    package let platformKey: CBORValue
    /// Protocol one: SHA-256(Z), 32 bytes. Protocol two: HMAC key then AES key, 64 bytes.
    package let sharedSecret: [UInt8]

    package init(version: Int, authenticatorKey: CBORValue) throws(ClientError) {
        guard version == 1 || version == 2 else { throw .malformed("PIN/UV auth protocol \(version)") }
        self.version = version
        let peer = try COSEPublicKey(authenticatorKey)
        guard peer.curve == 1, let y = peer.y else { throw .malformed("a key-agreement key that is not P-256") }
        let ours = P256.KeyAgreement.PrivateKey()
        let theirs: P256.KeyAgreement.PublicKey
        let secret: SharedSecret
        do {
            theirs = try P256.KeyAgreement.PublicKey(rawRepresentation: peer.x + y)
            secret = try ours.sharedSecretFromKeyAgreement(with: theirs)
        } catch {
            throw .malformed("the authenticator's key-agreement key is not a P-256 point: \(error)")
        }
        let z = secret.withUnsafeBytes { Array($0) }
        if version == 1 {
            sharedSecret = Array(SHA256.hash(data: z))
        } else {
            func derive(_ info: String) -> [UInt8] {
                HKDF<SHA256>.deriveKey(
                    inputKeyMaterial: SymmetricKey(data: z),
                    salt: [UInt8](repeating: 0, count: 32),
                    info: Array(info.utf8),
                    outputByteCount: 32
                ).withUnsafeBytes { Array($0) }
            }
            sharedSecret = derive("CTAP2 HMAC key") + derive("CTAP2 AES key")
        }
        let raw = Array(ours.publicKey.rawRepresentation)
        platformKey = COSEPublicKey.p256(
            x: Array(raw[0..<32]),
            y: Array(raw[32..<64]),
            algorithm: COSEPublicKey.ecdhEsHkdf256
        )
    }

    var aesKey: [UInt8] { version == 1 ? sharedSecret : Array(sharedSecret[32..<64]) }
    var hmacKey: [UInt8] { version == 1 ? sharedSecret : Array(sharedSecret[0..<32]) }

    /// AES-256-CBC without padding: a zero IV in protocol one; a random IV sent first in protocol two.
    package func encrypt(_ plaintext: [UInt8]) throws(ClientError) -> [UInt8] {
        guard plaintext.count % 16 == 0 else {
            throw .malformed("plaintext of \(plaintext.count) bytes, not whole blocks")
        }
        let iv = version == 1 ? [UInt8](repeating: 0, count: 16) : randomBytes(16)
        do {
            let out = try AES._CBC.encrypt(
                plaintext,
                using: SymmetricKey(data: aesKey),
                iv: AES._CBC.IV(ivBytes: iv),
                noPadding: true
            )
            return (version == 1 ? [] : iv) + Array(out)
        } catch {
            throw .malformed("AES-CBC: \(error)")
        }
    }

    package func decrypt(_ ciphertext: [UInt8]) throws(ClientError) -> [UInt8] {
        let ivLength = version == 1 ? 0 : 16
        guard ciphertext.count >= ivLength, (ciphertext.count - ivLength) % 16 == 0 else {
            throw .malformed("ciphertext of \(ciphertext.count) bytes")
        }
        let iv = version == 1 ? [UInt8](repeating: 0, count: 16) : Array(ciphertext[0..<16])
        do {
            return Array(
                try AES._CBC.decrypt(
                    ciphertext[ivLength...],
                    using: SymmetricKey(data: aesKey),
                    iv: AES._CBC.IV(ivBytes: iv),
                    noPadding: true
                )
            )
        } catch {
            throw .malformed("AES-CBC: \(error)")
        }
    }

    /// HMAC-SHA-256 with the shared secret's HMAC key: 16 bytes in protocol one, 32 in two.
    package func authenticate(_ message: [UInt8]) -> [UInt8] {
        authenticate(key: hmacKey, message)
    }

    /// HMAC-SHA-256 with a pinUvAuthToken.
    package func authenticate(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        Self.authenticate(version: version, key: key, message)
    }

    /// HMAC-SHA-256 of `message` under `key`: its first 16 bytes in protocol one, all 32 in two.
    package static func authenticate(version: Int, key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        let mac = Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
        return version == 1 ? Array(mac.prefix(16)) : mac
    }
}

/// authenticatorClientPIN requests (CTAP 2.1 §6.5.5).
package struct ClientPIN {
    package let client: CTAP2Client
    package let version: Int

    package init(client: CTAP2Client, version: Int) {
        self.client = client
        self.version = version
    }

    package enum Permission {
        package static let makeCredential = 0x01
        package static let getAssertion = 0x02
        package static let credentialManagement = 0x04
        package static let bioEnrollment = 0x08
        package static let largeBlobWrite = 0x10
        package static let authenticatorConfig = 0x20
    }

    package func request(_ subCommand: Int, _ extra: [Int: CBORValue] = [:]) throws(ClientError) -> CTAPResponse {
        var params: [CBORValue: CBORValue] = [1: CBORValue(version), 2: CBORValue(subCommand)]
        for (key, value) in extra { params[CBORValue(key)] = value }
        return try client.send(CTAPCommand.clientPIN, .map(params))
    }

    /// A fresh key agreement with the authenticator (getKeyAgreement, then our own key).
    package func agree() throws(ClientError) -> PlatformPinProtocol {
        let response = try request(2)
        guard response.ok else {
            throw .malformed("getKeyAgreement answered \(CTAPStatusCode.describe(response.status))")
        }
        guard let key = try response.map()[1] else { throw .malformed("getKeyAgreement without keyAgreement (0x01)") }
        return try PlatformPinProtocol(version: version, authenticatorKey: key)
    }

    /// The PIN as setPIN and changePIN send it: UTF-8, zero-padded to 64 bytes.
    package static func padded(_ pin: String) -> [UInt8] {
        let bytes = Array(pin.utf8)
        return bytes + [UInt8](repeating: 0, count: max(0, 64 - bytes.count))
    }

    package func retries() throws(ClientError) -> CTAPResponse { try request(1) }

    package func setPIN(_ pin: String) throws(ClientError) -> CTAPResponse {
        let session = try agree()
        let encrypted = try session.encrypt(Self.padded(pin))
        return try request(
            3,
            [3: session.platformKey, 4: .byteString(session.authenticate(encrypted)), 5: .byteString(encrypted)]
        )
    }

    package func changePIN(from old: String, to new: String) throws(ClientError) -> CTAPResponse {
        let session = try agree()
        let newEncrypted = try session.encrypt(Self.padded(new))
        let hashEncrypted = try session.encrypt(Array(OpenSSLVerifier.sha256(Array(old.utf8)).prefix(16)))
        return try request(
            4,
            [
                3: session.platformKey, 4: .byteString(session.authenticate(newEncrypted + hashEncrypted)),
                5: .byteString(newEncrypted), 6: .byteString(hashEncrypted),
            ]
        )
    }

    /// getPinToken (permissions nil; `rpId` is then left out) or getPinUvAuthTokenUsingPinWithPermissions: the answer,
    /// and the decrypted token when it succeeded.
    package func token(
        pin: String,
        permissions: Int? = nil,
        rpId: String? = nil
    ) throws(ClientError)
        -> (response: CTAPResponse, token: [UInt8]?)
    {
        let session = try agree()
        let hashEncrypted = try session.encrypt(Array(OpenSSLVerifier.sha256(Array(pin.utf8)).prefix(16)))
        var extra: [Int: CBORValue] = [3: session.platformKey, 6: .byteString(hashEncrypted)]
        // getPinToken takes neither permissions nor an RP ID (CTAP 2.1 §6.5.5.7.1).
        if let permissions {
            extra[9] = CBORValue(permissions)
            if let rpId { extra[10] = .textString(rpId) }
        }
        let response = try request(permissions == nil ? 5 : 9, extra)
        guard response.ok else { return (response, nil) }
        guard let encrypted = try response.map()[2]?.bytesValue else {
            throw .malformed("the token answer has no pinUvAuthToken (0x02)")
        }
        return (response, try session.decrypt(encrypted))
    }
}

/// getInfo's members encrypted for the persistent token (CTAP 2.2 encIdentifier, CTAP 2.3 encCredStoreState).
package enum PersistentTokenSecret {
    /// IV(16) ‖ AES-128-CBC(HKDF-SHA-256(token, 32 zero bytes, info, 16), IV, plaintext) decrypted; nil when it is
    /// not 32 bytes or does not decrypt.
    package static func decrypt(_ sealed: [UInt8], token: [UInt8], info: String) -> [UInt8]? {
        guard sealed.count == 32 else { return nil }
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: token),
            salt: [UInt8](repeating: 0, count: 32),
            info: Array(info.utf8),
            outputByteCount: 16
        )
        guard let iv = try? AES._CBC.IV(ivBytes: sealed.prefix(16)),
            let plain = try? AES._CBC.decrypt(sealed.dropFirst(16), using: key, iv: iv, noPadding: true)
        else { return nil }
        return Array(plain)
    }
}
