import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// authenticatorClientPIN (0x06): setPIN, changePIN, tokens, retries and blocking (CTAP 2.1 §6.5.5).
@Suite struct ClientPINTests {
    @Test func aFreshKeyHasEightRetriesAndNoPIN() throws {
        var harness = try Harness()
        let retries = try harness.pinRetries()
        #expect(retries.retries == 8 && retries.powerCycle == false)
        #expect(try responseMap(harness.cbor(.getInfo))[4]?["clientPin"] == false)
        #expect(status(of: try harness.requestToken("1234", permissions: 1).0) == .pinNotSet)
    }

    @Test(arguments: [1, 2])
    func setPINThenTokenWithEitherProtocol(version: Int) throws {
        var harness = try Harness()
        #expect(status(of: try harness.setPIN("1234", version: version)) == .ok)
        #expect(try responseMap(harness.cbor(.getInfo))[4]?["clientPin"] == true)
        let token = try harness.token("1234", permissions: 0x01, rpId: Request.rpId, version: version)
        let outcome = harness.cbor(.makeCredential, authorized(Request.makeCredential(rk: true), token, paramKey: 8))
        let registration = try Registration(responseMap(harness.approve(outcome)))
        #expect(registration.authData.flags & ParsedAuthData.userVerified != 0)
        #expect(registration.authData.flags & ParsedAuthData.userPresent != 0)
    }

    @Test func aSecondSetPINIsRefused() throws {
        var harness = try Harness()
        #expect(status(of: try harness.setPIN("1234")) == .ok)
        #expect(status(of: try harness.setPIN("5678")) == .pinAuthInvalid)
        _ = try harness.token("1234")
    }

    @Test(arguments: [
        ("123", CTAPStatus.pinPolicyViolation),
        ("ééé", .pinPolicyViolation),  // 6 bytes but 3 code points
        ("éééé", .ok),
        (String(repeating: "7", count: 63), .ok),
        (String(repeating: "7", count: 64), .pinPolicyViolation),  // no room for the zero padding
    ])
    func pinLengthRules(pin: String, expected: CTAPStatus) throws {
        var harness = try Harness()
        #expect(status(of: try harness.setPIN(pin)) == expected)
        if expected == .ok { _ = try harness.token(pin) }
    }

