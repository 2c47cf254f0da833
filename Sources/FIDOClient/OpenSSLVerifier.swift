import COpenSSL
import CTAPCBOR

/// Signature and certificate checks through OpenSSL's libcrypto.
package enum OpenSSLVerifier {
    /// Whether `signature` is a valid signature of `message` under the key in `spki` (ECDSA with SHA-256 by default,
    /// Ed25519, RSA). Throws when OpenSSL cannot read the key.
    /// Another hash than SHA-256 (384 or 512) with `digestBits`, RSA-PSS with `pss`.
    package static func verify(
        spki: [UInt8],
        message: [UInt8],
        signature: [UInt8],
        digestBits: Int = 256,
        pss: Bool = false
    ) throws(ClientError) -> Bool {
        let result = spki.withUnsafeBufferPointer { key in
            message.withUnsafeBufferPointer { msg in
                signature.withUnsafeBufferPointer { sig in
                    fidosim_verify_with(
                        key.baseAddress,
                        key.count,
                        msg.baseAddress,
                        msg.count,
                        sig.baseAddress,
                        sig.count,
                        Int32(digestBits),
                        pss ? 1 : 0
                    )
                }
            }
        }
        guard result >= 0 else { throw .malformed("OpenSSL cannot read the public key \(Hex.string(spki))") }
        return result == 1
    }

    /// The SubjectPublicKeyInfo OpenSSL itself writes for the key it reads from `spki` (which must be the whole
    /// input), or nil when it cannot read one: how a key's encoding is checked against OpenSSL's.
    package static func openSSLEncoding(of spki: [UInt8]) -> [UInt8]? {
        let key: OpaquePointer? = spki.withUnsafeBufferPointer { buffer in
            var pointer = buffer.baseAddress
            let key = d2i_PUBKEY(nil, &pointer, buffer.count)
            guard let key, let pointer, let base = buffer.baseAddress, pointer == base + buffer.count else {
                EVP_PKEY_free(key)
                return nil
            }
            return key
        }
        guard let key else {
            ERR_clear_error()
            return nil
        }
        defer { EVP_PKEY_free(key) }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(key, &out)
        guard length > 0, let out else { return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// SHA-256 through OpenSSL (the hash the client compares rpIdHash and U2F parameters with).
    package static func sha256(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        data.withUnsafeBufferPointer { input in
            _ = EVP_Digest(input.baseAddress, input.count, &out, &length, EVP_sha256(), nil)
        }
        return out
    }
}

extension COSEPublicKey {
    /// Whether `signature` over `message` verifies with this key under its algorithm: OpenSSL for ECDSA (the hash
    /// by curve), EdDSA and RSA (PKCS#1 v1.5 for RS256, PSS for PS256); ML-DSA is checked only for the signature's
    /// size, as the system's OpenSSL (3.0) has no ML-DSA.
    package func verify(message: [UInt8], signature: [UInt8]) throws(ClientError) -> Bool {
        switch keyType {
        case 7:
            return signature.count == [-48: 2420, -49: 3309, -50: 4627][algorithm]
        case 3:
            return try OpenSSLVerifier.verify(
                spki: spki,
                message: message,
                signature: signature,
                digestBits: 256,
                pss: algorithm == -37
            )
        default:
            let bits = [2: 384, 3: 512][curve ?? 1] ?? 256
            return try OpenSSLVerifier.verify(spki: spki, message: message, signature: signature, digestBits: bits)
        }
    }
}

/// An X.509 certificate read by OpenSSL, with the fields packed attestation rules are about (WebAuthn §8.2.1).
package final class X509Certificate {
    let certificate: OpaquePointer
    package let der: [UInt8]

    package init(der: [UInt8]) throws(ClientError) {
        self.der = der
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var pointer = buffer.baseAddress
            return d2i_X509(nil, &pointer, buffer.count)
        }
        guard let parsed else {
            ERR_clear_error()
            throw .malformed("OpenSSL cannot read the certificate")
        }
        certificate = parsed
    }

    deinit { X509_free(certificate) }

    /// X.509 version: 3 for a v3 certificate.
    package var version: Int { Int(X509_get_version(certificate)) + 1 }

    /// A subject attribute by its NID (NID_countryName, NID_organizationName, ...), or nil.
    package func subject(_ nid: Int32) -> String? {
        guard let name = X509_get_subject_name(certificate) else { return nil }
        let index = X509_NAME_get_index_by_NID(name, nid, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry),
            let bytes = ASN1_STRING_get0_data(data)
        else { return nil }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(ASN1_STRING_length(data))), as: UTF8.self)
    }

    package var country: String? { subject(NID_countryName) }
    package var organization: String? { subject(NID_organizationName) }
    package var organizationalUnit: String? { subject(NID_organizationalUnitName) }
    package var commonName: String? { subject(NID_commonName) }

    /// Whether basic constraints make it a CA.
    package var isCA: Bool { X509_check_ca(certificate) != 0 }

    /// The value of the id-fido-gen-ce-aaguid extension (1.3.6.1.4.1.45724.1.1.4): the 16 bytes inside its OCTET
    /// STRING, and whether it is marked critical. Nil when the certificate lacks it.
    package var aaguidExtension: (aaguid: [UInt8], critical: Bool)? {
        guard let oid = OBJ_txt2obj("1.3.6.1.4.1.45724.1.1.4", 1) else { return nil }
        defer { ASN1_OBJECT_free(oid) }
        let index = X509_get_ext_by_OBJ(certificate, oid, -1)
        guard index >= 0, let ext = X509_get_ext(certificate, index), let data = X509_EXTENSION_get_data(ext),
            let bytes = ASN1_STRING_get0_data(data)
        else { return nil }
        let value = Array(UnsafeBufferPointer(start: bytes, count: Int(ASN1_STRING_length(data))))
        // The extension's value is itself a DER OCTET STRING of 16 bytes.
        guard value.count == 18, value[0] == 0x04, value[1] == 0x10 else {
            return (value, X509_EXTENSION_get_critical(ext) != 0)
        }
        return (Array(value[2...]), X509_EXTENSION_get_critical(ext) != 0)
    }

    /// The certificate's public key as DER SubjectPublicKeyInfo.
    package func publicKeySPKI() throws(ClientError) -> [UInt8] {
        guard let key = X509_get_pubkey(certificate) else { throw .malformed("the certificate's public key") }
        defer { EVP_PKEY_free(key) }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(key, &out)
        guard length > 0, let out else { throw .malformed("the certificate's public key") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// Whether `issuer`'s key signed this certificate and its subject is this one's issuer name.
    package func isSigned(by issuer: X509Certificate) -> Bool {
        guard let key = X509_get_pubkey(issuer.certificate) else { return false }
        defer { EVP_PKEY_free(key) }
        let signed = X509_verify(certificate, key) == 1
        ERR_clear_error()
        return signed
            && X509_NAME_cmp(X509_get_issuer_name(certificate), X509_get_subject_name(issuer.certificate)) == 0
    }
}
