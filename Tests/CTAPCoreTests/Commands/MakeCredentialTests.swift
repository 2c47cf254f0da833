import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing

/// authenticatorMakeCredential (0x01) that succeeds: attestation, authenticator data, credential ids.
@Suite struct MakeCredentialTests {
    @Test func asksForPresenceWithTheRelyingPartyAndUser() throws {
        var harness = try Harness()
        let outcome = harness.cbor(.makeCredential, Request.makeCredential())
        #expect(
            outcome
                == .needsUserPresence(
                    PresencePrompt(command: "makeCredential", rpId: "example.com", userName: "alice")
                )
        )
        #expect(harness.signCounter == 0)
    }

    @Test func aKeyWithoutABatchOfItsOwnAttestsWithTheSharedBatch() throws {
        var configuration = AuthenticatorConfiguration()
        configuration.defaultAttestation = SharedBatchAttestation.key  // what serve gives every key by default
        var harness = try Harness(configuration: configuration)
        let registration = try harness.register()
        let response = registration.response
        #expect(response[1] == "packed")
        #expect(response[3]?["alg"] == -7)
        #expect(response[3]?["x5c"] == [.byteString(SharedBatchAttestation.key.certificate)])
        let signature = try #require(response[3]?["sig"]?.bytesValue)
        let batchKey = try P256.Signing.PrivateKey(rawRepresentation: SharedBatchAttestation.key.privateKey).publicKey
        #expect(verifiesES256(signature, over: registration.authData.bytes + Request.clientDataHash, with: batchKey))
        #expect(
            !verifiesES256(
                signature,
                over: registration.authData.bytes + Request.clientDataHash,
                with: registration.publicKey
            )
        )
    }

    @Test func packedSelfAttestationVerifiesWithTheCredentialKey() throws {
        var harness = try Harness()  // no batch: self attestation (a profile's "attestation": "self")
        let registration = try harness.register()
        let response = registration.response
        #expect(response.mapValue?.count == 3)
        #expect(response[1] == "packed")
        let statement = try #require(response[3]?.mapValue)
        #expect(statement.count == 2)  // alg and sig only: self attestation has no x5c
        #expect(response[3]?["alg"] == -7)
        let signature = try #require(response[3]?["sig"]?.bytesValue)
        let signed = registration.authData.bytes + Request.clientDataHash
        #expect(verifiesES256(signature, over: signed, with: registration.publicKey))
        // The signature covers the clientDataHash and the authData.
        #expect(
            !verifiesES256(
                signature,
                over: registration.authData.bytes + [UInt8](repeating: 0, count: 32),
                with: registration.publicKey
            )
        )
        var tampered = signed
        tampered[32] ^= 0x04
        #expect(!verifiesES256(signature, over: tampered, with: registration.publicKey))
    }

    @Test func authenticatorDataHasTheRelyingPartyFlagsCounterAndCredential() throws {
        var harness = try Harness()
        let registration = try harness.register()
        let authData = registration.authData
        #expect(authData.rpIdHash == sha256("example.com"))
        #expect(authData.flags == ParsedAuthData.userPresent | ParsedAuthData.attestedCredentialData)
        #expect(authData.counter == 1)
        #expect(registration.credential.aaguid == Harness.aaguid)
        #expect(registration.credentialId.count == 63)
        #expect(registration.credential.coseKey[3] == -7)
    }

    @Test func aaguidFollowsTheConfiguration() throws {
        var harness = try Harness(configuration: AuthenticatorConfiguration())
        #expect(try harness.register().credential.aaguid == AuthenticatorConfiguration.fidosimAAGUID)
    }

    @Test func counterStartsAtOneAndIncreases() throws {
        var harness = try Harness()
        var counters: [UInt32] = []
        for index in 0..<4 {
            let user = Request.user(id: [UInt8(index)])
            counters.append(try harness.register(Request.makeCredential(user: user)).authData.counter)
        }
        #expect(counters == [1, 2, 3, 4])
        #expect(harness.signCounter == 4)
    }

    @Test func everyCredentialHasItsOwnIdAndKey() throws {
        var harness = try Harness()
        let first = try harness.register()
        let second = try harness.register()
        #expect(first.credentialId != second.credentialId)
        #expect(first.publicKey.rawRepresentation != second.publicKey.rawRepresentation)
    }

    @Test func sameSeedAndSecretGiveTheSameCredential() throws {
        var a = try Harness()
        var b = try Harness()
        let first = try a.register()
        let second = try b.register()
        #expect(first.credentialId == second.credentialId)
        #expect(first.publicKey.rawRepresentation == second.publicKey.rawRepresentation)
    }

    @Test func nonDiscoverableCredentialIsNotStored() throws {
        var harness = try Harness()
        _ = try harness.register(Request.makeCredential(rk: false))
        _ = try harness.register(Request.makeCredential())
        #expect(harness.authenticator.storage.residentCredentials.isEmpty)
    }

    @Test(
        arguments: [
            (["none"], "none"),
            (["packed", "none"], "packed"),
            (["none", "packed"], "none"),
            (["tpm", "none"], "none"),
            (["tpm"], "packed"),
            ([], "packed"),
        ] as [([String], String)]
    )
    func attestationFormatsPreference(formats: [String], expected: String) throws {
        var harness = try Harness()
        let parameters = Request.makeCredential().setting(11, .array(formats.map { .textString($0) }))
        let registration = try harness.register(parameters)
        #expect(registration.response[1] == .textString(expected))
        if expected == "none" {
            #expect(registration.response[3] == .map([:]))
        } else {
            #expect(registration.response[3]?["alg"] == -7)
            let signature = try #require(registration.response[3]?["sig"]?.bytesValue)
            #expect(
                verifiesES256(
                    signature,
                    over: registration.authData.bytes + Request.clientDataHash,
                    with: registration.publicKey
                )
            )
        }
        // The credential is attested in authData either way.
        #expect(registration.authData.flags == 0x41)
        #expect(registration.credentialId.count == 63)
    }
}
