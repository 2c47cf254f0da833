import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// A request that must fail before any touch, with the status it must fail with.
struct RejectedRequest: Sendable, CustomTestStringConvertible {
    var name: String
    var parameters: [CBORValue: CBORValue]
    var expected: CTAPStatus

    init(_ name: String, _ parameters: [CBORValue: CBORValue], _ expected: CTAPStatus) {
        self.name = name
        self.parameters = parameters
        self.expected = expected
    }

    var testDescription: String { name }
}

/// authenticatorMakeCredential (0x01): every way a request is refused before the user is asked.
@Suite struct MakeCredentialValidationTests {
    static let valid = Request.makeCredential()
    static let es256: CBORValue = ["alg": -7, "type": "public-key"]
    static let validId: [UInt8] = Array(repeating: 0x42, count: 16)

    static let missingCases: [RejectedRequest] = [
        .init("clientDataHash", valid.setting(1, nil), .missingParameter),
        .init("rp", valid.setting(2, nil), .missingParameter),
        .init("user", valid.setting(3, nil), .missingParameter),
        .init("pubKeyCredParams", valid.setting(4, nil), .missingParameter),
        .init("rp.id", valid.setting(2, ["name": "Example"]), .missingParameter),
        .init("user.id", valid.setting(3, ["name": "alice"]), .missingParameter),
        .init("alg of a param", valid.setting(4, [["type": "public-key"]]), .missingParameter),
        .init("type of a param", valid.setting(4, [["alg": -7]]), .missingParameter),
        .init("type of an earlier param", valid.setting(4, [["alg": -8], es256]), .missingParameter),
        .init("id of an excludeList entry", valid.setting(5, [["type": "public-key"]]), .missingParameter),
        .init("type of an excludeList entry", valid.setting(5, [["id": .byteString(validId)]]), .missingParameter),
    ]

    static let wrongTypeCases: [RejectedRequest] = [
        .init("clientDataHash as text", valid.setting(1, "hash"), .cborUnexpectedType),
        .init("clientDataHash as int", valid.setting(1, 32), .cborUnexpectedType),
        .init("rp as array", valid.setting(2, ["example.com"]), .cborUnexpectedType),
        .init("rp.id as bytes", valid.setting(2, ["id": .byteString([0x65])]), .cborUnexpectedType),
        .init("rp.name as int", valid.setting(2, ["id": "example.com", "name": 1]), .cborUnexpectedType),
        .init("user as bytes", valid.setting(3, .byteString(Request.userId)), .cborUnexpectedType),
        .init("user.id as text", valid.setting(3, ["id": "user-1"]), .cborUnexpectedType),
        .init(
            "user.name as int",
            valid.setting(3, ["id": .byteString(Request.userId), "name": 7]),
            .cborUnexpectedType
        ),
        .init(
            "user.displayName as bytes",
            valid.setting(3, ["id": .byteString(Request.userId), "displayName": .byteString([1])]),
            .cborUnexpectedType
        ),
        .init(
            "user.icon as bool",
            valid.setting(3, ["id": .byteString(Request.userId), "icon": true]),
            .cborUnexpectedType
        ),
        .init("pubKeyCredParams as map", valid.setting(4, es256), .cborUnexpectedType),
        .init("pubKeyCredParams entry as int", valid.setting(4, [-7]), .cborUnexpectedType),
        .init("alg as text", valid.setting(4, [["alg": "ES256", "type": "public-key"]]), .cborUnexpectedType),
        .init("param type as int", valid.setting(4, [["alg": -7, "type": 1]]), .cborUnexpectedType),
        .init("excludeList as map", valid.setting(5, Request.descriptor(validId)), .cborUnexpectedType),
        .init("excludeList entry as bytes", valid.setting(5, [.byteString(validId)]), .cborUnexpectedType),
        .init(
            "excludeList id as text",
            valid.setting(5, [["id": "abc", "type": "public-key"]]),
            .cborUnexpectedType
        ),
        .init("extensions as array", valid.setting(6, []), .cborUnexpectedType),
        .init("options as array", valid.setting(7, ["rk"]), .cborUnexpectedType),
        .init("options.rk as int", valid.setting(7, ["rk": 1]), .cborUnexpectedType),
        .init("options.up as text", valid.setting(7, ["up": "true"]), .cborUnexpectedType),
        .init("options.uv as null", valid.setting(7, ["uv": .null]), .cborUnexpectedType),
        .init("pinUvAuthParam as text", valid.setting(8, "pin"), .cborUnexpectedType),
        .init("pinUvAuthProtocol as text", valid.setting(9, "one"), .cborUnexpectedType),
        .init("enterpriseAttestation as bytes", valid.setting(10, .byteString([1])), .cborUnexpectedType),
        .init("attestationFormatsPreference as text", valid.setting(11, "none"), .cborUnexpectedType),
        .init("attestationFormatsPreference entry as int", valid.setting(11, [1]), .cborUnexpectedType),
    ]

