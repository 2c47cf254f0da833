import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// authenticatorReset (0x07).
@Suite struct ResetTests {
    @Test func resetTenSecondsAfterPowerUpWipesEverything() throws {
        var harness = try Harness()
        let plain = try harness.register()
        let resident = try harness.register(Request.makeCredential(user: Request.user(id: [2]), rk: true))
        let u2f = try harness.u2fRegister()
        let counter = harness.signCounter

        harness.now = .seconds(10)
        let outcome = harness.cbor(.reset)
        #expect(outcome == .needsUserPresence(PresencePrompt(command: "reset")))
        #expect(harness.resume(.approved) == .response([0x00]))

        #expect(harness.authenticator.storage.residentCredentials.isEmpty)
        #expect(harness.authenticator.storage.deviceSecret != Harness.deviceSecret)
        #expect(harness.authenticator.storage.deviceSecret.count == 32)
        // Old ids no longer open, discoverable or not, CTAP2 or U2F.
        for id in [plain.credentialId, resident.credentialId] {
            #expect(harness.cbor(.getAssertion, Request.getAssertion(allowList: [id])) == .response([0x2E]))
        }
        #expect(harness.cbor(.getAssertion, Request.getAssertion()) == .response([0x2E]))
        #expect(harness.u2f(U2FRequest.authenticate(p1: 0x07, keyHandle: u2f.keyHandle)) == .response([0x6A, 0x80]))
        // The counter never goes back.
        #expect(harness.signCounter == counter)
        #expect(try harness.register().authData.counter == counter + 1)
    }

    @Test func credentialsWorkUntilTheReset() throws {
        var harness = try Harness()
        let plain = try harness.register()
        harness.now = .seconds(10)
        #expect(needsPresence(harness.cbor(.getAssertion, Request.getAssertion(allowList: [plain.credentialId]))))
        #expect(harness.approve(harness.cbor(.reset)) == .response([0x00]))
        #expect(harness.cbor(.getAssertion, Request.getAssertion(allowList: [plain.credentialId])) == .response([0x2E]))
    }

    @Test func resetAfterTheWindowIsNotAllowed() throws {
        var harness = try Harness()
        _ = try harness.register(Request.makeCredential(rk: true))
        harness.now = .seconds(10) + .milliseconds(1)
        #expect(harness.cbor(.reset) == .response([0x30]))
        #expect(harness.authenticator.pendingPrompt == nil)
        #expect(harness.residentCredentials.count == 1)
    }

    @Test func powerCycleRestartsTheWindow() throws {
        var harness = try Harness()
        harness.now = .seconds(100)
        #expect(harness.cbor(.reset) == .response([0x30]))
        harness.authenticator.powerCycle(now: .seconds(100))
        harness.now = .seconds(110)
        #expect(needsPresence(harness.cbor(.reset)))
        harness.now = .seconds(110) + .milliseconds(1)
        #expect(harness.cbor(.reset) == .response([0x30]))
    }

    @Test func windowCountsFromConstruction() throws {
        var harness = try Harness(now: .seconds(500))
        harness.now = .seconds(510)
        #expect(harness.approve(harness.cbor(.reset)) == .response([0x00]))
    }

    @Test func resetWithoutAWindowIsAllowedAnyTime() throws {
        var harness = try Harness(configuration: AuthenticatorConfiguration(resetWindowEnabled: false))
        _ = try harness.register(Request.makeCredential(rk: true))
        harness.now = .seconds(86_400)
        #expect(harness.approve(harness.cbor(.reset)) == .response([0x00]))
        #expect(harness.residentCredentials.isEmpty)
    }

    @Test func configuredWindowIsUsed() throws {
        var harness = try Harness(configuration: AuthenticatorConfiguration(resetWindow: .seconds(60)))
        harness.now = .seconds(60)
        #expect(needsPresence(harness.cbor(.reset)))
        harness.now = .seconds(61)
        #expect(harness.cbor(.reset) == .response([0x30]))
    }

    @Test func deniedResetKeepsEverything() throws {
        var harness = try Harness()
        let resident = try harness.register(Request.makeCredential(rk: true))
        #expect(harness.answer(harness.cbor(.reset), with: .denied) == .response([0x27]))
        #expect(harness.residentCredentials.map(\.id) == [resident.credentialId])
        #expect(harness.authenticator.storage.deviceSecret == Harness.deviceSecret)
        #expect(needsPresence(harness.cbor(.getAssertion, Request.getAssertion(allowList: [resident.credentialId]))))
    }

    @Test func resetEndsAGetNextAssertionSequence() throws {
        var harness = try Harness()
        for id in 1...2 as ClosedRange<UInt8> {
            _ = try harness.register(Request.makeCredential(user: Request.user(id: [id]), rk: true))
        }
        _ = try harness.getAssertion(Request.getAssertion())
        #expect(harness.approve(harness.cbor(.reset)) == .response([0x00]))
        #expect(harness.cbor(.getNextAssertion) == .response([0x30]))
    }
}