    @Test func setPINRejectsBadAuthenticationAndBadPadding() throws {
        var harness = try Harness()
        let platform = try PinPlatform(&harness)
        let newPinEnc = try platform.encrypt(PinPlatform.padded("1234"))
        var request: [CBORValue: CBORValue] = [
            1: 2, 2: 3, 3: platform.keyAgreement, 4: .byteString(platform.authenticate(newPinEnc)),
            5: .byteString(newPinEnc),
        ]
        var tampered = newPinEnc
        tampered[20] ^= 1
        #expect(status(of: harness.cbor(.clientPIN, request.setting(5, .byteString(tampered)))) == .pinAuthInvalid)
        let short = try platform.encrypt(Array(PinPlatform.padded("1234").prefix(32)))
        #expect(
            status(
                of: harness.cbor(
                    .clientPIN,
                    request.setting(5, .byteString(short)).setting(4, .byteString(platform.authenticate(short)))
                )
            )
                == .invalidParameter
        )
        for key in [3, 4, 5, 1] {
            #expect(status(of: harness.cbor(.clientPIN, request.setting(key, nil))) == .missingParameter)
        }
        #expect(status(of: harness.cbor(.clientPIN, request.setting(1, 3))) == .invalidParameter)
        request[3] = [
            1: 2, 3: -25, -1: 1, -2: .byteString([UInt8](repeating: 1, count: 32)),
            -3: .byteString([UInt8](repeating: 2, count: 32)),
        ]
        #expect(status(of: harness.cbor(.clientPIN, request)) == .invalidParameter)  // not on the curve
        #expect(harness.authenticator.storage.pin == nil)
    }

    @Test func wrongPINsCountDownAndBlockAfterThreeUntilAPowerCycle() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        #expect(status(of: try harness.requestToken("0000", permissions: 1).0) == .pinInvalid)
        #expect(try harness.pinRetries().retries == 7)
        #expect(status(of: try harness.requestToken("0000", permissions: 1).0) == .pinInvalid)
        #expect(status(of: try harness.requestToken("0000", permissions: 1).0) == .pinAuthBlocked)
        #expect(try harness.pinRetries().retries == 5)
        #expect(try harness.pinRetries().powerCycle == true)
        // Even the right PIN is refused, and no retry is spent, until the key is replugged.
        #expect(status(of: try harness.requestToken("1234", permissions: 1).0) == .pinAuthBlocked)
        #expect(status(of: try harness.changePIN(from: "1234", to: "5678")) == .pinAuthBlocked)
        #expect(try harness.pinRetries().retries == 5)
        harness.authenticator.powerCycle(now: harness.now)
        #expect(try harness.pinRetries().powerCycle == false)
        _ = try harness.token("1234")
        #expect(try harness.pinRetries().retries == 8)
    }

    @Test func eightWrongPINsBlockThePINUntilReset() throws {
        var harness = try Harness(configuration: AuthenticatorConfiguration(resetWindowEnabled: false))
        _ = try harness.setPIN("1234")
        var results: [CTAPStatus?] = []
        for attempt in 0..<8 {
            if attempt % 3 == 0 { harness.authenticator.powerCycle(now: harness.now) }
            results.append(status(of: try harness.requestToken("9999", permissions: 1).0))
        }
        #expect(results.last == .pinBlocked)
        #expect(try harness.pinRetries().retries == 0)
        harness.authenticator.powerCycle(now: harness.now)
        #expect(status(of: try harness.requestToken("1234", permissions: 1).0) == .pinBlocked)
        #expect(status(of: try harness.changePIN(from: "1234", to: "5678")) == .pinBlocked)
        #expect(status(of: harness.approve(harness.cbor(.reset))) == .ok)
        #expect(try harness.pinRetries().retries == 8)
        #expect(harness.authenticator.storage.pin == nil)
        #expect(status(of: try harness.setPIN("4321")) == .ok)
    }

    @Test func aWrongPINReplacesTheKeyAgreementKey() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        let before = try responseMap(harness.cbor(.clientPIN, [1: 2, 2: 2]))[1]
        let platform = try PinPlatform(&harness)
        #expect(status(of: try harness.requestToken("0000", permissions: 1).0) == .pinInvalid)
        #expect(try responseMap(harness.cbor(.clientPIN, [1: 2, 2: 2]))[1] != before)
        // The secret agreed before the mismatch no longer decrypts: the right PIN under it is a mismatch.
        let stale: [CBORValue: CBORValue] = [
            1: 2, 2: 9, 3: platform.keyAgreement, 6: .byteString(try platform.encrypt(PinPlatform.pinHash("1234"))),
            9: 1,
        ]
        #expect(status(of: harness.cbor(.clientPIN, stale)) == .pinInvalid)
    }

    @Test func permissionsMustBeGrantable() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        #expect(status(of: try harness.requestToken("1234", permissions: 0).0) == .invalidParameter)
        for unsupported in [0x08, 0x0F, 0x48, 0x41] {  // be without the sensor; pcmr only alone
            #expect(status(of: try harness.requestToken("1234", permissions: unsupported).0) == .unauthorizedPermission)
        }
        #expect(try harness.pinRetries().retries == 8)
        // getPinToken takes no permissions or rpId.
        let platform = try PinPlatform(&harness)
        let request: [CBORValue: CBORValue] = [
            1: 2, 2: 5, 3: platform.keyAgreement, 6: .byteString(try platform.encrypt(PinPlatform.pinHash("1234"))),
        ]
        #expect(status(of: harness.cbor(.clientPIN, request.setting(9, 1))) == .invalidParameter)
        #expect(status(of: harness.cbor(.clientPIN, request.setting(10, "example.com"))) == .invalidParameter)
        #expect(status(of: harness.cbor(.clientPIN, request)) == .ok)
    }

    @Test func changePINChecksTheOldPINAndInvalidatesTokens() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        let old = try harness.token("1234", permissions: 0x02)
        #expect(status(of: try harness.changePIN(from: "0000", to: "5678")) == .pinInvalid)
        #expect(try harness.pinRetries().retries == 7)
        #expect(status(of: try harness.changePIN(from: "1234", to: "567")) == .pinPolicyViolation)
        #expect(try harness.pinRetries().retries == 8)  // the old PIN was right
        #expect(status(of: try harness.changePIN(from: "1234", to: "5678")) == .ok)
        #expect(status(of: try harness.requestToken("1234", permissions: 1).0) == .pinInvalid)
        _ = try harness.token("5678")
        let outcome = harness.cbor(.getAssertion, authorized(Request.getAssertion(up: false), old, paramKey: 6))
        #expect(status(of: outcome) == .pinAuthInvalid)
    }

    @Test func changePINWithoutAPINIsPINNotSet() throws {
        var harness = try Harness()
        #expect(status(of: try harness.changePIN(from: "1234", to: "5678")) == .pinNotSet)
    }

    @Test func subcommandErrors() throws {
        var harness = try Harness()
        #expect(status(of: harness.cbor(.clientPIN, [1: 2])) == .missingParameter)
        #expect(status(of: harness.cbor(.clientPIN, [1: 2, 2: 8])) == .invalidSubcommand)
        #expect(status(of: harness.cbor(.clientPIN, [1: 2, 2: 0x7F])) == .invalidSubcommand)
        #expect(status(of: harness.cbor(.clientPIN, [2: 2])) == .missingParameter)  // getKeyAgreement
        #expect(status(of: harness.cbor(.clientPIN, [1: 3, 2: 2])) == .invalidParameter)
        #expect(status(of: harness.cbor(.clientPIN, [1: "two", 2: 2])) == .cborUnexpectedType)
        // No built-in UV on this key.
        #expect(status(of: harness.cbor(.clientPIN, [1: 2, 2: 7])) == .invalidSubcommand)
        #expect(status(of: harness.cbor(.clientPIN, [1: 2, 2: 6, 9: 1])) == .invalidSubcommand)
    }
}
