import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing

/// The extensions credProtect, hmac-secret, credBlob, largeBlobKey and minPinLength (CTAP 2.1 §12).
@Suite struct ExtensionTests {
    func withExtensions(
        _ request: [CBORValue: CBORValue],
        _ extensions: [CBORValue: CBORValue],
        key: Int = 6
    )
        -> [CBORValue: CBORValue]
    {
        request.setting(key, .map(extensions))
    }

    /// A key with PIN "1234".
    func keyWithPIN(_ profile: KeyProfile = .fidosim) throws -> Harness {
        var configuration = Harness.configuration
        configuration.profile = profile
        var harness = try Harness(configuration: configuration)
        #expect(status(of: try harness.setPIN("1234")) == .ok)
        return harness
    }

    /// Makes a credential with a token (mc) and the given extensions.
    func register(
        _ harness: inout Harness,
        rk: Bool,
        extensions: [CBORValue: CBORValue],
        user: CBORValue = Request.user()
    ) throws -> Registration {
        let token = try harness.token("1234", permissions: 0x01)
        let request = authorized(
            withExtensions(Request.makeCredential(user: user, rk: rk), extensions),
            token,
            paramKey: 8
        )
        return try Registration(responseMap(harness.approve(harness.cbor(.makeCredential, request))))
    }

    /// getAssertion with a fresh ga token (UV) or without one.
    func assert(
        _ harness: inout Harness,
        uv: Bool,
        allowList: [[UInt8]]? = nil,
        extensions: [CBORValue: CBORValue]? = nil
    ) throws -> AuthenticatorOutcome {
        var request = Request.getAssertion(allowList: allowList)
        if let extensions { request[4] = .map(extensions) }
        if uv { request = authorized(request, try harness.token("1234", permissions: 0x02), paramKey: 6) }
        let outcome = harness.cbor(.getAssertion, request)
        return needsPresence(outcome) ? harness.resume(.approved) : outcome
    }

    // MARK: credProtect

    @Test func credProtectIsReportedOnlyWhenRequested() throws {
        var harness = try keyWithPIN()
        let plain = try register(&harness, rk: true, extensions: [:])
        #expect(plain.authData.extensions == nil)
        let protected = try register(
            &harness,
            rk: true,
            extensions: ["credProtect": 2],
            user: Request.user(id: [2])
        )
        #expect(protected.authData.extensions == ["credProtect": 2])
        #expect(protected.authData.flags & ParsedAuthData.extensionData != 0)
    }

    @Test func level2HidesDiscoverableCredentialsWithoutUVUnlessListed() throws {
        var harness = try keyWithPIN()
        let registration = try register(&harness, rk: true, extensions: ["credProtect": 2])
        #expect(status(of: try assert(&harness, uv: false)) == .noCredentials)
        #expect(status(of: try assert(&harness, uv: false, allowList: [registration.credentialId])) == .ok)
        let found = try Assertion(responseMap(try assert(&harness, uv: true)))
        #expect(found.credentialId == registration.credentialId)
    }

