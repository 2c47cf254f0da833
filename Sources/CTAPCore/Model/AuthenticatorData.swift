import CTAPCBOR
import Crypto

/// Flags byte of authenticator data.
struct AuthenticatorDataFlags: OptionSet {
    let rawValue: UInt8
    static let userPresent = AuthenticatorDataFlags(rawValue: 0x01)
    static let userVerified = AuthenticatorDataFlags(rawValue: 0x04)
    /// WebAuthn Level 3: the credential may be backed up (BE, fixed when it is made).
    static let backupEligible = AuthenticatorDataFlags(rawValue: 0x08)
    /// WebAuthn Level 3: the credential is backed up now (BS).
    static let backupState = AuthenticatorDataFlags(rawValue: 0x10)
    static let attestedCredentialData = AuthenticatorDataFlags(rawValue: 0x40)
    static let extensionData = AuthenticatorDataFlags(rawValue: 0x80)
}

/// Builds the authenticator data structure of WebAuthn §6.1.
enum AuthenticatorData {
    static func make(
        rpIdHash: [UInt8],
        flags: AuthenticatorDataFlags,
        signCount: UInt32,
        attestedCredential: (aaguid: [UInt8], credentialId: [UInt8], publicKey: [UInt8])? = nil,
        extensions: [CBORValue: CBORValue] = [:]
    ) -> [UInt8] {
        var out = rpIdHash
        var flags = flags
        if attestedCredential != nil { flags.insert(.attestedCredentialData) }
        if !extensions.isEmpty { flags.insert(.extensionData) }
        out.append(flags.rawValue)
        out += bigEndian(signCount)
        if let attested = attestedCredential {
            out += attested.aaguid
            out += [UInt8(attested.credentialId.count >> 8), UInt8(attested.credentialId.count & 0xFF)]
            out += attested.credentialId
            out += attested.publicKey
        }
        if !extensions.isEmpty { out += CBORValue.map(extensions).encoded() }
        return out
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }
}

/// COSE encodings of public keys (RFC 9053 for EC2 and OKP keys, RFC 9964 for AKP keys).
enum COSEKey {
    /// An EC2 key: kty 2, alg, crv (1 P-256, 2 P-384, 3 P-521), x and y from the uncompressed point 0x04 | x | y.
    static func ec2(_ algorithm: CredentialAlgorithm, curve: Int, x963 point: [UInt8]) -> CBORValue {
        let size = (point.count - 1) / 2
        return [
            1: 2,
            3: CBORValue(algorithm.rawValue),
            -1: CBORValue(curve),
            -2: .byteString(Array(point[1..<(1 + size)])),
            -3: .byteString(Array(point[(1 + size)...])),
        ]
    }

    /// An OKP key: kty 1, alg, crv Ed25519 (6), x.
    static func okp(_ algorithm: CredentialAlgorithm, x: [UInt8]) -> CBORValue {
        [1: 1, 3: CBORValue(algorithm.rawValue), -1: 6, -2: .byteString(x)]
    }

    /// An AKP key (ML-DSA): kty 7, alg, pub.
    static func akp(_ algorithm: CredentialAlgorithm, publicKey: [UInt8]) -> CBORValue {
        [1: 7, 3: CBORValue(algorithm.rawValue), -1: .byteString(publicKey)]
    }
}
