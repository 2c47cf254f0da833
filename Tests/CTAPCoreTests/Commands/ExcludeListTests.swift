import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// The excludeList of authenticatorMakeCredential.
@Suite struct ExcludeListTests {
    @Test(arguments: [false, true])
    func matchingCredentialAsksForATouchThenIsExcluded(discoverable: Bool) throws {
        var harness = try Harness()
        let existing = try harness.register(Request.makeCredential(rk: discoverable))
        let counter = harness.signCounter
        let stored = harness.residentCredentials
        let request = Request.makeCredential(
            user: Request.user(id: [9]),
            rk: discoverable,
            excludeList: [[1, 2, 3], existing.credentialId]
        )
        let outcome = harness.cbor(.makeCredential, request)
        #expect(needsPresence(outcome))
        #expect(harness.resume(.approved) == .response([0x19]))
        #expect(harness.signCounter == counter)
        #expect(harness.residentCredentials == stored)
    }

    @Test func deniedTouchOnAnExcludedCredentialIsOperationDenied() throws {
        var harness = try Harness()
        let existing = try harness.register()
        let outcome = harness.cbor(.makeCredential, Request.makeCredential(excludeList: [existing.credentialId]))
        #expect(harness.answer(outcome, with: .denied) == .response([0x27]))
    }

    @Test func credentialOfAnotherRelyingPartyDoesNotExclude() throws {
        var harness = try Harness()
        let existing = try harness.register(Request.makeCredential(rpId: "other.example"))
        let registration = try harness.register(Request.makeCredential(excludeList: [existing.credentialId]))
        #expect(registration.authData.rpIdHash == sha256("example.com"))
    }

    @Test func unknownAndForeignIdsDoNotExclude() throws {
        var foreign = try Harness(deviceSecret: Harness.foreignSecret)
        let foreignId = try foreign.register().credentialId
        var harness = try Harness()
        let registration = try harness.register(
            Request.makeCredential(excludeList: [foreignId, [], Array(repeating: 0, count: 63)])
        )
        #expect(registration.credentialId.count == 63)
    }

    @Test func excludeEntryOfAnotherTypeIsIgnored() throws {
        var harness = try Harness()
        let existing = try harness.register()
        let request = Request.makeCredential().setting(5, [Request.descriptor(existing.credentialId, type: "other")])
        #expect(status(of: harness.approve(harness.cbor(.makeCredential, request))) == .ok)
    }

    @Test func replacedDiscoverableCredentialNoLongerExcludes() throws {
        var harness = try Harness()
        let old = try harness.register(Request.makeCredential(rk: true))
        _ = try harness.register(Request.makeCredential(rk: true))
        let request = Request.makeCredential(user: Request.user(id: [7]), excludeList: [old.credentialId])
        #expect(status(of: harness.approve(harness.cbor(.makeCredential, request))) == .ok)
    }
}
