package import CTAPCBOR

/// Authenticator data (WebAuthn §6.1), read field by field from the bytes a key signed.
package struct ParsedAuthenticatorData: Sendable {
    package var bytes: [UInt8]
    package var rpIdHash: [UInt8]
    package var flags: UInt8
    package var signCount: UInt32
    package var aaguid: [UInt8]?
    package var credentialId: [UInt8]?
    package var credentialPublicKey: CBORValue?
    package var extensions: [String: CBORValue]?

    package var userPresent: Bool { flags & 0x01 != 0 }
    package var userVerified: Bool { flags & 0x04 != 0 }
    package var attested: Bool { flags & 0x40 != 0 }
    package var hasExtensions: Bool { flags & 0x80 != 0 }

    package init(_ bytes: [UInt8]) throws(ClientError) {
        self.bytes = bytes
        guard bytes.count >= 37 else { throw .malformed("authenticator data of \(bytes.count) bytes (at least 37)") }
        rpIdHash = Array(bytes[0..<32])
        flags = bytes[32]
        signCount = UInt32(bytes[33]) << 24 | UInt32(bytes[34]) << 16 | UInt32(bytes[35]) << 8 | UInt32(bytes[36])
        var offset = 37
        if flags & 0x40 != 0 {
            guard bytes.count >= offset + 18 else { throw .malformed("attested credential data cut short") }
            aaguid = Array(bytes[offset..<offset + 16])
            let idLength = Int(bytes[offset + 16]) << 8 | Int(bytes[offset + 17])
            offset += 18
            guard bytes.count >= offset + idLength else { throw .malformed("a credential ID cut short") }
            credentialId = Array(bytes[offset..<offset + idLength])
            offset += idLength
            let keyLength = try CBORItem.length(bytes, at: offset)
            credentialPublicKey = try CBORItem.decode(Array(bytes[offset..<offset + keyLength]))
            offset += keyLength
        }
        if flags & 0x80 != 0 {
            let length = try CBORItem.length(bytes, at: offset)
            let value = try CBORItem.decode(Array(bytes[offset..<offset + length]))
            guard let map = value.mapValue else {
                throw .malformed("the extensions of authenticator data are not a map")
            }
            var out: [String: CBORValue] = [:]
            for (key, item) in map {
                guard let name = key.textValue else { throw .malformed("an extension identifier is not text") }
                out[name] = item
            }
            extensions = out
            offset += length
        }
        guard offset == bytes.count else {
            throw .malformed("\(bytes.count - offset) bytes after the authenticator data's last field")
        }
    }
}

/// The length of one CBOR data item in a byte string, found without decoding it (authenticator data puts CBOR
/// items back to back with no length of their own).
package enum CBORItem {
    package static func decode(_ bytes: [UInt8]) throws(ClientError) -> CBORValue {
        do {
            return try CBORDecoder.decode(bytes, maxDepth: 8)
        } catch {
            throw .malformed("CBOR: \(error)")
        }
    }

    package static func length(_ bytes: [UInt8], at start: Int, depth: Int = 0) throws(ClientError) -> Int {
        guard depth < 16 else { throw .malformed("CBOR nested too deeply") }
        guard start < bytes.count else { throw .malformed("CBOR item cut short") }
        let major = bytes[start] >> 5
        let info = bytes[start] & 0x1F
        var offset = start + 1
        var argument: UInt64 = UInt64(info)
        switch info {
        case 0..<24: break
        case 24, 25, 26, 27:
            let size = 1 << Int(info - 24)
            guard offset + size <= bytes.count else { throw .malformed("CBOR item cut short") }
            argument = bytes[offset..<offset + size].reduce(0) { $0 << 8 | UInt64($1) }
            offset += size
        default:
            throw .malformed("CBOR with an indefinite or reserved length")
        }
        switch major {
        case 0, 1, 7:
            return offset - start
        case 2, 3:
            guard argument <= UInt64(bytes.count - offset) else { throw .malformed("CBOR string cut short") }
            return offset - start + Int(argument)
        case 4, 5:
            guard argument <= UInt64(bytes.count) else { throw .malformed("CBOR container cut short") }
            let items = Int(argument) * (major == 5 ? 2 : 1)
            for _ in 0..<items {
                offset += try length(bytes, at: offset, depth: depth + 1)
            }
            return offset - start
        default:
            throw .malformed("CBOR tag (major type 6)")
        }
    }
}