    static let refusedCases: [RejectedRequest] = [
        .init("only ES256K offered", valid.setting(4, [["alg": -1000, "type": "public-key"]]), .unsupportedAlgorithm),
        .init("no algorithm offered", valid.setting(4, []), .unsupportedAlgorithm),
        .init(
            "ES256 with another type",
            valid.setting(4, [["alg": -7, "type": "secret-key"]]),
            .unsupportedAlgorithm
        ),
        .init("up=false", valid.setting(7, ["up": false]), .invalidOption),
        .init("uv=true", valid.setting(7, ["uv": true]), .invalidOption),
        .init("pinUvAuthParam without protocol", valid.setting(8, .byteString([1, 2, 3, 4])), .missingParameter),
        .init(
            "pinUvAuthParam with protocol 1",
            valid.setting(8, .byteString(Array(repeating: 7, count: 16))).setting(9, 1),
            .pinNotSet
        ),
        .init(
            "pinUvAuthParam with protocol 2",
            valid.setting(8, .byteString(Array(repeating: 7, count: 32))).setting(9, 2),
            .pinNotSet
        ),
        .init(
            "pinUvAuthParam with protocol 3",
            valid.setting(8, .byteString(Array(repeating: 7, count: 32))).setting(9, 3),
            .invalidParameter
        ),
        .init("enterpriseAttestation 1", valid.setting(10, 1), .invalidParameter),
        .init("enterpriseAttestation 2", valid.setting(10, 2), .invalidParameter),
        .init(
            "clientDataHash of 31 bytes",
            valid.setting(1, .byteString(Array(repeating: 1, count: 31))),
            .invalidLength
        ),
        .init(
            "clientDataHash of 33 bytes",
            valid.setting(1, .byteString(Array(repeating: 1, count: 33))),
            .invalidLength
        ),
        .init("empty clientDataHash", valid.setting(1, .byteString([])), .invalidLength),
        .init(
            "user.id of 65 bytes",
            valid.setting(3, Request.user(id: Array(repeating: 9, count: 65))),
            .invalidLength
        ),
    ]

    @Test(arguments: missingCases)
    func missingParameter(_ request: RejectedRequest) throws {
        try expectRejected(request)
    }

    @Test(arguments: wrongTypeCases)
    func wrongType(_ request: RejectedRequest) throws {
        try expectRejected(request)
    }

    @Test(arguments: refusedCases)
    func refusedRequest(_ request: RejectedRequest) throws {
        try expectRejected(request)
    }

    private func expectRejected(_ request: RejectedRequest) throws {
        var harness = try Harness()
        let outcome = harness.cbor(.makeCredential, request.parameters)
        #expect(outcome == .response([request.expected.rawValue]))
        #expect(harness.authenticator.pendingPrompt == nil)
        #expect(harness.signCounter == 0)
    }

    @Test func theValidRequestOfTheseTablesIsAccepted() throws {
        var harness = try Harness()
        #expect(status(of: harness.approve(harness.cbor(.makeCredential, Self.valid))) == .ok)
    }

