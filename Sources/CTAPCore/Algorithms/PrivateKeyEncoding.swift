import Crypto
import Secp256k1
import _CryptoExtras

package enum PrivateKeyEncoding {
    /// The fixed prefix of an Ed25519 PrivateKeyInfo without the optional public key (RFC 8410 §7).
    static let ed25519Prefix: [UInt8] = [
        0x30, 0x2E, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
    ]

    /// The fixed prefix of an ML-DSA PrivateKeyInfo in the seed form (RFC 9881: `[0] IMPLICIT OCTET STRING` of the
    /// 32-byte seed); the last byte of the OID (2.16.840.1.101.3.4.3.18 or .19) names the parameter set.
    static func mlDSAPrefix(oidLast: UInt8) -> [UInt8] {
        [
            0x30, 0x34, 0x02, 0x01, 0x00, 0x30, 0x0B, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03,
            oidLast, 0x04, 0x22, 0x80, 0x20,
        ]
    }
    static let mlDSA65OID: UInt8 = 0x12
    static let mlDSA87OID: UInt8 = 0x13

    /// The raw key and algorithm of a PKCS#8 private key: P-256 → ES256, P-384 → ES384, P-521 → ES512,
    /// Ed25519 → EdDSA, ML-DSA-65/87 (seed form) → ML-DSA-65/87 (PKCS#8 does not say which of the polymorphic and
    /// fully specified identifiers a key was made for).
    package static func decode(pkcs8: [UInt8]) throws(CTAPError) -> (key: [UInt8], algorithm: CredentialAlgorithm) {
        if pkcs8.count == ed25519Prefix.count + 32, Array(pkcs8.prefix(ed25519Prefix.count)) == ed25519Prefix {
            return (Array(pkcs8.suffix(32)), .edDSA)
        }
        for (oid, algorithm) in [(mlDSA65OID, CredentialAlgorithm.mlDSA65), (mlDSA87OID, .mlDSA87)] {
            let prefix = mlDSAPrefix(oidLast: oid)
            if pkcs8.count == prefix.count + 32, Array(pkcs8.prefix(prefix.count)) == prefix {
                return (Array(pkcs8.suffix(32)), algorithm)
            }
        }
        // secp256k1 before P-256: swift-crypto's P-256 reader takes a secp256k1 key's scalar without its curve.
        if let scalar = Secp256k1ECDSA.scalar(pkcs8: pkcs8) { return (scalar, .es256K) }
        if let key = try? P256.Signing.PrivateKey(derRepresentation: pkcs8) {
            return (Array(key.rawRepresentation), .es256)
        }
        if let key = try? P384.Signing.PrivateKey(derRepresentation: pkcs8) {
            return (Array(key.rawRepresentation), .es384)
        }
        if let key = try? P521.Signing.PrivateKey(derRepresentation: pkcs8) {
            return (Array(key.rawRepresentation), .es512)
        }
        // RSA: 2048 bits or more (swift-crypto refuses smaller keys), kept as PKCS#1, signing RS256 by default.
        if let key = try? _RSA.Signing.PrivateKey(derRepresentation: pkcs8), key.keySizeInBits <= 4096 {
            return (Array(key.derRepresentation), .rs256)
        }
        throw CTAPError(
            .invalidParameter,
            "the private key is not a PKCS#8 key of P-256, P-384, P-521, secp256k1, Ed25519, RSA (2048–4096 bits) or ML-DSA-65/87 (seed form)"
        )
    }

    /// The PKCS#8 DER of a raw key.
    package static func encode(key: [UInt8], algorithm: CredentialAlgorithm) throws(CTAPError) -> [UInt8] {
        guard algorithm.isRawKeyLength(key.count) else {
            throw CTAPError(.other, "a stored \(algorithm.name) key is \(key.count) bytes")
        }
        do {
            switch algorithm.keyKind {
            case .ed25519: return ed25519Prefix + key
            case .mlDSA65: return mlDSAPrefix(oidLast: mlDSA65OID) + key
            case .mlDSA87: return mlDSAPrefix(oidLast: mlDSA87OID) + key
            case .p256: return Array(try P256.Signing.PrivateKey(rawRepresentation: key).derRepresentation)
            case .p384: return Array(try P384.Signing.PrivateKey(rawRepresentation: key).derRepresentation)
            case .p521: return Array(try P521.Signing.PrivateKey(rawRepresentation: key).derRepresentation)
            case .rsa: return Array(try _RSA.Signing.PrivateKey(derRepresentation: key).pkcs8DERRepresentation)
            case .secp256k1:
                guard let der = Secp256k1ECDSA.pkcs8(scalar: key) else {
                    throw CTAPError(.other, "a stored ES256K key is invalid")
                }
                return der
            }
        } catch {
            throw CTAPError(.other, "a stored \(algorithm.name) key is invalid")
        }
    }
}
