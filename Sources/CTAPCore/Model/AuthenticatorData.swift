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
