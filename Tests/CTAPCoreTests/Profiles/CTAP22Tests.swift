import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing
import _CryptoExtras

/// The CTAP 2.2 additions: the persistent pinUvAuthToken (pcmr), encIdentifier, hmac-secret-mc,
/// thirdPartyPayment, attestationFormats and maxPINLength.
@Suite struct CTAP22Tests {
    /// Decrypts encIdentifier with the persistent token, as CTAP 2.2 §6.4 (and python-fido2's Info) does.
    func identifier(_ info: CBORValue, token: [UInt8]) throws -> [UInt8] {
        let sealed = try #require(info[0x19]?.bytesValue)
        #expect(sealed.count == 32)
        return try decryptForPersistentToken(sealed, token: token, info: "encIdentifier")
    }

    func credMgmt(
        _ subcommand: Int,
        _ params: [CBORValue: CBORValue]? = nil,
        token: PlatformToken
    )
        -> [CBORValue: CBORValue]
    {
        var map: [CBORValue: CBORValue] = [1: CBORValue(subcommand), 3: CBORValue(token.version)]
        if let params { map[2] = .map(params) }
        map[4] = .byteString(
            token.authenticate([UInt8(subcommand)] + (params.map { CBORValue.map($0).encoded() } ?? []))
        )
        return map
    }

    @Test func getInfoListsTheAdditions() throws {
        var harness = try Harness()
        let info = try responseMap(harness.cbor(.getInfo))
        #expect(info[4]?["perCredMgmtRO"] == true)
        #expect(info[0x16] == ["packed"])  // "none" is implied and must not be listed (CTAP 2.2 §6.4)
        #expect(info[0x1D] == 63)
        #expect(info[2]?.arrayValue?.contains("hmac-secret-mc") == true)
        #expect(info[2]?.arrayValue?.contains("thirdPartyPayment") == true)
        #expect(info[1] == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1", "FIDO_2_3"])
    }

