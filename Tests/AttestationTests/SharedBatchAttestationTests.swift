import CTAPCore
import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

/// fidosim's shared batch (CTAPCore's SharedBatchAttestation), read with swift-certificates.
@Suite struct SharedBatchAttestationTests {
    let batch = SharedBatchAttestation.key

    @Test func theLeafMeetsThePackedAttestationRequirementsAndFitsEveryAAGUID() throws {
        let (leaf, root) = try expectPackedAttestationLeaf(
            batch.certificate,
            root: batch.rootCertificate,
            commonName: "fidosim shared batch attestation"
        )
        // No AAGUID extension: one certificate for every profile's AAGUID (WebAuthn §8.2.1 checks it only if present).
        #expect(leaf.extensions[oid: [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4]] == nil)
        #expect(root.publicKey.isValidSignature(leaf.signature, for: leaf))
        #expect(root.publicKey.isValidSignature(root.signature, for: root))
        #expect(try root.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: 0))
        // The key in the source signs for the certificate's public key.
        let key = try P256.Signing.PrivateKey(rawRepresentation: batch.privateKey)
        #expect(Certificate.PublicKey(key.publicKey) == leaf.publicKey)
        #expect(leaf.notValidAfter > Date(timeIntervalSince1970: 4_000_000_000))
    }

    @Test func theRootFileForRelyingPartiesIsTheRootInTheSource() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../tools/attestation/shared-root.pem"
        )
        let pem = try String(contentsOf: path, encoding: .utf8)
        let fromFile = try Certificate(pemEncoded: pem)
        #expect(fromFile == (try Certificate(derEncoded: batch.rootCertificate)))
    }
}
