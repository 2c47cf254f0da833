import Crypto

/// A minimal DER writer for the one certificate the core needs: a self-signed P-256 certificate for U2F
/// registration when no batch attestation certificate has been provisioned.
enum DER {
    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag] + length(content.count) + content
    }

    static func length(_ n: Int) -> [UInt8] {
        if n < 0x80 { return [UInt8(n)] }
        if n <= 0xFF { return [0x81, UInt8(n)] }
        return [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
    }

    static func sequence(_ parts: [UInt8]...) -> [UInt8] { tlv(0x30, parts.flatMap { $0 }) }
    static func set(_ parts: [UInt8]...) -> [UInt8] { tlv(0x31, parts.flatMap { $0 }) }

    /// A positive INTEGER from big-endian magnitude bytes.
    static func integer(_ magnitude: [UInt8]) -> [UInt8] {
        var bytes = Array(magnitude.drop { $0 == 0 })
        if bytes.isEmpty { bytes = [0] }
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return tlv(0x02, bytes)
    }

    static func oid(_ encoded: [UInt8]) -> [UInt8] { tlv(0x06, encoded) }
    static func utf8String(_ s: String) -> [UInt8] { tlv(0x0C, Array(s.utf8)) }
    static func bitString(_ bytes: [UInt8]) -> [UInt8] { tlv(0x03, [0x00] + bytes) }

    static let ecdsaWithSHA256: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02]
    static let commonName: [UInt8] = [0x55, 0x04, 0x03]
}

enum SelfSignedCertificate {
    /// Builds a self-signed X.509 v3 certificate for `key` with the given common name and serial.
    static func make(key: P256.Signing.PrivateKey, commonName: String, serial: [UInt8]) throws(CTAPError) -> [UInt8] {
        let algorithm = DER.sequence(DER.oid(DER.ecdsaWithSHA256))
        let name = DER.sequence(DER.set(DER.sequence(DER.oid(DER.commonName), DER.utf8String(commonName))))
        let validity = DER.sequence(
            DER.tlv(0x17, Array("250101000000Z".utf8)),  // UTCTime
            DER.tlv(0x18, Array("20991231235959Z".utf8))  // GeneralizedTime
        )
        let tbs = DER.sequence(
            DER.tlv(0xA0, DER.integer([2])),  // version v3
            DER.integer(serial),
            algorithm,
            name,
            validity,
            name,
            Array(key.publicKey.derRepresentation)
        )
        do {
            let signature = try key.signature(for: tbs).derRepresentation
            return DER.sequence(tbs, algorithm, DER.bitString(Array(signature)))
        } catch {
            throw CTAPError(.other, "signing the attestation certificate failed: \(error)")
        }
    }
}
