import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@testable import Attestation

/// The leaf and root of a batch, with what packed attestation asks of the leaf (WebAuthn §8.2.1): version 3, issued
/// by the root, subject C, O, OU "Authenticator Attestation" and CN, not a CA.
func expectPackedAttestationLeaf(
    _ certificate: [UInt8],
    root rootCertificate: [UInt8],
    commonName: String
) throws -> (leaf: Certificate, root: Certificate) {
    let leaf = try Certificate(derEncoded: certificate)
    let root = try Certificate(derEncoded: rootCertificate)
    #expect(leaf.version == .v3)
    #expect(leaf.issuer == root.subject)
    let subject = leaf.subject.description
    #expect(subject.contains("C=US") && subject.contains("O=fidosim"))
    #expect(subject.contains("OU=Authenticator Attestation") && subject.contains("CN=\(commonName)"))
    #expect(try leaf.extensions.basicConstraints == .notCertificateAuthority)
    return (leaf, root)
}

@Suite struct BatchAttestationTests {
    let aaguid: [UInt8] = (0..<16).map { UInt8($0 * 11) }

    @Test func theLeafMeetsThePackedAttestationRequirements() throws {
        let batch = try BatchAttestation.provision(
            aaguid: aaguid,
            notBefore: Date(timeIntervalSince1970: 1_735_689_600)
        )
        let (leaf, root) = try expectPackedAttestationLeaf(
            batch.certificate,
            root: batch.rootCertificate,
            commonName: "fidosim batch attestation"
        )
        let aaguidExtension = try #require(leaf.extensions[oid: BatchAttestation.aaguidExtensionOID])
        #expect(!aaguidExtension.critical)
        #expect(Array(aaguidExtension.value) == [0x04, 0x10] + aaguid)
        #expect(root.publicKey.isValidSignature(leaf.signature, for: leaf))
        #expect(root.publicKey.isValidSignature(root.signature, for: root))
        // The key signs for the certificate's public key.
        let key = try P256.Signing.PrivateKey(rawRepresentation: batch.privateKey)
        #expect(Certificate.PublicKey(key.publicKey) == leaf.publicKey)
        #expect(try root.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: 0))
    }

    @Test func eachProvisioningIsANewBatch() throws {
        let a = try BatchAttestation.provision(aaguid: aaguid, notBefore: Date(timeIntervalSince1970: 0))
        let b = try BatchAttestation.provision(aaguid: aaguid, notBefore: Date(timeIntervalSince1970: 0))
        #expect(a.privateKey != b.privateKey)
        #expect(a.rootCertificate != b.rootCertificate)
        #expect(BatchAttestation.pem(certificate: a.rootCertificate).hasPrefix("-----BEGIN CERTIFICATE-----\n"))
    }

    @Test func aWrongAAGUIDLengthIsRefused() {
        #expect(throws: BatchAttestation.Failure.self) {
            try BatchAttestation.provision(aaguid: [1, 2, 3], notBefore: Date(timeIntervalSince1970: 0))
        }
    }
}
