import CSecp256k1

/// ECDSA on secp256k1 (COSE ES256K), which swift-crypto lacks, through the system libcrypto: the one place that
/// calls the C shim, so that the authenticator and its tests deal in bytes and Swift values only.
package enum Secp256k1ECDSA {
    /// The uncompressed public point (65 bytes: 0x04 | x | y) of a 32-byte scalar; nil when it is no key (0, or not
    /// below the group order).
    package static func publicPoint(scalar: [UInt8]) -> [UInt8]? {
        guard scalar.count == 32 else { return nil }
        var point = [UInt8](repeating: 0, count: 65)
        return fidosim_k1_public(scalar, &point) == 1 ? point : nil
    }

    /// A DER ECDSA signature over SHA-256(`message`); nil when the scalar is no key.
    package static func sign(scalar: [UInt8], message: [UInt8]) -> [UInt8]? {
        guard scalar.count == 32 else { return nil }
        var der = [UInt8](repeating: 0, count: 80)
        let length = fidosim_k1_sign(scalar, message, message.count, &der, UInt32(der.count))
        return length > 0 ? Array(der.prefix(Int(length))) : nil
    }

    /// Whether a DER signature over SHA-256(`message`) verifies with an uncompressed point.
    package static func verify(point: [UInt8], message: [UInt8], signature: [UInt8]) -> Bool {
        point.count == 65 && fidosim_k1_verify(point, message, message.count, signature, signature.count) == 1
    }

    /// The PKCS#8 DER of a scalar's key; nil when the scalar is no key.
    package static func pkcs8(scalar: [UInt8]) -> [UInt8]? {
        guard scalar.count == 32 else { return nil }
        var out = [UInt8](repeating: 0, count: 256)
        let length = fidosim_k1_pkcs8(scalar, &out, out.count)
        return length > 0 ? Array(out.prefix(Int(length))) : nil
    }

    /// The 32-byte scalar of a PKCS#8 secp256k1 key; nil when `der` is not one.
    package static func scalar(pkcs8 der: [UInt8]) -> [UInt8]? {
        var scalar = [UInt8](repeating: 0, count: 32)
        return fidosim_k1_from_pkcs8(der, der.count, &scalar) == 1 ? scalar : nil
    }
}
