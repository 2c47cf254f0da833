import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// The simulated fingerprint sensor: authenticatorBioEnrollment, built-in UV in clientPIN, makeCredential and
/// getAssertion (CTAP 2.1 §6.7, §6.5.5.7.3). Approving a fingerprint request is a matching finger, denying it
/// a finger that does not match.
@Suite struct BuiltInUVTests {
    static func configuration(enrolled: Int = 0) -> AuthenticatorConfiguration {
        var configuration = Harness.configuration
        configuration.fingerprintSensor = true
        configuration.preEnrolledFingerprints = enrolled
        return configuration
    }

    /// A bio enrollment request signed with `token`.
    func bio(
        _ subcommand: Int,
        _ params: [CBORValue: CBORValue]? = nil,
        token: PlatformToken?
    ) -> [CBORValue: CBORValue] {
        var map: [CBORValue: CBORValue] = [1: 1, 2: CBORValue(subcommand)]
        if let params { map[3] = .map(params) }
        if let token {
            map[4] = CBORValue(token.version)
            map[5] = .byteString(
                token.authenticate([1, UInt8(subcommand)] + (params.map { CBORValue.map($0).encoded() } ?? []))
            )
        }
        return map
    }

    /// getPinUvAuthTokenUsingUvWithPermissions: the outcome (a fingerprint request) and the platform.
    func uvToken(
        _ harness: inout Harness,
        permissions: Int,
        rpId: String? = nil
    ) throws -> (AuthenticatorOutcome, PinPlatform) {
        let platform = try PinPlatform(&harness)
        var params: [CBORValue: CBORValue] = [1: 2, 2: 6, 3: platform.keyAgreement, 9: CBORValue(permissions)]
        if let rpId { params[10] = .textString(rpId) }
        return (harness.cbor(.clientPIN, params), platform)
    }

    func prompt(_ outcome: AuthenticatorOutcome) -> PresencePrompt? {
        if case .needsUserPresence(let prompt) = outcome { prompt } else { nil }
    }

    @Test func getInfoShowsTheSensorOnlyWhenItIsOn() throws {
        var plain = try Harness()
        let plainOptions = try #require(try responseMap(plain.cbor(.getInfo))[4])
        #expect(plainOptions["uv"] == nil && plainOptions["bioEnroll"] == nil)
        #expect(plain.cbor(raw: [0x09, 0xA1, 0x06, 0xF5]) == .response([CTAPStatus.invalidCommand.rawValue]))
        var harness = try Harness(configuration: Self.configuration())
        var info = try responseMap(harness.cbor(.getInfo))
        #expect(info[4]?["uv"] == false && info[4]?["bioEnroll"] == false && info[4]?["uvBioEnroll"] == true)
        #expect(info[0x11] == 3 && info[0x12] == 2)
        harness = try Harness(configuration: Self.configuration(enrolled: 1))
        info = try responseMap(harness.cbor(.getInfo))
        #expect(info[4]?["uv"] == true && info[4]?["bioEnroll"] == true)
    }