/// A COSE_Key (RFC 9053, RFC 9964 for ML-DSA) as CTAP carries credential and key-agreement public keys.
package struct COSEPublicKey: Sendable, Equatable {
    package var algorithm: Int
    /// The DER SubjectPublicKeyInfo of the key, for OpenSSL (empty for ML-DSA, which this OpenSSL cannot read).
    package var spki: [UInt8]
    /// EC2: x and y; OKP (Ed25519): the 32-byte key in x; RSA: n in x and e in y; AKP (ML-DSA): the key in x.
    package var x: [UInt8]
    package var y: [UInt8]?
    /// The COSE key type (1 OKP, 2 EC2, 3 RSA, 7 AKP) and, for EC2, the curve (1 P-256, 2 P-384, 3 P-521,
    /// 8 secp256k1).
    package var keyType: Int
    package var curve: Int?

    package static let es256 = -7
    package static let edDSA = -8
    package static let ecdhEsHkdf256 = -25

    /// The curves each EC2 algorithm is defined on (WebAuthn §5.8.5, RFC 9864's fully specified ESP algorithms,
    /// RFC 8812's ES256K, and CTAP's key agreement): any other pairing, or another algorithm, is not a key.
    static let ec2Curves: [Int: Set<Int>] = [
        -7: [1], -9: [1], -35: [2], -51: [2], -36: [3], -52: [3], -47: [8], -25: [1],
    ]

    static let p256Prefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48,
        0xCE,
        0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00, 0x04,
    ]
    static let p384Prefix: [UInt8] = [
        0x30, 0x76, 0x30, 0x10, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x05, 0x2B, 0x81, 0x04,
        0x00, 0x22, 0x03, 0x62, 0x00, 0x04,
    ]
    static let p521Prefix: [UInt8] = [
        0x30, 0x81, 0x9B, 0x30, 0x10, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x05, 0x2B, 0x81,
        0x04, 0x00, 0x23, 0x03, 0x81, 0x86, 0x00, 0x04,
    ]
    static let secp256k1Prefix: [UInt8] = [
        0x30, 0x56, 0x30, 0x10, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x05, 0x2B, 0x81, 0x04,
        0x00, 0x0A, 0x03, 0x42, 0x00, 0x04,
    ]
    static let ed25519Prefix: [UInt8] = [0x30, 0x2A, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x03, 0x21, 0x00]
    /// AlgorithmIdentifier of rsaEncryption with its NULL parameters.
    static let rsaAlgorithm: [UInt8] = [
        0x30, 0x0D, 0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00,
    ]

    package init(_ value: CBORValue) throws(ClientError) {
        guard let map = value.mapValue else { throw .malformed("a COSE key that is not a map") }
        func field(_ label: Int) -> CBORValue? { map[CBORValue(label)] }
        guard let kty = field(1)?.intValue, let alg = field(3)?.intValue else {
            throw .malformed("a COSE key without kty (1) or alg (3)")
        }
        algorithm = alg
        keyType = kty
        switch kty {
        case 2:
            let sizes = [1: 32, 2: 48, 3: 66, 8: 32]
            guard let crv = field(-1)?.intValue, let size = sizes[crv], let x = field(-2)?.bytesValue,
                let y = field(-3)?.bytesValue, x.count == size, y.count == size
            else {
                throw .malformed(
                    "an EC2 COSE key that is not P-256, P-384, P-521 or secp256k1 with x and y of its size"
                )
            }
            guard let curves = Self.ec2Curves[alg], curves.contains(crv) else {
                throw .malformed(
                    "an EC2 COSE key whose algorithm \(alg) does not go with its curve \(crv) (ES256 -7 and ESP256 -9: "
                        + "P-256 (1); ES384 -35 and ESP384 -51: P-384 (2); ES512 -36 and ESP512 -52: P-521 (3); "
                        + "ES256K -47: secp256k1 (8); ECDH-ES+HKDF-256 -25: P-256)"
                )
            }
            self.x = x
            self.y = y
            curve = crv
            spki = [1: Self.p256Prefix, 2: Self.p384Prefix, 3: Self.p521Prefix, 8: Self.secp256k1Prefix][crv]! + x + y
        case 1:
            guard field(-1)?.intValue == 6, let x = field(-2)?.bytesValue, x.count == 32 else {
                throw .malformed("an OKP COSE key that is not Ed25519 with a 32-byte x")
            }
            self.x = x
            y = nil
            spki = Self.ed25519Prefix + x
        case 3:
            guard let n = field(-1)?.bytesValue, let e = field(-2)?.bytesValue, !n.isEmpty, !e.isEmpty else {
                throw .malformed("an RSA COSE key without n (-1) and e (-2)")
            }
            // 16,384 bits is more than any key uses, and keeps the DER lengths to two bytes.
            guard n.count <= 2048, e.count <= 2048 else {
                throw .malformed("an RSA COSE key whose n or e is over 2,048 bytes")
            }
            x = n
            y = e
            let publicKey = DER.sequence(DER.unsignedInteger(n) + DER.unsignedInteger(e))
            spki = DER.sequence(Self.rsaAlgorithm + DER.tlv(0x03, [0x00] + publicKey))
        case 7:
            let sizes = [-48: 1312, -49: 1952, -50: 2592]
            guard let size = sizes[alg], let pub = field(-1)?.bytesValue, pub.count == size else {
                throw .malformed("an AKP COSE key that is not ML-DSA-44/65/87 with a public key of its size")
            }
            x = pub
            y = nil
            spki = []
        default:
            throw .malformed("a COSE key of type \(kty)")
        }
    }

    /// The P-256 public key of an uncompressed point (65 bytes starting 0x04), as U2F gives it.
    package init(uncompressedP256 point: [UInt8]) throws(ClientError) {
        guard point.count == 65, point[0] == 0x04 else {
            throw .malformed("a U2F public key that is not 65 bytes from 0x04")
        }
        algorithm = Self.es256
        keyType = 2
        curve = 1
        x = Array(point[1..<33])
        y = Array(point[33..<65])
        spki = Self.p256Prefix + x + y!
    }

    /// This key as a COSE_Key map with the given algorithm (for the platform's key-agreement key).
    package static func p256(x: [UInt8], y: [UInt8], algorithm: Int) -> CBORValue {
        .map([1: 2, 3: CBORValue(algorithm), -1: 1, -2: .byteString(x), -3: .byteString(y)])
    }
}

/// The few DER encodings the client builds (an RSA SubjectPublicKeyInfo).
enum DER {
    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        let n = content.count
        let length: [UInt8] =
            n < 0x80 ? [UInt8(n)] : n < 0x100 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
        return [tag] + length + content
    }

    static func sequence(_ content: [UInt8]) -> [UInt8] { tlv(0x30, content) }

    /// A non-negative INTEGER of big-endian bytes: leading zeros dropped, one added when the top bit is set.
    static func unsignedInteger(_ bytes: [UInt8]) -> [UInt8] {
        var value = Array(bytes.drop { $0 == 0 })
        if value.isEmpty || value[0] & 0x80 != 0 { value.insert(0, at: 0) }
        return tlv(0x02, value)
    }
}
