import CTAPCBOR
import Crypto

/// Flags byte of authenticator data.
struct AuthenticatorDataFlags: OptionSet {
    let rawValue: UInt8
    static let userPresent = AuthenticatorDataFlags(rawValue: 0x01)
    static let userVerified = AuthenticatorDataFlags(rawValue: 0x04)
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

/// COSE encodings of public keys.
enum COSEKey {
    /// The COSE_Key map of an ES256 public key: kty EC2, alg -7, crv P-256, x, y.
    static func es256(_ key: P256.Signing.PublicKey) -> CBORValue {
        let point = Array(key.x963Representation)  // 0x04 | x | y
        return [
            1: 2,
            3: -7,
            -1: 1,
            -2: .byteString(Array(point[1..<33])),
            -3: .byteString(Array(point[33..<65])),
        ]
    }

    /// The COSE_Key map of an Ed25519 public key: kty OKP, alg -8, crv Ed25519, x.
    static func edDSA(_ key: Curve25519.Signing.PublicKey) -> CBORValue {
        [1: 1, 3: -8, -1: 6, -2: .byteString(Array(key.rawRepresentation))]
    }
}
