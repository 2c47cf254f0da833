import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing

/// authenticatorGetAssertion (0x02).
@Suite struct GetAssertionTests {
    static let valid = Request.getAssertion()

    @Test(arguments: [
        RejectedRequest("missing rpId", valid.setting(1, nil), .missingParameter),
        RejectedRequest("missing clientDataHash", valid.setting(2, nil), .missingParameter),
        RejectedRequest("rpId as bytes", valid.setting(1, .byteString([0x65])), .cborUnexpectedType),
        RejectedRequest("clientDataHash as text", valid.setting(2, "hash"), .cborUnexpectedType),
        RejectedRequest("allowList as map", valid.setting(3, Request.descriptor([1])), .cborUnexpectedType),
        RejectedRequest("allowList entry without id", valid.setting(3, [["type": "public-key"]]), .missingParameter),
        RejectedRequest("extensions as int", valid.setting(4, 1), .cborUnexpectedType),
        RejectedRequest("options.up as int", valid.setting(5, ["up": 0]), .cborUnexpectedType),
        RejectedRequest("rk=true", valid.setting(5, ["rk": true]), .unsupportedOption),
        RejectedRequest("rk=false", valid.setting(5, ["rk": false]), .unsupportedOption),
        RejectedRequest("uv=true", valid.setting(5, ["uv": true]), .invalidOption),
        RejectedRequest("pinUvAuthParam without protocol", valid.setting(6, .byteString([1, 2])), .missingParameter),
        RejectedRequest(
            "pinUvAuthParam with protocol",
            valid.setting(6, .byteString([1, 2])).setting(7, 1),
            .pinNotSet
        ),
        RejectedRequest(
            "pinUvAuthParam with protocol 3",
            valid.setting(6, .byteString([1, 2])).setting(7, 3),
            .invalidParameter
        ),
        RejectedRequest(
            "clientDataHash of 31 bytes",
            valid.setting(2, .byteString(Array(repeating: 1, count: 31))),
            .invalidLength
        ),
        RejectedRequest("no credentials", valid, .noCredentials),
    ])
    func rejected(_ request: RejectedRequest) throws {
        var harness = try Harness()
        // A credential of another relying party is there, and must not help.
        _ = try harness.register(Request.makeCredential(rpId: "example.org", rk: true))
        #expect(harness.cbor(.getAssertion, request.parameters) == .response([request.expected.rawValue]))
        #expect(harness.authenticator.pendingPrompt == nil)
    }

    @Test func zeroLengthPinUvAuthParamAsksForATouchThenSaysPINNotSet() throws {
        var harness = try Harness()
        #expect(harness.approve(harness.cbor(.getAssertion, [6: .byteString([]), 7: 1])) == .response([0x35]))
    }

    @Test func assertionWithAnAllowListVerifies() throws {
        var harness = try Harness()
        let registration = try harness.register()
        let outcome = harness.cbor(.getAssertion, Request.getAssertion(allowList: [registration.credentialId]))
        #expect(outcome == .needsUserPresence(PresencePrompt(command: "getAssertion", rpId: "example.com")))
        let assertion = try Assertion(responseMap(harness.resume(.approved)))
        #expect(assertion.credentialId == registration.credentialId)
        #expect(assertion.response[1] == ["id": .byteString(registration.credentialId), "type": "public-key"])
        #expect(assertion.authData.rpIdHash == sha256("example.com"))
        #expect(assertion.authData.flags == ParsedAuthData.userPresent)
        #expect(assertion.authData.counter == 2)
        #expect(assertion.verifies(with: registration.publicKey))
        #expect(!assertion.verifies(with: registration.publicKey, clientDataHash: Array(repeating: 0, count: 32)))
        // Non-discoverable: no user, no count.
        #expect(assertion.response.mapValue.map { Set($0.keys) } == [1, 2, 3])
    }

    @Test func firstCredentialOfTheAllowListThatOpensIsUsed() throws {
        var harness = try Harness()
        let first = try harness.register(Request.makeCredential(user: Request.user(id: [1])))
        let second = try harness.register(Request.makeCredential(user: Request.user(id: [2])))
        let assertion = try harness.getAssertion(
            Request.getAssertion(allowList: [[0xAA], second.credentialId, first.credentialId])
        )
        #expect(assertion.credentialId == second.credentialId)
        #expect(assertion.verifies(with: second.publicKey))
    }

    @Test func upFalseSignsWithoutATouchAndWithoutTheUPFlag() throws {
        var harness = try Harness()
        let registration = try harness.register()
        let outcome = harness.cbor(
            .getAssertion,
            Request.getAssertion(allowList: [registration.credentialId], up: false)
        )
        #expect(!needsPresence(outcome))
        #expect(harness.authenticator.pendingPrompt == nil)
        let assertion = try Assertion(responseMap(outcome))
        #expect(assertion.authData.flags == 0x00)
        #expect(assertion.authData.counter == 2)
        #expect(assertion.verifies(with: registration.publicKey))
    }

