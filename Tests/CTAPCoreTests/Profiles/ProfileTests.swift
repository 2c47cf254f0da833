import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

@Suite struct ProfileTests {
    static let ctap20 = KeyProfile(
        name: "ctap20",
        versions: ["U2F_V2", "FIDO_2_0"],
        extensions: ["hmac-secret"],
        pinUvAuthProtocols: [1],
        algorithms: [.es256]
    )

    func harness(_ profile: KeyProfile) throws -> Harness {
        var configuration = Harness.configuration
        configuration.profile = profile
        return try Harness(configuration: configuration)
    }

    @Test func withoutThePreviewVersionThePreviewOptionsAreNotOffered() throws {
        var h = try harness(KeyProfile(name: "no-preview", versions: ["U2F_V2", "FIDO_2_0", "FIDO_2_1"]))
        let info = try responseMap(h.cbor(.getInfo))
        #expect(info[4]?["credentialMgmtPreview"] == nil && info[4]?["userVerificationMgmtPreview"] == nil)
        #expect(info[4]?["credMgmt"] == true)
        #expect(responseBytes(h.cbor(raw: [0x41, 0xA1, 0x01, 0x01])) == [CTAPStatus.invalidCommand.rawValue])
    }

    @Test func aCTAP20ProfileNarrowsGetInfo() throws {
        var h = try harness(Self.ctap20)
        let info = try responseMap(h.cbor(.getInfo))
        #expect(info[1] == ["U2F_V2", "FIDO_2_0"])
        #expect(info[2] == ["hmac-secret"])
        #expect(info[6] == [1])
        #expect(Set((info.mapValue ?? [:]).keys.compactMap { $0.intValue }).isSubset(of: Set(1...8)))
        let options = try #require(info[4]?.mapValue)
        #expect(Set(options.keys.compactMap(\.textValue)) == ["rk", "up", "plat", "clientPin"])
    }

    @Test(arguments: [CTAPCommand.credentialManagement, .selection, .largeBlobs, .config, .credentialManagementPreview])
    func ctap21CommandsDoNotExistOnACTAP20Key(command: CTAPCommand) throws {
        var h = try harness(Self.ctap20)
        #expect(status(of: h.cbor(command, [:])) == .invalidCommand)
    }

    @Test func aMissingAlgorithmIsNeverChosenAndAMissingProtocolIsRefused() throws {
        var h = try harness(Self.ctap20)
        var request = Request.makeCredential()
        request[4] = [["alg": -8, "type": "public-key"]]
        #expect(status(of: h.cbor(.makeCredential, request)) == .unsupportedAlgorithm)
        // getKeyAgreement, protocol 2: CTAP 2.0 answers PIN_AUTH_INVALID for a protocol it lacks (2.1: INVALID_PARAMETER).
        #expect(status(of: h.cbor(.clientPIN, [1: 2, 2: 2])) == .pinAuthInvalid)
        #expect(status(of: h.cbor(.clientPIN, [1: 1, 2: 2])) == .ok)
    }

    @Test func anExtensionTheProfileLacksIsIgnored() throws {
        var h = try harness(Self.ctap20)
        var request = Request.makeCredential()
        request[6] = ["credProtect": 3, "hmac-secret": true]
        let made = try h.register(request)
        #expect(made.authData.extensions?["hmac-secret"] == true)
        #expect(made.authData.extensions?["credProtect"] == nil)
    }

    @Test func quirks() throws {
        var h = try harness(
            KeyProfile(
                name: "quirky",
                maxCredentialCountInList: 1,
                dropsDisplayName: true,
                forcedStatus: [0x0B: 0x2E],
                rejectsLargeLists: true
            )
        )
        #expect(status(of: h.cbor(.selection)) == .noCredentials)  // 0x2E forced
        _ = try h.register(Request.makeCredential(rk: true))
        #expect(h.residentCredentials.first?.user.displayName == nil)
        #expect(h.residentCredentials.first?.user.name == "alice")
        var request = Request.makeCredential()
        request[5] = [Request.descriptor([1]), Request.descriptor([2])]
        #expect(status(of: h.cbor(.makeCredential, request)) == .limitExceeded)
        let info = try responseMap(h.cbor(.getInfo))
        #expect(info[7] == 1)
    }

    @Test func theDefaultProfileChangesNothing() throws {
        var h = try Harness()
        let info = try responseMap(h.cbor(.getInfo))
        #expect(info[1] == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1", "FIDO_2_3"])
        #expect(KeyProfile.fidosim.problem == nil)
        #expect(KeyProfile(versions: ["FIDO_2_1"]).problem != nil)
    }

    /// A profile may say a larger maxCredentialIdLength than its ids need (solo 1 says 128), never a smaller one.
    @Test func maxCredentialIdLengthFromTheProfile() throws {
        var solo = KeyProfile(name: "solo", algorithms: [.es256])
        solo.maxCredentialIdLength = 128
        #expect(solo.problem == nil)
        var h = try harness(solo)
        #expect(try responseMap(h.cbor(.getInfo))[8] == 128)
        var plain = try Harness()
        #expect(try responseMap(plain.cbor(.getInfo))[8] != 128)
        solo.maxCredentialIdLength = 62
        #expect(solo.problem?.contains("63 to 1024") == true)
    }
}
