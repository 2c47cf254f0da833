import Attestation
import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Enterprise attestation (CTAP 2.1 §6.1.2 step 9, §6.11.1): the ep option, enableEnterpriseAttestation, and
/// makeCredential's enterpriseAttestation 1 (vendor-facilitated, listed RPs) and 2 (platform-managed).
@Suite struct EnterpriseAttestationTests {
    static func configuration() -> AuthenticatorConfiguration {
        var configuration = Harness.configuration
        configuration.enterpriseAttestationRPIDs = ["corp.example"]
        return configuration
    }

    /// A key with a provisioned batch attestation and its enterprise certificate (fidosim attestation provision).
    static func provisioned() throws -> (harness: Harness, batch: BatchAttestation) {
        var harness = try Harness(configuration: configuration())
        let batch = try BatchAttestation.provision(
            aaguid: Harness.aaguid,
            notBefore: Date(timeIntervalSince1970: 1_735_689_600)
        )
        try harness.authenticator.installBatchAttestation(
            privateKeyPKCS8: batch.privateKeyPKCS8(),
            certificate: batch.certificate,
            rootCertificate: batch.rootCertificate,
            enterprise: (try batch.enterprisePrivateKeyPKCS8(), batch.enterpriseCertificate)
        )
        return (harness, batch)
    }

    func enable(_ harness: inout Harness) {
        #expect(status(of: harness.cbor(.config, [1: 1])) == .ok)
    }

    @Test func aKeyWithoutAnAttestationCertificateOffersNone() throws {
        var harness = try Harness(configuration: Self.configuration())
        #expect(try responseMap(harness.cbor(.getInfo))[4]?["ep"] == nil)
        #expect(status(of: harness.cbor(.config, [1: 1])) == .invalidParameter)
        let request = Request.makeCredential(rpId: "corp.example").setting(10, 1)
        #expect(status(of: harness.cbor(.makeCredential, request)) == .invalidParameter)
        // A batch attestation without the enterprise certificate is not enough either.
        let batch = try BatchAttestation.provision(
            aaguid: Harness.aaguid,
            notBefore: Date(timeIntervalSince1970: 1_735_689_600)
        )
        try harness.authenticator.installBatchAttestation(
            privateKeyPKCS8: batch.privateKeyPKCS8(),
            certificate: batch.certificate,
            rootCertificate: batch.rootCertificate
        )
        #expect(try responseMap(harness.cbor(.getInfo))[4]?["ep"] == nil)
    }

    @Test func itMustBeEnabledFirst() throws {
        var (harness, _) = try Self.provisioned()
        #expect(try responseMap(harness.cbor(.getInfo))[4]?["ep"] == false)
        let request = Request.makeCredential(rpId: "corp.example").setting(10, 1)
        #expect(status(of: harness.cbor(.makeCredential, request)) == .invalidParameter)
        enable(&harness)
        #expect(try responseMap(harness.cbor(.getInfo))[4]?["ep"] == true)
        #expect(status(of: harness.cbor(.makeCredential, request.setting(10, 3))) == .invalidOption)
        // Reset turns it off again.
        #expect(status(of: harness.approve(harness.cbor(.reset))) == .ok)
        #expect(try responseMap(harness.cbor(.getInfo))[4]?["ep"] == false)
    }

    @Test(arguments: [(1, "corp.example", true), (1, "example.com", false), (2, "example.com", true)])
    func attestationByMode(mode: Int, rpId: String, enterprise: Bool) throws {
        var (harness, batch) = try Self.provisioned()
        enable(&harness)
        let clientDataHash = Request.clientDataHash
        let registration = try harness.register(Request.makeCredential(rpId: rpId).setting(10, CBORValue(mode)))
        let statement = try #require(registration.response[3])
        let certificateBytes = try #require(statement["x5c"]?.arrayValue?.first?.bytesValue)
        guard enterprise else {
            // The usual batch attestation.
            #expect(registration.response[4] == nil && certificateBytes == batch.certificate)
            return
        }
        #expect(registration.response[4] == true)  // epAtt
        #expect(registration.response[1] == "packed" && statement["alg"] == -7)
        #expect(certificateBytes == batch.enterpriseCertificate && certificateBytes != batch.certificate)
        let certificate = try ParsedCertificate(certificateBytes)
        let signature = try #require(statement["sig"]?.bytesValue)
        #expect(
            verifiesES256(
                signature,
                over: registration.authData.bytes + clientDataHash,
                with: certificate.subjectPublicKey
            )
        )
        // Issued by the batch root (a chain a relying party can verify), and the attestation certificate rules of
        // WebAuthn §8.2.1: OU, CA false, the AAGUID.
        let root = try ParsedCertificate(batch.rootCertificate)
        #expect(verifiesES256(certificate.signature, over: certificate.tbs.encoded, with: root.subjectPublicKey))
        let text = String(decoding: certificateBytes, as: UTF8.self)
        #expect(text.contains("Authenticator Attestation") && text.contains("enterprise attestation"))
        let aaguidExtension: [UInt8] = [0x04, 0x12, 0x04, 0x10] + Harness.aaguid
        #expect(certificateBytes.indices.contains { Array(certificateBytes[$0...].prefix(20)) == aaguidExtension })
        // The same key for every enterprise attestation of this device.
        let second = try harness.register(
            Request.makeCredential(rpId: rpId, user: Request.user(id: [2])).setting(10, CBORValue(mode))
        )
        #expect(second.response[3]?["x5c"]?.arrayValue?.first == .byteString(certificateBytes))
    }

    @Test func noneStillWins() throws {
        var (harness, _) = try Self.provisioned()
        enable(&harness)
        let request = Request.makeCredential().setting(10, 2).setting(11, ["none"])
        let registration = try harness.register(request)
        #expect(registration.response[1] == "none" && registration.response[4] == nil)
    }
}