    @Test func thePersistentTokenReadsCredentialsAcrossAPowerCycleButChangesNothing() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        let mc = try harness.token("1234", permissions: 0x01)
        _ = harness.approve(
            harness.cbor(.makeCredential, authorized(Request.makeCredential(rk: true), mc, paramKey: 8))
        )
        let persistent = try harness.token("1234", permissions: 0x40)
        // pcmr comes alone.
        #expect(status(of: try harness.requestToken("1234", permissions: 0x44).0) == .unauthorizedPermission)
        harness.authenticator.powerCycle(now: harness.now)
        let metadata = try responseMap(harness.cbor(.credentialManagement, credMgmt(1, token: persistent)))
        #expect(metadata[1] == 1)
        let rps = try responseMap(harness.cbor(.credentialManagement, credMgmt(2, token: persistent)))
        #expect(rps[3]?["id"] == "example.com")
        let creds = try responseMap(
            harness.cbor(.credentialManagement, credMgmt(4, [1: .byteString(sha256("example.com"))], token: persistent))
        )
        #expect(creds[6]?["id"] == .byteString(Request.userId))
        let id = try #require(creds[7]?["id"]?.bytesValue)
        let delete = credMgmt(6, [2: Request.descriptor(id)], token: persistent)
        #expect(status(of: harness.cbor(.credentialManagement, delete)) == .pinAuthInvalid)
        // It is not a token for anything else either.
        #expect(
            status(
                of: harness.cbor(.getAssertion, authorized(Request.getAssertion(up: false), persistent, paramKey: 6))
            )
                == .pinAuthInvalid
        )
        // A PIN change replaces it.
        #expect(status(of: try harness.changePIN(from: "1234", to: "5678")) == .ok)
        #expect(status(of: harness.cbor(.credentialManagement, credMgmt(1, token: persistent))) == .pinAuthInvalid)
    }

    @Test func theIdentifierIsStableAcrossPowerCyclesAndNewAfterReset() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        let token = try harness.token("1234", permissions: 0x40)
        let first = try identifier(try responseMap(harness.cbor(.getInfo)), token: token.value)
        let again = try responseMap(harness.cbor(.getInfo))
        #expect(try identifier(again, token: token.value) == first)
        #expect(again[0x19] != (try responseMap(harness.cbor(.getInfo)))[0x19])  // a fresh IV each time
        harness.authenticator.powerCycle(now: harness.now)
        #expect(try identifier(try responseMap(harness.cbor(.getInfo)), token: token.value) == first)
        #expect(status(of: harness.approve(harness.cbor(.reset))) == .ok)
        _ = try harness.setPIN("1234")
        let newToken = try harness.token("1234", permissions: 0x40)
        #expect(newToken.value != token.value)
        #expect(try identifier(try responseMap(harness.cbor(.getInfo)), token: newToken.value) != first)
    }

    @Test func hmacSecretMCGivesTheOutputsOfTheNewCredential() throws {
        var harness = try Harness()
        let salt = [UInt8](repeating: 0x33, count: 32)
        let platform = try PinPlatform(&harness)
        let saltEnc = try platform.encrypt(salt)
        let input: CBORValue = [
            1: platform.keyAgreement, 2: .byteString(saltEnc), 3: .byteString(platform.authenticate(saltEnc)), 4: 2,
        ]
        let request = Request.makeCredential().setting(6, ["hmac-secret": true, "hmac-secret-mc": input])
        let registration = try harness.register(request)
        let ext = try #require(registration.authData.extensions)
        #expect(ext["hmac-secret"] == true)
        let atRegistration = try platform.decrypt(try #require(ext["hmac-secret-mc"]?.bytesValue))
        // The same salt at getAssertion gives the same output.
        let platform2 = try PinPlatform(&harness)
        let saltEnc2 = try platform2.encrypt(salt)
        let ga = Request.getAssertion(allowList: [registration.credentialId]).setting(
            4,
            [
                "hmac-secret": [
                    1: platform2.keyAgreement, 2: .byteString(saltEnc2),
                    3: .byteString(platform2.authenticate(saltEnc2)), 4: 2,
                ]
            ]
        )
        let assertion = try harness.getAssertion(ga)
        let later = try platform2.decrypt(try #require(assertion.authData.extensions?["hmac-secret"]?.bytesValue))
        #expect(atRegistration.count == 32 && atRegistration == later)
        // Without hmac-secret the -mc input is ignored.
        let alone = try harness.register(
            Request.makeCredential(user: Request.user(id: [5])).setting(6, ["hmac-secret-mc": input])
        )
        #expect(alone.authData.extensions == nil)
    }

    @Test(arguments: [true, false])
    func thirdPartyPaymentIsRememberedAndReported(resident: Bool) throws {
        var harness = try Harness()
        let registration = try harness.register(
            Request.makeCredential(rk: resident).setting(6, ["thirdPartyPayment": true])
        )
        #expect(registration.authData.extensions == ["thirdPartyPayment": true])
        let allow = resident ? nil : [registration.credentialId]
        let asked = try harness.getAssertion(
            Request.getAssertion(allowList: allow).setting(4, ["thirdPartyPayment": true])
        )
        #expect(asked.authData.extensions == ["thirdPartyPayment": true])
        let plain = try harness.register(Request.makeCredential(user: Request.user(id: [6])))
        let other = try harness.getAssertion(
            Request.getAssertion(allowList: [plain.credentialId]).setting(4, ["thirdPartyPayment": true])
        )
        #expect(other.authData.extensions == ["thirdPartyPayment": false])
    }

    @Test func thePINComplexityPolicyRefusesRepeatsAndRuns() throws {
        var harness = try Harness()
        #expect(try responseMap(harness.cbor(.getInfo))[0x1B] == false)
        #expect(status(of: harness.cbor(.config, [1: 3, 2: [4: true]])) == .ok)
        #expect(try responseMap(harness.cbor(.getInfo))[0x1B] == true)
        for simple in ["1111", "1234", "9876", "abcdef", "ééééé"] {
            #expect(status(of: try harness.setPIN(simple)) == .pinPolicyViolation, "\(simple)")
        }
        #expect(status(of: try harness.setPIN("1357")) == .ok)
        #expect(status(of: try harness.changePIN(from: "1357", to: "4321")) == .pinPolicyViolation)
        #expect(status(of: try harness.changePIN(from: "1357", to: "2580")) == .ok)
        // setMinPINLength without the member leaves the policy on; reset turns it off.
        let token = try harness.token("2580", permissions: 0x20)
        let params: [CBORValue: CBORValue] = [1: 6]
        let message = [UInt8](repeating: 0xFF, count: 32) + [0x0D, 0x03] + CBORValue.map(params).encoded()
        let request: [CBORValue: CBORValue] = [
            1: 3, 2: .map(params), 3: 2, 4: .byteString(token.authenticate(message)),
        ]
        #expect(status(of: harness.cbor(.config, request)) == .ok)
        #expect(try responseMap(harness.cbor(.getInfo))[0x1B] == true)
        #expect(status(of: harness.approve(harness.cbor(.reset))) == .ok)
        #expect(try responseMap(harness.cbor(.getInfo))[0x1B] == false)
    }

    @Test func uvCountSinceLastPinEntryCountsFingersUntilThePIN() throws {
        var configuration = Harness.configuration
        configuration.fingerprintSensor = true
        configuration.preEnrolledFingerprints = 1
        var harness = try Harness(configuration: configuration)
        #expect(try responseMap(harness.cbor(.getInfo))[0x17] == 0)
        _ = try harness.register(Request.makeCredential())  // no UV: not counted
        for _ in 0..<2 {
            _ = harness.approve(harness.cbor(.makeCredential, Request.makeCredential().setting(7, ["uv": true])))
        }
        #expect(try responseMap(harness.cbor(.getInfo))[0x17] == 2)
        _ = try harness.setPIN("2580")
        _ = try harness.token("2580", permissions: 0x01)
        #expect(try responseMap(harness.cbor(.getInfo))[0x17] == 0)
        var plain = try Harness()
        #expect(try responseMap(plain.cbor(.getInfo))[0x17] == nil)
    }
}
