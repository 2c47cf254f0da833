import Crypto

extension Authenticator {
    /// Installs a batch attestation identity: from now on makeCredential answers packed attestation with the
    /// certificate in x5c, and U2F register uses it. With `enterprise` (a key and its certificate from the same
    /// root), the key offers enterprise attestation (getInfo ep) signed by that key.
    package mutating func installBatchAttestation(
        privateKeyPKCS8: [UInt8],
        certificate: [UInt8],
        rootCertificate: [UInt8],
        enterprise: (privateKey: [UInt8], certificate: [UInt8])? = nil
    ) throws(CTAPError) {
        func p256(_ pkcs8: [UInt8]) throws(CTAPError) -> [UInt8] {
            let (key, algorithm) = try PrivateKeyEncoding.decode(pkcs8: pkcs8)
            guard algorithm == .es256 else { throw CTAPError(.invalidParameter, "an attestation key must be P-256") }
            return key
        }
        let key = try p256(privateKeyPKCS8)
        let certificates = [certificate, rootCertificate] + (enterprise.map { [$0.certificate] } ?? [])
        guard certificates.allSatisfy({ !$0.isEmpty && $0.count <= 2048 }) else {
            throw CTAPError(.invalidParameter, "certificates are 1 to 2048 bytes of DER")
        }
        let enterpriseKey = try enterprise.map { (e) throws(CTAPError) in try p256(e.privateKey) }
        try storage.setBatchAttestation(
            BatchAttestationKey(privateKey: key, certificate: certificate, rootCertificate: rootCertificate)
        )
        if let enterprise, let enterpriseKey {
            try storage.setEnterpriseAttestationKey(privateKey: enterpriseKey, certificate: enterprise.certificate)
        }
    }

    /// Whether the key can give an enterprise attestation: it has a batch attestation and an enterprise key and
    /// certificate from the same provisioning (getInfo ep is present only then).
    var canAttestEnterprise: Bool {
        storage.batchAttestation != nil && storage.enterpriseAttestationKey != nil
    }
}