    @Test func upTrueIsTheDefault() throws {
        var harness = try Harness()
        let registration = try harness.register()
        let outcome = harness.cbor(
            .getAssertion,
            Request.getAssertion(allowList: [registration.credentialId], up: true)
        )
        let assertion = try Assertion(responseMap(harness.approve(outcome)))
        #expect(assertion.authData.flags == ParsedAuthData.userPresent)
    }

    // MARK: Ids that are not credentials of this key for this relying party

    enum BadID: Sendable, CustomTestStringConvertible {
        case tampered(at: Int)
        case truncated
        case extended
        case empty
        case foreign
        case otherRelyingParty
        case otherType

        var testDescription: String {
            switch self {
            case .tampered(let index): "tampered at byte \(index)"
            case .truncated: "truncated"
            case .extended: "one byte longer"
            case .empty: "empty"
            case .foreign: "made by another authenticator"
            case .otherRelyingParty: "made for another relying party"
            case .otherType: "listed with another type"
            }
        }
    }

    @Test(arguments: [
        BadID.tampered(at: 0), .tampered(at: 1), .tampered(at: 12), .tampered(at: 13), .tampered(at: 30),
        .tampered(at: 46), .tampered(at: 47), .tampered(at: 62), .truncated, .extended, .empty, .foreign,
        .otherRelyingParty, .otherType,
    ])
    func idThatIsNotACredentialHereIsNoCredentials(_ bad: BadID) throws {
        var harness = try Harness()
        let registration = try harness.register()
        var id = registration.credentialId
        var type = "public-key"
        switch bad {
        case .tampered(let index): id[index] ^= 0x01
        case .truncated: id.removeLast()
        case .extended: id.append(0)
        case .empty: id = []
        case .foreign:
            // Same seed, so the same nonce and key: only the device secret differs.
            var foreign = try Harness(deviceSecret: Harness.foreignSecret)
            id = try foreign.register().credentialId
        case .otherRelyingParty: id = try harness.register(Request.makeCredential(rpId: "example.org")).credentialId
        case .otherType: type = "other"
        }
        let parameters = Request.getAssertion().setting(3, [Request.descriptor(id, type: type)])
        #expect(harness.cbor(.getAssertion, parameters) == .response([0x2E]))
        #expect(harness.cbor(.getAssertion, parameters.setting(5, ["up": false])) == .response([0x2E]))
        // The genuine id still works, so only the damage made the difference.
        let genuine = Request.getAssertion(allowList: [registration.credentialId], up: false)
        #expect(try Assertion(responseMap(harness.cbor(.getAssertion, genuine))).verifies(with: registration.publicKey))
    }

    @Test func emptyAllowListLooksForDiscoverableCredentials() throws {
        var harness = try Harness()
        _ = try harness.register()
        #expect(harness.cbor(.getAssertion, Request.getAssertion(allowList: [])) == .response([0x2E]))
        let resident = try harness.register(Request.makeCredential(rk: true))
        let assertion = try harness.getAssertion(Request.getAssertion(allowList: []))
        #expect(assertion.credentialId == resident.credentialId)
    }

    @Test func replacedDiscoverableCredentialIdNoLongerWorks() throws {
        var harness = try Harness()
        let old = try harness.register(Request.makeCredential(rk: true))
        #expect(needsPresence(harness.cbor(.getAssertion, Request.getAssertion(allowList: [old.credentialId]))))
        let new = try harness.register(Request.makeCredential(rk: true))
        #expect(harness.cbor(.getAssertion, Request.getAssertion(allowList: [old.credentialId])) == .response([0x2E]))
        let assertion = try harness.getAssertion(Request.getAssertion(allowList: [old.credentialId, new.credentialId]))
        #expect(assertion.credentialId == new.credentialId)
        #expect(assertion.verifies(with: new.publicKey))
    }

    @Test func discoverableCredentialFoundByAllowListReturnsOnlyTheUserId() throws {
        var harness = try Harness()
        let registration = try harness.register(Request.makeCredential(rk: true))
        _ = try harness.register(Request.makeCredential(user: Request.user(id: [2]), rk: true))
        let assertion = try harness.getAssertion(Request.getAssertion(allowList: [registration.credentialId]))
        #expect(assertion.user == ["id": .byteString(Request.userId)])
        #expect(assertion.response[5] == nil)
        #expect(harness.cbor(.getNextAssertion) == .response([0x30]))
    }
}
