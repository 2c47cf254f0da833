import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// The user's answers to a presence request, cancel and abort.
@Suite struct PresenceTests {
    /// The CTAP2 requests that wait for a touch.
    enum Waiting: String, CaseIterable, Sendable {
        case makeCredential, excludedMakeCredential, getAssertion, reset, selection, pinProbe

        /// Sends the request to a fresh harness that holds one credential.
        func start(_ harness: inout Harness) throws -> AuthenticatorOutcome {
            let registration = try harness.register()
            switch self {
            case .makeCredential:
                return harness.cbor(.makeCredential, Request.makeCredential(rk: true))
            case .excludedMakeCredential:
                return harness.cbor(.makeCredential, Request.makeCredential(excludeList: [registration.credentialId]))
            case .getAssertion:
                return harness.cbor(.getAssertion, Request.getAssertion(allowList: [registration.credentialId]))
            case .reset:
                return harness.cbor(.reset)
            case .selection:
                return harness.cbor(.selection)
            case .pinProbe:
                return harness.cbor(.makeCredential, [8: .byteString([]), 9: 1])
            }
        }
    }

    @Test(
        arguments: Waiting.allCases,
        [
            (PresenceResult.denied, CTAPStatus.operationDenied),
            (.timedOut, .userActionTimeout),
            (.cancelled, .keepaliveCancel),
        ] as [(PresenceResult, CTAPStatus)]
    )
    func unapprovedAnswerEndsTheRequest(request: Waiting, answer: (PresenceResult, CTAPStatus)) throws {
        var harness = try Harness()
        let outcome = try request.start(&harness)
        let stored = harness.residentCredentials
        let secret = harness.authenticator.storage.deviceSecret
        #expect(harness.answer(outcome, with: answer.0) == .response([answer.1.rawValue]))
        // Nothing happened, and nothing is left waiting.
        #expect(harness.signCounter == 1)
        #expect(harness.residentCredentials == stored)
        #expect(harness.authenticator.storage.deviceSecret == secret)
        #expect(harness.authenticator.pendingPrompt == nil)
        #expect(harness.resume(.approved) == .response([0x7F]))
    }

    @Test(arguments: Waiting.allCases)
    func cancelAnswersKeepaliveCancel(request: Waiting) throws {
        var harness = try Harness()
        #expect(needsPresence(try request.start(&harness)))
        #expect(harness.authenticator.cancel() == [0x2D])
        #expect(harness.authenticator.pendingPrompt == nil)
        #expect(harness.authenticator.cancel() == nil)
        #expect(harness.resume(.approved) == .response([0x7F]))
        #expect(harness.signCounter == 1)
    }

    @Test func cancelWithNothingPendingIsNil() throws {
        var harness = try Harness()
        #expect(harness.authenticator.cancel() == nil)
        _ = try harness.register()
        #expect(harness.authenticator.cancel() == nil)
    }

    @Test func cancelOfAU2FRequestIsConditionsNotSatisfied() throws {
        var harness = try Harness()
        #expect(needsPresence(harness.u2f(U2FRequest.register())))
        #expect(harness.authenticator.cancel() == [0x69, 0x85])
    }

    @Test(arguments: Waiting.allCases)
    func abortDropsTheRequestWithoutAResponse(request: Waiting) throws {
        var harness = try Harness()
        #expect(needsPresence(try request.start(&harness)))
        harness.authenticator.abort()
        #expect(harness.authenticator.pendingPrompt == nil)
        #expect(harness.authenticator.cancel() == nil)
        #expect(harness.resume(.approved) == .response([0x7F]))
        #expect(harness.signCounter == 1)
        #expect(harness.authenticator.storage.deviceSecret == Harness.deviceSecret)
    }

    @Test func resumeWithNothingPendingIsOther() throws {
        var harness = try Harness()
        #expect(harness.resume(.approved) == .response([0x7F]))
        #expect(harness.resume(.denied) == .response([0x7F]))
    }

    @Test func anotherCommandReplacesTheWaitingRequest() throws {
        var harness = try Harness()
        #expect(needsPresence(harness.cbor(.makeCredential, Request.makeCredential())))
        #expect(status(of: harness.cbor(.getInfo)) == .ok)
        #expect(harness.authenticator.pendingPrompt == nil)
        #expect(harness.resume(.approved) == .response([0x7F]))
        #expect(harness.signCounter == 0)
    }

    @Test func powerCycleDropsTheWaitingRequest() throws {
        var harness = try Harness()
        #expect(needsPresence(harness.cbor(.selection)))
        harness.authenticator.powerCycle(now: .seconds(1))
        #expect(harness.resume(.approved) == .response([0x7F]))
    }
}
