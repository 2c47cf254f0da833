import CTAPCBOR
import Crypto
import _CryptoExtras

extension Authenticator {
    /// A fresh P-256 key from the injected entropy.
    mutating func newPrivateKey() -> P256.Signing.PrivateKey {
        while true {
            var raw = entropy.bytes(32)
            defer { raw.wipe() }
            if let key = try? P256.Signing.PrivateKey(rawRepresentation: raw) { return key }
        }
    }

    /// A fresh key of `algorithm` from the injected entropy.
    mutating func newSigningKey(_ algorithm: CredentialAlgorithm) throws(CTAPError) -> SigningKey {
        switch algorithm.keyKind {
        case .p256: return SigningKey(newPrivateKey(), algorithm: algorithm)
        case .ed25519, .mlDSA65, .mlDSA87:
            // A 32-byte seed is a valid key.
            var seed = entropy.bytes(32)
            defer { seed.wipe() }
            return try SigningKey(raw: seed, algorithm: algorithm)
        case .p384, .p521, .secp256k1:
            // A scalar from the entropy, drawn again in the rare case it is not below the group order (P-521's top
            // seven bits are always zero).
            for _ in 0..<16 {
                var scalar = entropy.bytes(algorithm.idKeyLength)
                defer { scalar.wipe() }
                if algorithm.keyKind == .p521 { scalar[0] &= 0x01 }
                if let key = try? SigningKey(raw: scalar, algorithm: algorithm) { return key }
            }
            throw CTAPError(.other, "the entropy source gave no valid \(algorithm.name) key")
        case .rsa:
            // BoringSSL's prime generation draws from its own CSPRNG: RSA keys are the one thing the injected entropy
            // does not decide (security.md).
            do {
                return SigningKey(try _RSA.Signing.PrivateKey(keySize: .bits2048), algorithm: algorithm)
            } catch {
                throw CTAPError(.other, "RSA key generation failed: \(error)")
            }
        }
    }

    /// The COSE_Key of the public key that belongs to a raw private key.
    static func publicKey(of rawKey: [UInt8], algorithm: CredentialAlgorithm) throws(CTAPError) -> CBORValue {
        try SigningKey(raw: rawKey, algorithm: algorithm).coseKey
    }
}
