import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// authenticatorConfig (0x0D, CTAP 2.1 §6.11): toggleAlwaysUv, setMinPINLength, and their effects.
@Suite struct ConfigTests {
    /// A config request, signed with `token` when given.
    func request(
        _ subcommand: Int,
        _ params: [CBORValue: CBORValue]? = nil,
        token: PlatformToken? = nil
    )
        -> [CBORValue: CBORValue]
    {
        var map: [CBORValue: CBORValue] = [1: CBORValue(subcommand)]
        if let params { map[2] = .map(params) }
        if let token {
            let message =
                [UInt8](repeating: 0xFF, count: 32) + [0x0D, UInt8(subcommand)]
                + (params.map { CBORValue.map($0).encoded() } ?? [])
            map[3] = CBORValue(token.version)
            map[4] = .byteString(token.authenticate(message))
        }
        return map
    }

    func info(_ harness: inout Harness) throws -> CBORValue { try responseMap(harness.cbor(.getInfo)) }

    @Test func withoutAPINConfigNeedsNoToken() throws {
        var harness = try Harness()
        #expect(status(of: harness.cbor(.config, request(3, [1: 6]))) == .ok)
        #expect(try info(&harness)[0x0D] == 6)
        #expect(status(of: try harness.setPIN("12345")) == .pinPolicyViolation)
        #expect(status(of: try harness.setPIN("123456")) == .ok)
    }

