import COpenSSL
package import CTAPCBOR

/// What a verified attestation statement says about the credential's key.
package enum AttestationType: String, Sendable {
    /// `none`: no statement.
    case none
    /// Packed without x5c: signed by the credential's own key.
    case selfAttestation = "self"
    /// Packed with x5c, or fido-u2f: signed by an attestation certificate.
    case basic
}

/// Checks an attestation object's statement (WebAuthn §8.2 packed, §8.6 fido-u2f, §8.7 none) with OpenSSL.
package enum AttestationVerifier {
    /// The attestation type when the statement is valid; throws a description of the first rule it breaks.
    package static func verify(
        format: String,
        authData: ParsedAuthenticatorData,
        statement: [CBORValue: CBORValue],
        clientDataHash: [UInt8]
    ) throws(ClientError) -> AttestationType {
        guard let credentialKey = authData.credentialPublicKey else {
            throw .malformed("the authenticator data has no attested credential data")
        }
        let key = try COSEPublicKey(credentialKey)
        let signed = authData.bytes + clientDataHash
        switch format {
        case "none":
            guard statement.isEmpty else { throw .malformed("a `none` statement that is not empty") }
            return .none
        case "packed":
            guard let alg = statement["alg"]?.intValue, let sig = statement["sig"]?.bytesValue else {
                throw .malformed("a packed statement without alg and sig")
            }
            if let chain = statement["x5c"]?.arrayValue {
                let certificates = try chain.map { (item: CBORValue) throws(ClientError) -> X509Certificate in
                    guard let der = item.bytesValue else { throw .malformed("an x5c entry that is not a byte string") }
                    return try X509Certificate(der: der)
                }
                guard let leaf = certificates.first else { throw .malformed("an empty x5c") }
                try checkPackedCertificate(leaf, aaguid: authData.aaguid ?? [])
                for (child, parent) in zip(certificates, certificates.dropFirst()) where !child.isSigned(by: parent) {
                    throw .malformed("an x5c certificate not signed by the next one")
                }
                guard try OpenSSLVerifier.verify(spki: leaf.publicKeySPKI(), message: signed, signature: sig) else {
                    throw .malformed("the packed signature does not verify with the x5c leaf's key")
                }
                return .basic
            }
            guard alg == key.algorithm else {
                throw .malformed("self attestation with alg \(alg) for a credential key of alg \(key.algorithm)")
            }
            guard try key.verify(message: signed, signature: sig) else {
                throw .malformed("the self-attestation signature does not verify with the credential key")
            }
            return .selfAttestation
        case "fido-u2f":
            guard let sig = statement["sig"]?.bytesValue, let chain = statement["x5c"]?.arrayValue, chain.count == 1,
                let der = chain[0].bytesValue
            else { throw .malformed("a fido-u2f statement without sig and one x5c certificate") }
            guard key.curve == 1, let y = key.y else { throw .malformed("a fido-u2f credential that is not P-256") }
            let leaf = try X509Certificate(der: der)
            let message =
                [0x00] + authData.rpIdHash + clientDataHash + (authData.credentialId ?? []) + [0x04] + key.x + y
            guard try OpenSSLVerifier.verify(spki: leaf.publicKeySPKI(), message: message, signature: sig) else {
                throw .malformed("the fido-u2f signature does not verify with the certificate's key")
            }
            return .basic
        default:
            throw .malformed("attestation format '\(format)' is not one this client verifies")
        }
    }

    /// The rules of WebAuthn §8.2.1 for a packed attestation certificate.
    package static func checkPackedCertificate(_ leaf: X509Certificate, aaguid: [UInt8]) throws(ClientError) {
        guard leaf.version == 3 else {
            throw .malformed("the attestation certificate is version \(leaf.version), not 3")
        }
        guard let country = leaf.country, country.count == 2 else {
            throw .malformed("subject C is not a two-letter country")
        }
        guard leaf.organization?.isEmpty == false else { throw .malformed("subject O is missing") }
        guard leaf.organizationalUnit == "Authenticator Attestation" else {
            throw .malformed("subject OU is '\(leaf.organizationalUnit ?? "")', not 'Authenticator Attestation'")
        }
        guard leaf.commonName?.isEmpty == false else { throw .malformed("subject CN is missing") }
        guard !leaf.isCA else { throw .malformed("the attestation certificate is a CA (basic constraints)") }
        if let ext = leaf.aaguidExtension {
            guard !ext.critical else { throw .malformed("the AAGUID extension is critical") }
            guard ext.aaguid == aaguid else {
                throw .malformed(
                    "the AAGUID extension holds \(Hex.string(ext.aaguid)), the authenticator data \(Hex.string(aaguid))"
                )
            }
        }
    }
}
