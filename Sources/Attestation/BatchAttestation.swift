import Crypto
package import SwiftASN1
import X509

#if canImport(FoundationEssentials)
package import FoundationEssentials  // not Foundation: it would load ICU (about 7 MiB resident) into every fidosim process
#else
package import Foundation
#endif

/// A batch attestation identity: a root CA, and a leaf certificate and key that sign attestation statements.
///
/// The leaf meets WebAuthn §8.2.1 (packed attestation certificate requirements): version 3; subject C, O,
/// OU "Authenticator Attestation", CN; basic constraints CA false; the AAGUID in the non-critical extension
/// id-fido-gen-ce-aaguid (1.3.6.1.4.1.45724.1.1.4) as an OCTET STRING.
package struct BatchAttestation: Sendable {
    /// The leaf's private key: a raw P-256 scalar (32 bytes).
    package var privateKey: [UInt8]
    /// The leaf certificate, DER.
    package var certificate: [UInt8]
    /// The root certificate that signed the leaf, DER: what a relying party trusts.
    package var rootCertificate: [UInt8]
    /// The root's private key as PKCS#8 DER (kept by whoever provisions more keys of the batch).
    package var rootPrivateKey: [UInt8]
    /// This device's enterprise attestation key (raw P-256 scalar) and its certificate, issued by the same root
    /// with a serial number that identifies the device (CTAP 2.1 §7.1: an enterprise attestation may identify it).
    package var enterprisePrivateKey: [UInt8]
    package var enterpriseCertificate: [UInt8]

    /// id-fido-gen-ce-aaguid
    package static let aaguidExtensionOID: ASN1ObjectIdentifier = [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4]

    /// Why provisioning failed.
    package struct Failure: Error, CustomStringConvertible, Sendable {
        package var description: String
    }

    /// Makes a new root CA and a leaf for `aaguid`, valid from `notBefore` for `years` years.
    package static func provision(
        aaguid: [UInt8],
        organization: String = "fidosim",
        country: String = "US",
        commonName: String = "fidosim batch attestation",
        notBefore: Date,
        years: Int = 20
    ) throws(Failure) -> BatchAttestation {
        guard aaguid.count == 16 else { throw Failure(description: "an AAGUID is 16 bytes") }
        let rootKey = P256.Signing.PrivateKey()
        let leafKey = P256.Signing.PrivateKey()
        let enterpriseKey = P256.Signing.PrivateKey()
        let notAfter = notBefore.addingTimeInterval(Double(years) * 365.25 * 86400)
        do {
            let rootName = try DistinguishedName {
                CountryName(country)
                OrganizationName(organization)
                OrganizationalUnitName("Authenticator Attestation")
                CommonName("\(organization) attestation root")
            }
            let root = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: .init(rootKey.publicKey),
                notValidBefore: notBefore,
                notValidAfter: notAfter,
                issuer: rootName,
                subject: rootName,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    SubjectKeyIdentifier(hash: .init(rootKey.publicKey))
                },
                issuerPrivateKey: .init(rootKey)
            )
            func leafCertificate(_ key: P256.Signing.PrivateKey, _ subject: DistinguishedName) throws -> Certificate {
                try Self.leaf(
                    key: key,
                    subject: subject,
                    issuer: rootName,
                    rootKey: rootKey,
                    aaguid: aaguid,
                    notBefore: notBefore,
                    notAfter: notAfter
                )
            }
            let leaf = try leafCertificate(
                leafKey,
                DistinguishedName {
                    CountryName(country)
                    OrganizationName(organization)
                    OrganizationalUnitName("Authenticator Attestation")
                    CommonName(commonName)
                }
            )
            let enterprise = try leafCertificate(
                enterpriseKey,
                try enterpriseSubject(enterpriseKey, organization: organization, country: country)
            )
            return BatchAttestation(
                privateKey: Array(leafKey.rawRepresentation),
                certificate: try der(leaf),
                rootCertificate: try der(root),
                rootPrivateKey: Array(rootKey.derRepresentation),
                enterprisePrivateKey: Array(enterpriseKey.rawRepresentation),
                enterpriseCertificate: try der(enterprise)
            )
        } catch let error as Failure {
            throw error
        } catch {
            throw Failure(description: "cannot make the attestation certificates: \(error)")
        }
    }

    /// Another key of an existing batch: the batch's leaf key and certificate, shared by every key of the batch as
    /// on real keys (at least 100,000 units share one, so the certificate does not single out one user), and a new
    /// enterprise attestation key and certificate for this device, issued by the batch's root.
    package static func anotherKey(
        ofBatchWithRootPrivateKey rootDER: [UInt8],
        rootCertificate: [UInt8],
        privateKey: [UInt8],
        certificate: [UInt8],
        aaguid: [UInt8],
        organization: String,
        country: String,
        notBefore: Date,
        years: Int = 20
    ) throws(Failure) -> BatchAttestation {
        let rootKey: P256.Signing.PrivateKey
        let root: Certificate
        do {
            rootKey = try P256.Signing.PrivateKey(derRepresentation: rootDER)
            root = try Certificate(derEncoded: rootCertificate)
            _ = try P256.Signing.PrivateKey(rawRepresentation: privateKey)
            _ = try Certificate(derEncoded: certificate)
        } catch {
            throw Failure(description: "the batch does not hold a P-256 root key, root, leaf key and leaf: \(error)")
        }
        guard Certificate.PublicKey(rootKey.publicKey) == root.publicKey else {
            throw Failure(description: "the batch's root key does not belong to its root certificate")
        }
        guard aaguid.count == 16 else { throw Failure(description: "an AAGUID is 16 bytes") }
        let enterpriseKey = P256.Signing.PrivateKey()
        let notAfter = notBefore.addingTimeInterval(Double(years) * 365.25 * 86400)
        do {
            let enterprise = try leaf(
                key: enterpriseKey,
                subject: try enterpriseSubject(enterpriseKey, organization: organization, country: country),
                issuer: root.subject,
                rootKey: rootKey,
                aaguid: aaguid,
                notBefore: notBefore,
                notAfter: notAfter
            )
            return BatchAttestation(
                privateKey: privateKey,
                certificate: certificate,
                rootCertificate: rootCertificate,
                rootPrivateKey: rootDER,
                enterprisePrivateKey: Array(enterpriseKey.rawRepresentation),
                enterpriseCertificate: try der(enterprise)
            )
        } catch {
            throw Failure(description: "cannot issue the enterprise attestation certificate: \(error)")
        }
    }

    /// A certificate the root issues for an attestation key: WebAuthn §8.2.1's requirements, the AAGUID included.
    static func leaf(
        key: P256.Signing.PrivateKey,
        subject: DistinguishedName,
        issuer: DistinguishedName,
        rootKey: P256.Signing.PrivateKey,
        aaguid: [UInt8],
        notBefore: Date,
        notAfter: Date
    ) throws -> Certificate {
        var aaguidValue = DER.Serializer()
        try aaguidValue.serialize(ASN1OctetString(contentBytes: aaguid[...]))
        return try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: issuer,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                AuthorityKeyIdentifier(
                    keyIdentifier: SubjectKeyIdentifier(hash: .init(rootKey.publicKey)).keyIdentifier
                )
                Certificate.Extension(oid: aaguidExtensionOID, critical: false, value: aaguidValue.serializedBytes[...])
            },
            issuerPrivateKey: .init(rootKey)
        )
    }

    /// The enterprise certificate names the device: its serial number (16 hex digits from its key) in the CN.
    static func enterpriseSubject(
        _ key: P256.Signing.PrivateKey,
        organization: String,
        country: String
    ) throws
        -> DistinguishedName
    {
        let serial = Array(SHA256.hash(data: key.publicKey.rawRepresentation)).prefix(8)
            .map { String($0, radix: 16, uppercase: true) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
        return try DistinguishedName {
            CountryName(country)
            OrganizationName(organization)
            OrganizationalUnitName("Authenticator Attestation")
            CommonName("\(organization) enterprise attestation \(serial)")
        }
    }

    /// The leaf's private key as PKCS#8 DER.
    package func privateKeyPKCS8() throws(Failure) -> [UInt8] { try Self.pkcs8(privateKey) }

    /// The enterprise attestation key as PKCS#8 DER.
    package func enterprisePrivateKeyPKCS8() throws(Failure) -> [UInt8] { try Self.pkcs8(enterprisePrivateKey) }

    static func pkcs8(_ raw: [UInt8]) throws(Failure) -> [UInt8] {
        guard let key = try? P256.Signing.PrivateKey(rawRepresentation: raw) else {
            throw Failure(description: "the attestation key is not a P-256 key")
        }
        return Array(key.derRepresentation)
    }

    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    /// PEM text of a DER certificate.
    package static func pem(certificate der: [UInt8]) -> String {
        let base64 = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN CERTIFICATE-----\n\(base64)\n-----END CERTIFICATE-----\n"
    }
}