    @Test func withAPINConfigNeedsAnAcfgToken() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        #expect(status(of: harness.cbor(.config, request(3, [1: 5]))) == .puatRequired)
        let mcOnly = try harness.token("1234", permissions: 0x01)
        #expect(status(of: harness.cbor(.config, request(3, [1: 5], token: mcOnly))) == .pinAuthInvalid)
        let token = try harness.token("1234", permissions: 0x20)
        var forged = request(3, [1: 5], token: token)
        forged[2] = [1: 9]
        #expect(status(of: harness.cbor(.config, forged)) == .pinAuthInvalid)
        #expect(
            status(of: harness.cbor(.config, request(3, [1: 5], token: token).setting(3, nil))) == .missingParameter
        )
        #expect(status(of: harness.cbor(.config, request(3, [1: 5], token: token))) == .ok)
        #expect(try info(&harness)[0x0D] == 5)
    }

    @Test func subcommandErrors() throws {
        var harness = try Harness()
        #expect(status(of: harness.cbor(.config, [2: [1: 5]])) == .missingParameter)
        #expect(status(of: harness.cbor(.config, request(0x05))) == .invalidSubcommand)
        #expect(status(of: harness.cbor(.config, request(0xFF))) == .invalidSubcommand)
        #expect(status(of: harness.cbor(.config, request(3, [1: "6"]))) == .cborUnexpectedType)
    }

    @Test func theMinimumOnlyGrows() throws {
        var harness = try Harness()
        #expect(status(of: harness.cbor(.config, request(3, [1: 8]))) == .ok)
        #expect(status(of: harness.cbor(.config, request(3, [1: 7]))) == .pinPolicyViolation)
        #expect(status(of: harness.cbor(.config, request(3, [1: 64]))) == .pinPolicyViolation)
        #expect(status(of: harness.cbor(.config, request(3, [:]))) == .ok)  // keeps 8
        #expect(try info(&harness)[0x0D] == 8)
    }

    @Test func aLongerMinimumForcesAPINChange() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        let token = try harness.token("1234", permissions: 0x20)
        #expect(status(of: harness.cbor(.config, request(3, [1: 6], token: token))) == .ok)
        #expect(try info(&harness)[0x0C] == true)
        // The token is gone, tokens are refused until the PIN changes, and the new PIN must be long enough.
        #expect(status(of: harness.cbor(.config, request(3, [1: 7], token: token))) == .pinAuthInvalid)
        #expect(status(of: try harness.requestToken("1234", permissions: 0x01).0) == .pinPolicyViolation)
        #expect(status(of: try harness.requestToken("1234", permissions: nil).0) == .pinInvalid)
        #expect(try harness.pinRetries().retries == 8)  // the PIN was right
        #expect(status(of: try harness.changePIN(from: "1234", to: "12345")) == .pinPolicyViolation)
        #expect(status(of: try harness.changePIN(from: "1234", to: "123456")) == .ok)
        #expect(try info(&harness)[0x0C] == false)
        _ = try harness.token("123456", permissions: 0x01)
    }

    @Test func forceChangePinAsksForADifferentPIN() throws {
        var harness = try Harness()
        #expect(status(of: harness.cbor(.config, request(3, [3: true]))) == .pinNotSet)
        _ = try harness.setPIN("1234")
        let token = try harness.token("1234", permissions: 0x20)
        #expect(status(of: harness.cbor(.config, request(3, [3: true], token: token))) == .ok)
        #expect(status(of: try harness.changePIN(from: "1234", to: "1234")) == .pinPolicyViolation)
        #expect(status(of: try harness.changePIN(from: "1234", to: "4321")) == .ok)
        #expect(try info(&harness)[0x0C] == false)
    }

    @Test func minPinLengthRPIDsAreReplacedAndBounded() throws {
        var harness = try Harness()
        let nine: [CBORValue] = (0..<9).map { .textString("rp\($0).example") }
        #expect(status(of: harness.cbor(.config, request(3, [2: .array(nine)]))) == .keyStoreFull)
        #expect(status(of: harness.cbor(.config, request(3, [1: 6, 2: ["example.com"]]))) == .ok)
        let ext = Request.makeCredential().setting(6, ["minPinLength": true])
        #expect(try harness.register(ext).authData.extensions == ["minPinLength": 6])
        #expect(status(of: harness.cbor(.config, request(3, [2: ["other.example"]]))) == .ok)
        #expect(try harness.register(ext).authData.extensions == nil)
    }

    @Test func alwaysUvDemandsATokenEverywhereAndSwitchesU2FOff() throws {
        var harness = try Harness()
        #expect(status(of: harness.cbor(.config, request(2))) == .ok)
        var options = try #require(try info(&harness)[4])
        #expect(options["alwaysUv"] == true && options["makeCredUvNotRqd"] == false)
        #expect(status(of: harness.cbor(.makeCredential, Request.makeCredential())) == .puatRequired)
        #expect(status(of: harness.cbor(.getAssertion, Request.getAssertion())) == .puatRequired)
        // A silent probe (up=false) is not held up by alwaysUv.
        #expect(status(of: harness.cbor(.getAssertion, Request.getAssertion(up: false))) == .noCredentials)
        #expect(statusWord(of: harness.u2f(U2FRequest.register())) == 0x6986)
        #expect(statusWord(of: harness.u2f([0x00, 0x03, 0x00, 0x00])) == 0x9000)
        // With a PIN and a token, credentials are made with UV; turning alwaysUv off needs the token too.
        _ = try harness.setPIN("1234")
        let mc = try harness.token("1234", permissions: 0x01)
        let made = harness.approve(harness.cbor(.makeCredential, authorized(Request.makeCredential(), mc, paramKey: 8)))
        #expect(status(of: made) == .ok)
        #expect(status(of: harness.cbor(.config, request(2))) == .puatRequired)
        let token = try harness.token("1234", permissions: 0x20)
        #expect(status(of: harness.cbor(.config, request(2, token: token))) == .ok)
        options = try #require(try info(&harness)[4])
        #expect(options["alwaysUv"] == false && options["makeCredUvNotRqd"] == true)
        #expect(needsPresence(harness.u2f(U2FRequest.register())))
    }

    @Test func resetRestoresTheDefaults() throws {
        var harness = try Harness()
        _ = harness.cbor(.config, request(3, [1: 9, 2: ["example.com"]]))
        _ = harness.cbor(.config, request(2))
        #expect(status(of: harness.approve(harness.cbor(.reset))) == .ok)
        let info = try info(&harness)
        #expect(info[0x0D] == 4 && info[4]?["alwaysUv"] == false)
    }

    /// A model whose alwaysUv is on from the factory (a profile's `alwaysUv`): on at the first start; turned off by
    /// toggleAlwaysUv it stays off when the key starts again; a reset restores it to on (CTAP 2.1 §6.6).
    @Test func aKeyWithAlwaysUvFromTheFactoryGetsItBackAtResetOnly() throws {
        var configuration = Harness.configuration
        configuration.alwaysUvByDefault = true
        var harness = try Harness(configuration: configuration)
        try harness.authenticator.applyFactoryDefaults()
        #expect(try info(&harness)[4]?["alwaysUv"] == true)
        #expect(status(of: harness.cbor(.config, request(2))) == .ok)
        #expect(try info(&harness)[4]?["alwaysUv"] == false)
        // The key starts again from what it stored.
        harness.authenticator = try Authenticator(
            configuration: configuration,
            storage: harness.authenticator.storage,
            entropy: EntropySource(SeededGenerator(seed: 7)),
            now: .zero
        )
        try harness.authenticator.applyFactoryDefaults()
        #expect(try info(&harness)[4]?["alwaysUv"] == false, "the choice stands across a power cycle")
        #expect(status(of: harness.approve(harness.cbor(.reset))) == .ok)
        #expect(try info(&harness)[4]?["alwaysUv"] == true, "reset restores the model's default")
        #expect(status(of: harness.cbor(.makeCredential, Request.makeCredential())) == .puatRequired)
    }
}