    @Test func enrollAFingerWithAPINTokenThenManageIt() throws {
        var harness = try Harness(configuration: Self.configuration())
        _ = try harness.setPIN("1234")
        #expect(try responseMap(harness.cbor(.bioEnrollment, [6: true]))[1] == 1)  // getModality
        let sensor = try responseMap(harness.cbor(.bioEnrollment, bio(7, token: nil)))
        #expect(sensor[2] == 1 && sensor[3] == 3 && sensor[8] == 32)
        #expect(status(of: harness.cbor(.bioEnrollment, bio(1, token: nil))) == .puatRequired)
        let token = try harness.token("1234", permissions: 0x08)
        let begin = harness.cbor(.bioEnrollment, bio(1, token: token))
        #expect(prompt(begin)?.gesture == .fingerprint)
        let first = try responseMap(harness.resume(.approved))
        let id = try #require(first[4]?.bytesValue)
        #expect(first[5] == 0 && first[6] == 2)
        // A poor sample does not count; two good ones finish the template.
        let poor = try responseMap(
            harness.answer(harness.cbor(.bioEnrollment, bio(2, [1: .byteString(id)], token: token)), with: .denied)
        )
        #expect(poor[5] == 7 && poor[6] == 2 && poor[4] == nil)
        for remaining in [1, 0] {
            let sample = try responseMap(
                harness.approve(harness.cbor(.bioEnrollment, bio(2, [1: .byteString(id)], token: token)))
            )
            #expect(sample[5] == 0 && sample[6] == CBORValue(remaining))
        }
        #expect(try responseMap(harness.cbor(.getInfo))[4]?["uv"] == true)
        // A new template has no name until the platform gives it one.
        let unnamed = try responseMap(harness.cbor(.bioEnrollment, bio(4, token: token)))
        #expect(unnamed[7] == [[1: .byteString(id), 2: ""]])
        #expect(
            status(of: harness.cbor(.bioEnrollment, bio(5, [1: .byteString(id), 2: "left thumb"], token: token))) == .ok
        )
        let list = try responseMap(harness.cbor(.bioEnrollment, bio(4, token: token)))
        #expect(list[7] == [[1: .byteString(id), 2: "left thumb"]])
        #expect(
            status(of: harness.cbor(.bioEnrollment, bio(5, [1: .byteString([9, 9]), 2: "x"], token: token)))
                == .invalidOption
        )
        #expect(
            status(
                of: harness.cbor(
                    .bioEnrollment,
                    bio(5, [1: .byteString(id), 2: .textString(String(repeating: "n", count: 33))], token: token)
                )
            ) == .invalidLength
        )
        #expect(status(of: harness.cbor(.bioEnrollment, bio(6, [1: .byteString(id)], token: token))) == .ok)
        #expect(status(of: harness.cbor(.bioEnrollment, bio(4, token: token))) == .invalidOption)
        #expect(try responseMap(harness.cbor(.getInfo))[4]?["uv"] == false)
    }

    @Test func enrollmentErrors() throws {
        var harness = try Harness(configuration: Self.configuration(enrolled: 5))
        _ = try harness.setPIN("1234")
        let gaOnly = try harness.token("1234", permissions: 0x02)
        #expect(status(of: harness.cbor(.bioEnrollment, bio(4, token: gaOnly))) == .pinAuthInvalid)
        let token = try harness.token("1234", permissions: 0x08)
        #expect(status(of: harness.cbor(.bioEnrollment, bio(1, token: token))) == .fingerprintDatabaseFull)
        #expect(
            status(of: harness.cbor(.bioEnrollment, bio(2, [1: .byteString([1, 2])], token: token)))
                == .invalidParameter
        )
        #expect(status(of: harness.cbor(.bioEnrollment, bio(9, token: token))) == .invalidSubcommand)
        #expect(status(of: harness.cbor(.bioEnrollment, [2: 4])) == .missingParameter)
        #expect(status(of: harness.cbor(.bioEnrollment, [1: 2, 2: 7])) == .invalidParameter)
        #expect(status(of: harness.cbor(.bioEnrollment, bio(3, token: nil))) == .ok)  // cancel needs no token
    }

    @Test func aMatchingFingerGivesATokenWithUserPresence() throws {
        var harness = try Harness(configuration: Self.configuration(enrolled: 1))
        let (outcome, platform) = try uvToken(&harness, permissions: 0x01, rpId: Request.rpId)
        #expect(prompt(outcome)?.gesture == .fingerprint)
        let sealed = try #require(try responseMap(harness.resume(.approved))[2]?.bytesValue)
        let token = PlatformToken(version: 2, value: try platform.decrypt(sealed))
        // The finger was a touch too: makeCredential with this token needs no further touch.
        let made = harness.cbor(.makeCredential, authorized(Request.makeCredential(rk: true), token, paramKey: 8))
        let registration = try Registration(responseMap(made))
        #expect(registration.authData.flags & 0x05 == 0x05)
    }

    @Test func mismatchesCountDownToUVBlockedAndThePINUnblocks() throws {
        var harness = try Harness(configuration: Self.configuration(enrolled: 1))
        _ = try harness.setPIN("1234")
        var results: [CTAPStatus?] = []
        for _ in 0..<5 {
            let (outcome, _) = try uvToken(&harness, permissions: 0x02)
            results.append(status(of: harness.answer(outcome, with: .denied)))
        }
        #expect(results == [.uvInvalid, .uvInvalid, .uvInvalid, .uvInvalid, .uvBlocked])
        #expect(try responseMap(harness.cbor(.clientPIN, [1: 2, 2: 7]))[5] == 0)
        #expect(status(of: try uvToken(&harness, permissions: 0x02).0) == .uvBlocked)
        // A timeout is no attempt at all.
        _ = try harness.token("1234", permissions: 0x02)
        #expect(try responseMap(harness.cbor(.clientPIN, [1: 2, 2: 7]))[5] == 5)
        let (slow, _) = try uvToken(&harness, permissions: 0x02)
        #expect(status(of: harness.answer(slow, with: .timedOut)) == .userActionTimeout)
        #expect(try responseMap(harness.cbor(.clientPIN, [1: 2, 2: 7]))[5] == 5)
    }

    @Test func uvTokenRules() throws {
        var harness = try Harness(configuration: Self.configuration())
        #expect(status(of: try uvToken(&harness, permissions: 0x01).0) == .notAllowed)  // nothing enrolled
        harness = try Harness(configuration: Self.configuration(enrolled: 1))
        #expect(status(of: try uvToken(&harness, permissions: 0).0) == .invalidParameter)
        #expect(status(of: try uvToken(&harness, permissions: 0x42).0) == .unauthorizedPermission)  // pcmr only alone
        #expect(status(of: harness.cbor(.clientPIN, [1: 2, 2: 6, 9: 1])) == .missingParameter)
    }

    @Test func theUVOptionReadsAFingerInsteadOfATouch() throws {
        var harness = try Harness(configuration: Self.configuration(enrolled: 1))
        let request = Request.makeCredential(rk: true).setting(7, ["rk": true, "uv": true])
        let outcome = harness.cbor(.makeCredential, request)
        #expect(prompt(outcome)?.gesture == .fingerprint)
        let registration = try Registration(responseMap(harness.resume(.approved)))
        #expect(registration.authData.flags & 0x05 == 0x05)
        // Without a PIN a mismatch is OPERATION_DENIED; a discoverable credential without uv needs UV.
        #expect(status(of: harness.answer(harness.cbor(.makeCredential, request), with: .denied)) == .operationDenied)
        #expect(status(of: harness.cbor(.makeCredential, Request.makeCredential(rk: true))) == .puatRequired)
        let ga = Request.getAssertion().setting(5, ["uv": true])
        let assertion = try Assertion(responseMap(harness.approve(harness.cbor(.getAssertion, ga))))
        #expect(assertion.authData.flags & 0x05 == 0x05)
        #expect(assertion.verifies(with: registration.publicKey))
        // With a PIN, a mismatch sends the platform to the PIN.
        _ = try harness.setPIN("1234")
        #expect(status(of: harness.answer(harness.cbor(.getAssertion, ga), with: .denied)) == .puatRequired)
        // A key whose sensor has no finger enrolled has no UV to offer.
        var empty = try Harness(configuration: Self.configuration())
        #expect(status(of: empty.cbor(.getAssertion, ga)) == .invalidOption)
    }

    @Test func theFingerIsReadBeforeTheSearchForCredentials() throws {
        var harness = try Harness(configuration: Self.configuration(enrolled: 1))
        let ga = Request.getAssertion(rpId: "nothing.example").setting(5, ["uv": true])
        let outcome = harness.cbor(.getAssertion, ga)
        #expect(prompt(outcome)?.gesture == .fingerprint)
        #expect(status(of: harness.resume(.approved)) == .noCredentials)
        #expect(status(of: harness.answer(harness.cbor(.getAssertion, ga), with: .denied)) == .operationDenied)
        #expect(harness.authenticator.storage.uvRetries == 4)
    }

    @Test func resetForgetsTheFingers() throws {
        var harness = try Harness(configuration: Self.configuration(enrolled: 2))
        #expect(status(of: harness.approve(harness.cbor(.reset))) == .ok)
        #expect(try responseMap(harness.cbor(.getInfo))[4]?["uv"] == false)
        #expect(harness.authenticator.storage.fingerprints.isEmpty)
    }
}
