import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// The behaviours a profile sets (ProfileBehaviour): CTAP 2.0's rules on a FIDO_2_0 profile, the FIDO_2_1_PRE token
/// model, and each choice where the specification leaves one, request by request against the default.
@Suite struct ProfileBehaviourTests {
    static let ctap20 = KeyProfile(
        name: "ctap20",
        versions: ["U2F_V2", "FIDO_2_0"],
        extensions: ["hmac-secret", "credProtect"],
        pinUvAuthProtocols: [1],
        algorithms: [.es256]
    )
    static let ctap21pre = KeyProfile(
        name: "ctap21pre",
        versions: ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE"],
        pinUvAuthProtocols: [1]
    )

    static func profile(_ change: (inout ProfileBehaviour) -> Void) -> KeyProfile {
        var profile = KeyProfile(name: "chosen")
        change(&profile.behaviour)
        return profile
    }

    func harness(_ profile: KeyProfile, pin: String? = "1234") throws -> Harness {
        var configuration = Harness.configuration
        configuration.profile = profile
        var harness = try Harness(configuration: configuration)
        if let pin { #expect(status(of: try harness.setPIN(pin, version: 1)) == .ok) }
        return harness
    }

    /// A credential management request (0x0A or 0x41) authenticated with `token`.
    func credentialManagement(
        _ harness: inout Harness,
        _ command: CTAPCommand,
        _ token: PlatformToken
    ) -> CTAPStatus? {
        status(
            of: harness.cbor(
                command,
                [1: 1, 3: CBORValue(token.version), 4: .byteString(token.authenticate([0x01]))]
            )
        )
    }

    /// makeCredential with `token`, touched when it asks for a touch.
    func makeCredential(_ harness: inout Harness, _ token: PlatformToken, rpId: String = Request.rpId) -> CTAPStatus? {
        var outcome = harness.cbor(.makeCredential, authorized(Request.makeCredential(rpId: rpId), token, paramKey: 8))
        if needsPresence(outcome) { outcome = harness.resume(.approved) }
        return status(of: outcome)
    }

    @Test func theVersionsChooseTheRules() {
        #expect(Self.ctap20.behaviour == .ctap20)
        #expect(Self.ctap21pre.behaviour == .ctap21Preview)
        #expect(KeyProfile.fidosim.behaviour == ProfileBehaviour())
        #expect(Self.ctap20.problem == nil && Self.ctap21pre.problem == nil)
        var wrong = Self.ctap20
        wrong.behaviour.pinToken = .permissions
        #expect(wrong.problem != nil)
        wrong = KeyProfile.fidosim
        wrong.behaviour.clientPINSubcommands = [1, 2, 3, 4]
        #expect(wrong.problem != nil)
    }

    // MARK: CTAP 2.0

    @Test func ctap20HasOnePinTokenPerPowerUpForAnyNumberOfRequests() throws {
        var h = try harness(Self.ctap20)
        let token = try h.token("1234", permissions: nil, version: 1)
        #expect(try h.token("1234", permissions: nil, version: 1).value == token.value)
        // Any number of uses, for any RP (CTAP 2.1 would refuse the second: its uv flag is spent).
        for rpId in ["example.com", "example.com", "other.example"] {
            #expect(makeCredential(&h, token, rpId: rpId) == .ok)
        }
        // A power cycle makes a new one.
        h.authenticator.powerCycle(now: h.now)
        #expect(makeCredential(&h, token) == .pinAuthInvalid)
        let next = try h.token("1234", permissions: nil, version: 1)
        #expect(next.value != token.value && makeCredential(&h, next) == .ok)
        // So does a PIN change.
        #expect(status(of: try h.changePIN(from: "1234", to: "5678", version: 1)) == .ok)
        #expect(makeCredential(&h, next) == .pinAuthInvalid)
        #expect(try h.token("5678", permissions: nil, version: 1).value != next.value)
    }

    @Test func ctap21SpendsATokenOnItsFirstCredential() throws {
        var h = try harness(.fidosim)
        let token = try h.token("1234", permissions: nil, version: 1)
        #expect(try h.token("1234", permissions: nil, version: 1).value != token.value)  // a new token each time
        let fresh = try h.token("1234", permissions: nil, version: 1)
        #expect(makeCredential(&h, fresh) == .ok)
        #expect(makeCredential(&h, fresh) == .pinAuthInvalid)
    }

    @Test func ctap20NeedsThePINForEveryCredentialOnceOneIsSet() throws {
        var h = try harness(Self.ctap20)
        // CTAP2_ERR_PIN_REQUIRED (0x36), the byte CTAP 2.1 calls PUAT_REQUIRED.
        #expect(status(of: h.cbor(.makeCredential, Request.makeCredential())) == .puatRequired)
        #expect(try responseMap(h.cbor(.getInfo))[4]?["makeCredUvNotRqd"] == nil)
        var d = try harness(.fidosim)
        #expect(status(of: d.approve(d.cbor(.makeCredential, Request.makeCredential()))) == .ok)
        // A CTAP 2.1 profile can choose the same; getInfo then says makeCredUvNotRqd false.
        var chosen = try harness(Self.profile { $0.makeCredUvNotRqd = false })
        #expect(status(of: chosen.cbor(.makeCredential, Request.makeCredential())) == .puatRequired)
        #expect(try responseMap(chosen.cbor(.getInfo))[4]?["makeCredUvNotRqd"] == false)
    }

    @Test(arguments: [true, false])
    func ctap20HasNoUpOptionInMakeCredential(up: Bool) throws {
        var h = try harness(Self.ctap20, pin: nil)
        #expect(
            status(of: h.cbor(.makeCredential, Request.makeCredential().setting(7, ["up": .boolean(up)])))
                == .invalidOption
        )
        var d = try harness(.fidosim, pin: nil)
        let outcome = d.cbor(.makeCredential, Request.makeCredential().setting(7, ["up": .boolean(up)]))
        #expect(up ? needsPresence(outcome) : status(of: outcome) == .invalidOption)
    }