    @Test(arguments: [true, false])
    func level3NeedsUVEverywhere(resident: Bool) throws {
        var harness = try keyWithPIN()
        let registration = try register(&harness, rk: resident, extensions: ["credProtect": 3])
        let id = registration.credentialId
        #expect(status(of: try assert(&harness, uv: false, allowList: [id])) == .noCredentials)
        if resident { #expect(status(of: try assert(&harness, uv: false)) == .noCredentials) }
        let found = try Assertion(responseMap(try assert(&harness, uv: true, allowList: [id])))
        #expect(found.verifies(with: registration.publicKey))
        // Without UV an exclude list does not reveal it either; with UV it does.
        let exclude = Request.makeCredential(user: Request.user(id: [7]), excludeList: [id])
        let made = harness.approve(harness.cbor(.makeCredential, exclude))
        #expect(status(of: made) == .ok)
        let token = try harness.token("1234", permissions: 0x01)
        let excluded = harness.cbor(.makeCredential, authorized(exclude, token, paramKey: 8))
        #expect(status(of: harness.approve(excluded)) == .credentialExcluded)
        // U2F cannot verify the user: the key handle is not usable there.
        let apdu = U2FRequest.authenticate(p1: 0x07, keyHandle: id, application: sha256(Request.rpId))
        #expect(statusWord(of: harness.u2f(apdu)) == 0x6A80)
    }

    @Test func aCredProtectOutOfRangeIsRefused() throws {
        var harness = try Harness()
        for bad: CBORValue in [0, 4, -1] {
            let request = withExtensions(Request.makeCredential(), ["credProtect": bad])
            #expect(status(of: harness.cbor(.makeCredential, request)) == .invalidParameter)
        }
        let typed = withExtensions(Request.makeCredential(), ["credProtect": "3"])
        #expect(status(of: harness.cbor(.makeCredential, typed)) == .cborUnexpectedType)
    }

    @Test func unknownExtensionsAreIgnored() throws {
        var harness = try Harness()
        let request = withExtensions(Request.makeCredential(), ["example.future": ["a": 1], "uvm": true])
        let registration = try harness.register(request)
        #expect(registration.authData.extensions == nil)
    }

    // MARK: hmac-secret

    /// The hmac-secret input for `salts` under a fresh key agreement, and the platform that can decrypt it.
    func hmacSecretInput(
        _ harness: inout Harness,
        salts: [UInt8],
        version: Int = 2
    ) throws -> ([CBORValue: CBORValue], PinPlatform) {
        let platform = try PinPlatform(&harness, version: version)
        let saltEnc = try platform.encrypt(salts)
        var input: [CBORValue: CBORValue] = [
            1: platform.keyAgreement, 2: .byteString(saltEnc), 3: .byteString(platform.authenticate(saltEnc)),
        ]
        if version != 1 { input[4] = CBORValue(version) }
        return (["hmac-secret": .map(input)], platform)
    }

    func hmacOutput(_ outcome: AuthenticatorOutcome, _ platform: PinPlatform) throws -> [UInt8] {
        let assertion = try Assertion(responseMap(outcome))
        let encrypted = try #require(assertion.authData.extensions?["hmac-secret"]?.bytesValue)
        return try platform.decrypt(encrypted)
    }

    @Test(arguments: [1, 2])
    func hmacSecretIsStablePerSaltAndDiffersWithUV(version: Int) throws {
        var harness = try keyWithPIN()
        let registration = try register(&harness, rk: false, extensions: ["hmac-secret": true])
        #expect(registration.authData.extensions == ["hmac-secret": true])
        let id = [registration.credentialId]
        let salt1 = [UInt8](repeating: 0x11, count: 32)
        let salt2 = [UInt8](repeating: 0x22, count: 32)

        var (input, platform) = try hmacSecretInput(&harness, salts: salt1, version: version)
        let first = try hmacOutput(try assert(&harness, uv: false, allowList: id, extensions: input), platform)
        (input, platform) = try hmacSecretInput(&harness, salts: salt1, version: version)
        let again = try hmacOutput(try assert(&harness, uv: false, allowList: id, extensions: input), platform)
        #expect(first.count == 32 && first == again)

        (input, platform) = try hmacSecretInput(&harness, salts: salt1 + salt2, version: version)
        let both = try hmacOutput(try assert(&harness, uv: false, allowList: id, extensions: input), platform)
        #expect(both.count == 64 && Array(both.prefix(32)) == first && Array(both.suffix(32)) != first)

        (input, platform) = try hmacSecretInput(&harness, salts: salt1, version: version)
        let verified = try hmacOutput(try assert(&harness, uv: true, allowList: id, extensions: input), platform)
        #expect(verified.count == 32 && verified != first)
    }

    @Test func hmacSecretOutputsAreTheSameWithEitherProtocol() throws {
        var harness = try keyWithPIN()
        let registration = try register(&harness, rk: true, extensions: ["hmac-secret": true])
        let salt = [UInt8](repeating: 0x5A, count: 32)
        var outputs: [[UInt8]] = []
        for version in [1, 2] {
            let (input, platform) = try hmacSecretInput(&harness, salts: salt, version: version)
            outputs.append(try hmacOutput(try assert(&harness, uv: false, extensions: input), platform))
        }
        #expect(outputs[0] == outputs[1])
        _ = registration
    }

    /// A salt of the wrong size: INVALID_PARAMETER after decryption (CTAP 2.1 §12.5), or INVALID_LENGTH on the
    /// wire before the MAC is checked, where a profile chooses so (solo 1, canokey).
    @Test(arguments: [1, 2])
    func aSaltOfTheWrongSizeIsCaughtWhereTheProfileSays(version: Int) throws {
        var onTheWire = KeyProfile.fidosim
        onTheWire.behaviour.saltLength = .onTheWire
        for (profile, expected) in [(KeyProfile.fidosim, CTAPStatus.invalidParameter), (onTheWire, .invalidLength)] {
            var harness = try keyWithPIN(profile)
            let id = [try register(&harness, rk: false, extensions: ["hmac-secret": true]).credentialId]
            var (input, _) = try hmacSecretInput(&harness, salts: [UInt8](repeating: 1, count: 48), version: version)
            #expect(status(of: try assert(&harness, uv: false, allowList: id, extensions: input)) == expected)
            // A bad MAC on a bad size: the wire check comes first.
            var map = try #require(input["hmac-secret"]?.mapValue)
            map[3] = .byteString([UInt8](repeating: 0, count: version == 1 ? 16 : 32))
            input = ["hmac-secret": .map(map)]
            let badBoth = status(of: try assert(&harness, uv: false, allowList: id, extensions: input))
            #expect(badBoth == (expected == .invalidLength ? .invalidLength : .pinAuthInvalid))
            // The right size works under either choice.
            (input, _) = try hmacSecretInput(&harness, salts: [UInt8](repeating: 1, count: 32), version: version)
            #expect(status(of: try assert(&harness, uv: false, allowList: id, extensions: input)) == .ok)
        }
    }

    @Test func hmacSecretErrors() throws {
        var harness = try keyWithPIN()
        let registration = try register(&harness, rk: false, extensions: ["hmac-secret": true])
        let id = [registration.credentialId]
        var (input, _) = try hmacSecretInput(&harness, salts: [UInt8](repeating: 1, count: 32))
        var map = try #require(input["hmac-secret"]?.mapValue)
        var saltAuth = try #require(map[3]?.bytesValue)
        saltAuth[0] ^= 1
        map[3] = .byteString(saltAuth)
        #expect(
            status(of: try assert(&harness, uv: false, allowList: id, extensions: ["hmac-secret": .map(map)]))
                == .pinAuthInvalid
        )
        (input, _) = try hmacSecretInput(&harness, salts: [UInt8](repeating: 1, count: 48))
        #expect(status(of: try assert(&harness, uv: false, allowList: id, extensions: input)) == .invalidParameter)
        (input, _) = try hmacSecretInput(&harness, salts: [UInt8](repeating: 1, count: 32))
        let silent = Request.getAssertion(allowList: id, up: false).setting(4, .map(input))
        #expect(status(of: harness.cbor(.getAssertion, silent)) == .unsupportedOption)
        let missing: [CBORValue: CBORValue] = ["hmac-secret": .map([1: try #require(input["hmac-secret"]?[1])])]
        #expect(status(of: try assert(&harness, uv: false, allowList: id, extensions: missing)) == .missingParameter)
    }

    @Test func noHmacSecretOutputForACredentialMadeWithoutIt() throws {
        var harness = try keyWithPIN()
        let registration = try register(&harness, rk: false, extensions: [:])
        let (input, _) = try hmacSecretInput(&harness, salts: [UInt8](repeating: 1, count: 32))
        let outcome = try assert(&harness, uv: false, allowList: [registration.credentialId], extensions: input)
        #expect(try Assertion(responseMap(outcome)).authData.extensions == nil)
    }

    // MARK: credBlob

    @Test func credBlobIsStoredWithDiscoverableCredentials() throws {
        var harness = try keyWithPIN()
        let blob = Array("a small blob for the relying party".utf8.prefix(32))
        let stored = try register(&harness, rk: true, extensions: ["credBlob": .byteString(blob)])
        #expect(stored.authData.extensions == ["credBlob": true])
        let assertion = try Assertion(responseMap(try assert(&harness, uv: false, extensions: ["credBlob": true])))
        #expect(assertion.authData.extensions == ["credBlob": .byteString(blob)])
        let tooLong = try register(
            &harness,
            rk: true,
            extensions: ["credBlob": .byteString([UInt8](repeating: 1, count: 33))],
            user: Request.user(id: [3])
        )
        #expect(tooLong.authData.extensions == ["credBlob": false])
        let nonResident = try register(&harness, rk: false, extensions: ["credBlob": .byteString([1])])
        #expect(nonResident.authData.extensions == ["credBlob": false])
        let none = try Assertion(
            responseMap(
                try assert(&harness, uv: false, allowList: [nonResident.credentialId], extensions: ["credBlob": true])
            )
        )
        #expect(none.authData.extensions == ["credBlob": .byteString([])])
    }

    /// A profile that keeps a non-discoverable credential's credBlob in its id (OpenSK): stored, returned, bound to
    /// the id (a tampered id opens for nothing), and getInfo's maxCredentialIdLength covers the longest.
    @Test func aProfileKeepsANonDiscoverableCredentialsBlobInItsId() throws {
        var openSKLike = KeyProfile.fidosim
        openSKLike.behaviour.credBlobNonDiscoverable = .inCredentialId
        var harness = try keyWithPIN(openSKLike)
        let blob = [UInt8](repeating: 0xB1, count: 32)
        let made = try register(&harness, rk: false, extensions: ["credBlob": .byteString(blob)])
        #expect(made.authData.extensions == ["credBlob": true])
        let plainId = try register(&harness, rk: false, extensions: [:]).credentialId
        #expect(made.credentialId.count == plainId.count + 33)
        let info = try responseMap(harness.cbor(.getInfo))
        #expect(info[0x08]?.intValue.map { made.credentialId.count <= $0 } == true)
        let back = try Assertion(
            responseMap(try assert(&harness, uv: false, allowList: [made.credentialId], extensions: ["credBlob": true]))
        )
        #expect(back.authData.extensions == ["credBlob": .byteString(blob)])
        // An empty blob is kept as one; a blob over 32 bytes is not kept.
        let empty = try register(&harness, rk: false, extensions: ["credBlob": .byteString([])])
        #expect(empty.authData.extensions == ["credBlob": true])
        let tooLong = try register(
            &harness,
            rk: false,
            extensions: ["credBlob": .byteString([UInt8](repeating: 1, count: 33))]
        )
        #expect(tooLong.authData.extensions == ["credBlob": false])
        var tampered = made.credentialId
        tampered[tampered.count - 20] ^= 1
        #expect(status(of: try assert(&harness, uv: false, allowList: [tampered])) == .noCredentials)
        // The default keeps none, and its ids stay as long as before.
        var plain = try keyWithPIN()
        let notKept = try register(&plain, rk: false, extensions: ["credBlob": .byteString(blob)])
        #expect(notKept.authData.extensions == ["credBlob": false] && notKept.credentialId.count == plainId.count)
        let plainInfo = try responseMap(plain.cbor(.getInfo))
        #expect(plainInfo[0x08]?.intValue == (info[0x08]?.intValue).map { $0 - 33 })
    }

    // MARK: largeBlobKey

    @Test func largeBlobKeyComesBackInMakeCredentialAndGetAssertion() throws {
        var harness = try keyWithPIN()
        let registration = try register(&harness, rk: true, extensions: ["largeBlobKey": true])
        let key = try #require(registration.response[5]?.bytesValue)
        #expect(key.count == 32)
        #expect(registration.authData.extensions == nil)
        let assertion = try Assertion(responseMap(try assert(&harness, uv: false, extensions: ["largeBlobKey": true])))
        #expect(assertion.response[7] == .byteString(key))
        let without = try Assertion(responseMap(try assert(&harness, uv: false)))
        #expect(without.response[7] == nil)
    }

    @Test func largeBlobKeyNeedsADiscoverableCredentialAndTrue() throws {
        var harness = try Harness()
        let nonResident = withExtensions(Request.makeCredential(), ["largeBlobKey": true])
        #expect(status(of: harness.cbor(.makeCredential, nonResident)) == .invalidOption)
        let falseInput = withExtensions(Request.makeCredential(rk: true), ["largeBlobKey": false])
        #expect(status(of: harness.cbor(.makeCredential, falseInput)) == .invalidOption)
        let gaFalse = Request.getAssertion().setting(4, ["largeBlobKey": false])
        #expect(status(of: harness.cbor(.getAssertion, gaFalse)) == .invalidOption)
    }

    // MARK: minPinLength

    @Test func minPinLengthOnlyForListedRPs() throws {
        var configuration = Harness.configuration
        configuration.minPinLengthRPIDs = ["example.com"]
        var harness = try Harness(configuration: configuration)
        let listed = try harness.register(withExtensions(Request.makeCredential(), ["minPinLength": true]))
        #expect(listed.authData.extensions == ["minPinLength": 4])
        let other = try harness.register(
            withExtensions(Request.makeCredential(rpId: "other.example"), ["minPinLength": true])
        )
        #expect(other.authData.extensions == nil)
    }

    @Test func severalOutputsAreOneCanonicalMap() throws {
        var configuration = Harness.configuration
        configuration.minPinLengthRPIDs = ["example.com"]
        var harness = try Harness(configuration: configuration)
        _ = try harness.setPIN("1234")
        let registration = try register(
            &harness,
            rk: true,
            extensions: [
                "credProtect": 1, "hmac-secret": true, "credBlob": .byteString([1, 2]), "minPinLength": true,
                "largeBlobKey": true,
            ]
        )
        #expect(
            registration.authData.extensions
                == ["credBlob": true, "credProtect": 1, "hmac-secret": true, "minPinLength": 4]
        )
    }
}
