import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import FlashStore
import Testing

/// EdDSA (COSE -8, Ed25519) credentials beside ES256, chosen by the order of pubKeyCredParams.
@Suite struct EdDSATests {
    func request(_ algorithms: [Int], rk: Bool = false) -> [CBORValue: CBORValue] {
        Request.makeCredential(rk: rk).setting(
            4,
            .array(algorithms.map { ["alg": CBORValue($0), "type": "public-key"] })
        )
    }

    /// The Ed25519 key of an OKP COSE_Key: exactly kty 1, alg -8, crv 6 and a 32-byte x.
    func edKey(_ cose: CBORValue) throws -> Curve25519.Signing.PublicKey {
        guard let map = cose.mapValue, map.count == 4, cose[1] == 1, cose[3] == -8, cose[-1] == 6,
            let x = cose[-2]?.bytesValue, x.count == 32
        else { throw HarnessFailure("not an EdDSA COSE key: \(cose)") }
        return try Curve25519.Signing.PublicKey(rawRepresentation: x)
    }

    @Test(arguments: [true, false])
    func anEdDSACredentialAttestsAndSigns(resident: Bool) throws {
        var harness = try Harness()
        let registration = try harness.register(request([-8], rk: resident))
        let key = try edKey(registration.credential.coseKey)
        let statement = try #require(registration.response[3])
        #expect(statement["alg"] == -8)
        let signature = try #require(statement["sig"]?.bytesValue)
        #expect(signature.count == 64)
        #expect(key.isValidSignature(signature, for: registration.authData.bytes + Request.clientDataHash))

        let allowList = resident ? nil : [registration.credentialId]
        let assertion = try harness.getAssertion(Request.getAssertion(allowList: allowList))
        #expect(assertion.credentialId == registration.credentialId)
        #expect(key.isValidSignature(assertion.signature, for: assertion.authData.bytes + Request.clientDataHash))
        #expect(
            !key.isValidSignature(assertion.signature, for: assertion.authData.bytes + [UInt8](repeating: 0, count: 32))
        )
    }

    @Test(arguments: [
        ([-7, -8], -7), ([-8, -7], -8), ([-1001, -8], -8), ([-1000, -7, -8], -7),
    ])
    func theFirstSupportedAlgorithmWins(offered: [Int], chosen: Int) throws {
        var harness = try Harness()
        let registration = try harness.register(request(offered))
        #expect(registration.credential.coseKey[3] == CBORValue(chosen))
        #expect(registration.response[3]?["alg"] == CBORValue(chosen))
    }

    @Test func noSupportedAlgorithmIsRefused() throws {
        var harness = try Harness()
        #expect(status(of: harness.cbor(.makeCredential, request([-1000, -65535, 7]))) == .unsupportedAlgorithm)
        let wrongType = Request.makeCredential().setting(4, [["alg": -8, "type": "private-key"]])
        #expect(status(of: harness.cbor(.makeCredential, wrongType)) == .unsupportedAlgorithm)
    }

    @Test func anEdDSAKeyHandleIsNotAU2FKey() throws {
        var harness = try Harness()
        let registration = try harness.register(request([-8]))
        let apdu = U2FRequest.authenticate(
            p1: 0x07,
            keyHandle: registration.credentialId,
            application: sha256(Request.rpId)
        )
        #expect(statusWord(of: harness.u2f(apdu)) == 0x6A80)
    }

    @Test func aDiscoverableEdDSACredentialSurvivesARemount() throws {
        var entropy = EntropySource(SeededGenerator(seed: 4))
        let storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        var authenticator = try Authenticator(storage: storage, entropy: entropy, now: .zero)
        guard
            case .needsUserPresence = authenticator.handleCBOR(
                [0x01] + CBORValue.map(request([-8], rk: true)).encoded(),
                now: .zero
            ),
            case .response(let made) = authenticator.resume(.approved, now: .zero)
        else { throw HarnessFailure("makeCredential did not complete") }
        let registration = try Registration(try CBORDecoder.decode(Array(made.dropFirst())))
        let key = try edKey(registration.credential.coseKey)
        guard let flash = authenticator.storage as? FlashStorage<SimulatedFlash> else {
            throw HarnessFailure("storage")
        }
        var fresh = EntropySource(SeededGenerator(seed: 5))
        let remounted = try FlashStorage(device: flash.store.device, entropy: &fresh)
        #expect(remounted.residentCredentials.first?.algorithm == .edDSA)
        var again = try Authenticator(storage: remounted, entropy: fresh, now: .zero)
        let ga = [0x02] + CBORValue.map(Request.getAssertion(up: false)).encoded()
        guard case .response(let bytes) = again.handleCBOR(ga, now: .zero) else { throw HarnessFailure("no response") }
        let assertion = try Assertion(try CBORDecoder.decode(Array(bytes.dropFirst())))
        #expect(key.isValidSignature(assertion.signature, for: assertion.authData.bytes + Request.clientDataHash))
    }
}