    @Test func rkInGetAssertionIsInvalidIn20AndUnsupportedIn21() throws {
        var h = try harness(Self.ctap20, pin: nil)
        let request = Request.getAssertion().setting(5, ["rk": true])
        #expect(status(of: h.cbor(.getAssertion, request)) == .invalidOption)
        var d = try harness(.fidosim, pin: nil)
        #expect(status(of: d.cbor(.getAssertion, request)) == .unsupportedOption)
    }

    @Test(arguments: [6, 7, 9])
    func ctap20HasOnlyClientPINSubcommandsOneToFive(subcommand: Int) throws {
        var h = try harness(Self.ctap20)
        // CTAP2_ERR_INVALID_SUBCOMMAND is a CTAP 2.1 code.
        #expect(status(of: h.cbor(.clientPIN, [1: 1, 2: CBORValue(subcommand)])) == .invalidParameter)
        var d = try harness(.fidosim)
        #expect(status(of: d.cbor(.clientPIN, [1: 1, 2: 0x0F])) == .invalidSubcommand)
        #expect(status(of: try d.requestToken("1234", permissions: 1, version: 1).0) == .ok)
    }

    @Test func anUnsupportedPinProtocolIsPinAuthInvalidIn20() throws {
        var h = try harness(Self.ctap20)
        let token = try h.token("1234", permissions: nil, version: 1)
        let request = authorized(Request.makeCredential(), token, paramKey: 8).setting(9, 2)
        #expect(status(of: h.cbor(.makeCredential, request)) == .pinAuthInvalid)
        #expect(
            status(
                of: h.cbor(
                    .getAssertion,
                    Request.getAssertion().setting(6, .byteString(token.authenticate(Request.clientDataHash))).setting(
                        7,
                        3
                    )
                )
            ) == .pinAuthInvalid
        )
        var d = try harness(KeyProfile(name: "one", pinUvAuthProtocols: [1]))
        #expect(status(of: d.cbor(.makeCredential, request)) == .invalidParameter)
    }

    // MARK: FIDO_2_1_PRE

    @Test func ctap21PreAuthorisesPreviewCredentialManagementWithAGetPinToken() throws {
        var h = try harness(Self.ctap21pre)
        let token = try h.token("1234", permissions: nil, version: 1)
        #expect(credentialManagement(&h, .credentialManagementPreview, token) == .ok)
        // Without permissions: not spent by makeCredential, for any RP, again and again.
        #expect(makeCredential(&h, token) == .ok)
        #expect(makeCredential(&h, token, rpId: "other.example") == .ok)
        #expect(credentialManagement(&h, .credentialManagementPreview, token) == .ok)
        #expect(status(of: h.cbor(.credentialManagement, [1: 1])) == .invalidCommand)  // no 0x0A on a PRE key
        // The next getPinToken replaces it; a power cycle forgets it.
        let next = try h.token("1234", permissions: nil, version: 1)
        #expect(
            next.value != token.value
                && credentialManagement(&h, .credentialManagementPreview, token) == .pinAuthInvalid
        )
        h.authenticator.powerCycle(now: h.now)
        #expect(credentialManagement(&h, .credentialManagementPreview, next) == .pinAuthInvalid)
    }

    @Test func aPreviewKeyMayNameCredentialManagementCredMgmtAndServeItOn0x0AToo() throws {
        var solo = Self.ctap21pre
        solo.behaviour.previewCredentialManagement = .credMgmt
        var h = try harness(solo)
        let info = try responseMap(h.cbor(.getInfo))
        #expect(info[4]?["credMgmt"] == true && info[4]?["credentialMgmtPreview"] == nil)
        let token = try h.token("1234", permissions: nil, version: 1)
        #expect(credentialManagement(&h, .credentialManagement, token) == .ok)
        #expect(credentialManagement(&h, .credentialManagementPreview, token) == .ok)
        // The default preview key names it credentialMgmtPreview and has no 0x0A.
        var yubi = try harness(Self.ctap21pre)
        let named = try responseMap(yubi.cbor(.getInfo))
        #expect(named[4]?["credentialMgmtPreview"] == true && named[4]?["credMgmt"] == nil)
    }

    @Test(arguments: [false, true])
    func ctap21KeepsTheCredentialManagementPermission(previewAccepts: Bool) throws {
        var h = try harness(Self.profile { $0.previewAcceptsPinToken = previewAccepts })
        let token = try h.token("1234", permissions: nil, version: 1)
        #expect(
            credentialManagement(&h, .credentialManagementPreview, token) == (previewAccepts ? .ok : .pinAuthInvalid)
        )
        // 0x0A never takes a getPinToken token.
        #expect(credentialManagement(&h, .credentialManagement, token) == .pinAuthInvalid)
        let cm = try h.token("1234", permissions: 0x04, version: 1)
        #expect(credentialManagement(&h, .credentialManagement, cm) == .ok)
        #expect(credentialManagement(&h, .credentialManagementPreview, cm) == .ok)
    }

    // MARK: Choices

    /// Solo 1's clientPIN: no PIN protocol, another than its own, or an unknown subcommand is CTAP1_ERR_OTHER.
    @Test func clientPINErrorsAsSoloAnswersThem() throws {
        var solo = Self.ctap20
        solo.behaviour.clientPINErrors = .other
        var h = try harness(solo, pin: nil)
        #expect(status(of: h.cbor(.clientPIN, [2: 1])) == .other)
        #expect(status(of: h.cbor(.clientPIN, [1: 2, 2: 1])) == .other)
        #expect(status(of: h.cbor(.clientPIN, [1: 1, 2: 9])) == .other)
        #expect(status(of: h.cbor(.clientPIN, [1: 1, 2: 0])) == .other)
        #expect(status(of: h.cbor(.clientPIN, [1: 1, 2: 1])) == .ok)
        // CTAP's codes otherwise.
        var c = try harness(Self.ctap20, pin: nil)
        #expect(status(of: c.cbor(.clientPIN, [2: 1])) == .missingParameter)
        #expect(status(of: c.cbor(.clientPIN, [1: 1, 2: 9])) == .invalidParameter)
    }

    /// Solo 1's credential management with nothing stored: success with no data, metadata aside; once a
    /// credential is there, as CTAP says.
    @Test func credentialManagementWhenEmptyAsSoloAnswersIt() throws {
        var solo = Self.ctap21pre
        solo.behaviour.previewCredentialManagement = .credMgmt
        solo.behaviour.credentialManagementWhenEmpty = .emptySuccess
        var h = try harness(solo)
        let token = try h.token("1234", permissions: nil, version: 1)
        let begin: [CBORValue: CBORValue] = [
            1: 2, 3: CBORValue(token.version), 4: .byteString(token.authenticate([0x02])),
        ]
        #expect(h.cbor(.credentialManagement, begin) == .response([0x00]))
        #expect(h.cbor(.credentialManagement, [1: 3]) == .response([0x00]))
        #expect(credentialManagement(&h, .credentialManagement, token) == .ok)
        // A bad token is still refused first.
        let bad: [CBORValue: CBORValue] = [1: 2, 3: 1, 4: .byteString([UInt8](repeating: 0, count: 16))]
        #expect(status(of: h.cbor(.credentialManagement, bad)) == .pinAuthInvalid)
        var plain = try harness(Self.ctap21pre)
        let plainToken = try plain.token("1234", permissions: nil, version: 1)
        let plainBegin: [CBORValue: CBORValue] = [
            1: 2, 3: CBORValue(plainToken.version), 4: .byteString(plainToken.authenticate([0x02])),
        ]
        #expect(status(of: plain.cbor(.credentialManagementPreview, plainBegin)) == .noCredentials)
    }

    @Test func getPINRetriesWithoutAPIN() throws {
        var d = try harness(.fidosim, pin: nil)
        #expect(try d.pinRetries().retries == 8)
        var y = try harness(Self.profile { $0.pinRetriesWithoutPIN = .pinNotSet }, pin: nil)
        #expect(status(of: y.cbor(.clientPIN, [1: 2, 2: 1])) == .pinNotSet)
        #expect(status(of: try y.setPIN("1234", version: 1)) == .ok)
        #expect(try y.pinRetries().retries == 8)
    }

    @Test func getPINRetriesWithoutAPinProtocol() throws {
        // CTAP 2.1 made pinUvAuthProtocol optional for getPINRetries; CTAP 2.0 requires it in every subcommand.
        var d = try harness(.fidosim, pin: nil)
        #expect(status(of: d.cbor(.clientPIN, [2: 1])) == .ok)
        var c = try harness(Self.ctap20, pin: nil)
        #expect(status(of: c.cbor(.clientPIN, [2: 1])) == .missingParameter)
        #expect(status(of: c.cbor(.clientPIN, [1: 1, 2: 1])) == .ok)
        var r = try harness(Self.profile { $0.pinProtocolForRetries = .required }, pin: nil)
        #expect(status(of: r.cbor(.clientPIN, [2: 1])) == .missingParameter)
    }

    @Test func setPINOnAKeyWithAPIN() throws {
        var d = try harness(.fidosim)
        #expect(status(of: try d.setPIN("5678", version: 1)) == .pinAuthInvalid)
        var n = try harness(Self.profile { $0.setPINWhenSet = .notAllowed })
        #expect(status(of: try n.setPIN("5678", version: 1)) == .notAllowed)
    }
}
