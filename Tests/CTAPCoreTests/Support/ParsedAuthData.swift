import CTAPCBOR
import Crypto

/// Authenticator data (WebAuthn §6.1) taken apart, strictly: every byte must be accounted for.
struct ParsedAuthData {
    /// The attested credential data of a makeCredential response.
    struct AttestedCredential {
        var aaguid: [UInt8]
        var credentialId: [UInt8]
        var coseKey: CBORValue
        /// The key of an ES256 credential; nil for another algorithm.
        var es256Key: P256.Signing.PublicKey?

        /// The ES256 key; a test that calls this on another algorithm's credential is wrong.
        var publicKey: P256.Signing.PublicKey {
            guard let es256Key else { preconditionFailure("not an ES256 credential: \(coseKey)") }
            return es256Key
        }
    }

    static let userPresent: UInt8 = 0x01
    static let userVerified: UInt8 = 0x04
    static let attestedCredentialData: UInt8 = 0x40
    static let extensionData: UInt8 = 0x80

    var bytes: [UInt8]
    var rpIdHash: [UInt8]
    var flags: UInt8
    var counter: UInt32
    var attestedCredential: AttestedCredential?
    /// The extension outputs (a map), when the ED flag is set.
    var extensions: CBORValue?

    init(_ bytes: [UInt8]) throws {
        guard bytes.count >= 37 else { throw HarnessFailure("authData of \(bytes.count) bytes") }
        self.bytes = bytes
        rpIdHash = Array(bytes[0..<32])
        flags = bytes[32]
        counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        let hasExtensions = flags & Self.extensionData != 0
        guard flags & Self.attestedCredentialData != 0 else {
            attestedCredential = nil
            if hasExtensions {
                extensions = try Self.extensionMap(bytes[37...])
            } else {
                guard bytes.count == 37 else { throw HarnessFailure("\(bytes.count - 37) stray bytes in authData") }
            }
            return
        }
        guard bytes.count >= 55 else { throw HarnessFailure("attested credential data is truncated") }
        let length = Int(bytes[53]) << 8 | Int(bytes[54])
        guard bytes.count > 55 + length else { throw HarnessFailure("credential id is truncated") }
        let rest = bytes[(55 + length)...]
        let coseKey: CBORValue
        if hasExtensions {
            // The COSE key and the extension map follow each other: find the one split where both decode.
            var split: (CBORValue, CBORValue)?
            for end in rest.indices.dropFirst() {
                if let key = try? CBORDecoder.decode(rest[..<end]), let ext = try? Self.extensionMap(rest[end...]) {
                    split = (key, ext)
                    break
                }
            }
            guard let split else { throw HarnessFailure("no COSE key and extension map in authData") }
            coseKey = split.0
            extensions = split.1
        } else {
            // The COSE key must be exactly the rest: the decoder rejects trailing bytes.
            coseKey = try CBORDecoder.decode(rest)
        }
        attestedCredential = AttestedCredential(
            aaguid: Array(bytes[37..<53]),
            credentialId: Array(bytes[55..<(55 + length)]),
            coseKey: coseKey,
            es256Key: coseKey[3] == -7 ? try es256PublicKey(cose: coseKey) : nil
        )
    }

    /// A non-empty, canonical extension output map.
    private static func extensionMap(_ bytes: ArraySlice<UInt8>) throws -> CBORValue {
        let value = try CBORDecoder.decode(bytes)
        guard let map = value.mapValue, !map.isEmpty, CBORDecoder.isCanonical(bytes) else {
            throw HarnessFailure("extension data is not a non-empty canonical map")
        }
        return value
    }
}

/// The P-256 key of an ES256 COSE_Key: exactly kty 2, alg -7, crv 1, 32-byte x and y.
func es256PublicKey(cose: CBORValue) throws -> P256.Signing.PublicKey {
    guard let map = cose.mapValue, map.count == 5, cose[1] == 2, cose[3] == -7, cose[-1] == 1,
        let x = cose[-2]?.bytesValue, x.count == 32, let y = cose[-3]?.bytesValue, y.count == 32
    else { throw HarnessFailure("not an ES256 COSE key: \(cose)") }
    return try P256.Signing.PublicKey(x963Representation: [0x04] + x + y)
}