    @Test func noParametersIsMissingParameter() throws {
        var harness = try Harness()
        #expect(harness.cbor(raw: [0x01]) == .response([0x14]))
    }

    @Test func userIdOf64BytesIsAccepted() throws {
        var harness = try Harness()
        let outcome = harness.cbor(
            .makeCredential,
            Self.valid.setting(3, Request.user(id: Array(repeating: 9, count: 64)))
        )
        #expect(needsPresence(outcome))
    }

    @Test func unknownOptionsAreIgnored() throws {
        var harness = try Harness()
        let parameters = Self.valid.setting(7, ["future": 7, "plat": "x", "up": true, "uv": false, "rk": false])
        #expect(status(of: harness.approve(harness.cbor(.makeCredential, parameters))) == .ok)
    }

    @Test func unsupportedAlgorithmsNextToES256AreIgnored() throws {
        var harness = try Harness()
        let parameters = Self.valid.setting(
            4,
            [["alg": -1000, "type": "public-key"], ["alg": -8, "type": "x"], Self.es256]
        )
        #expect(status(of: harness.approve(harness.cbor(.makeCredential, parameters))) == .ok)
    }

    @Test func zeroLengthPinUvAuthParamAsksForATouchThenSaysPINNotSet() throws {
        var harness = try Harness()
        // The probe needs no other parameter.
        let outcome = harness.cbor(.makeCredential, [8: .byteString([]), 9: 1])
        #expect(needsPresence(outcome))
        #expect(harness.resume(.approved) == .response([0x35]))
        #expect(harness.signCounter == 0)
    }

    // MARK: Bytes that are not a request map

    static let notCBORCases: [(String, [UInt8])] = {
        let good = CBORValue.map(Request.makeCredential()).encoded()
        return [
            ("a lone break", [0xFF]),
            ("reserved additional info", [0xBC]),
            ("ASCII text", Array("hello".utf8)),
            ("truncated by one byte", Array(good.dropLast())),
            ("truncated to the map head", Array(good.prefix(1))),
            ("a trailing byte", good + [0x00]),
            ("an indefinite-length map", [0xBF, 0x01, 0x02, 0xFF]),
            ("a duplicate key", [0xA2, 0x01, 0x00, 0x01, 0x00]),
            ("a float", [0xA1, 0x01, 0xF9, 0x3C, 0x00]),
            ("a tag", [0xA1, 0x01, 0xC0, 0x00]),
            ("a non-minimal integer", [0xA1, 0x18, 0x01, 0x00]),
            ("invalid UTF-8", [0xA1, 0x01, 0x61, 0xFF]),
            (
                "nested deeper than 4",
                CBORValue.map(Request.makeCredential().setting(6, ["x": [[[1]]]])).encoded()
            ),
        ]
    }()

    @Test(arguments: notCBORCases)
    func bytesThatAreNotCanonicalCTAPCBORAreInvalidCBOR(name: String, parameters: [UInt8]) throws {
        var harness = try Harness()
        #expect(harness.cbor(raw: [0x01] + parameters) == .response([0x12]))
    }

    @Test func nestingOfExactlyFourIsAccepted() throws {
        var harness = try Harness()
        let outcome = harness.cbor(.makeCredential, Request.makeCredential().setting(6, ["x": [[1]]]))
        #expect(needsPresence(outcome))
    }

    @Test(
        arguments: [
            ("an array", CBORValue.array([1, 2])),
            ("a text string", "makeCredential"),
            ("an integer", 1),
            ("a byte string", .byteString([1, 2, 3])),
            ("null", .null),
        ] as [(String, CBORValue)]
    )
    func parametersThatAreNotAMapAreUnexpectedType(name: String, value: CBORValue) throws {
        var harness = try Harness()
        #expect(harness.cbor(raw: [0x01] + value.encoded()) == .response([0x11]))
        #expect(harness.cbor(raw: [0x02] + value.encoded()) == .response([0x11]))
    }
}
