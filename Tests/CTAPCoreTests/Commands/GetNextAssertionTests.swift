import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing

/// Discoverable credentials in getAssertion, and authenticatorGetNextAssertion (0x08).
@Suite struct GetNextAssertionTests {
    /// A harness with three discoverable credentials for example.com (users 1, 2, 3, in that order) and one
    /// for example.org.
    private static func threeUsers() throws -> (Harness, [Registration]) {
        var harness = try Harness()
        var registrations: [Registration] = []
        for id in 1...3 as ClosedRange<UInt8> {
            registrations.append(try harness.register(Request.makeCredential(user: Request.user(id: [id]), rk: true)))
            if id == 2 {
                _ = try harness.register(
                    Request.makeCredential(rpId: "example.org", user: Request.user(id: [id]), rk: true)
                )
            }
        }
        return (harness, registrations)
    }

    @Test func newestCredentialComesFirstWithTheCount() throws {
        var (harness, registrations) = try Self.threeUsers()
        let outcome = harness.cbor(.getAssertion, Request.getAssertion())
        // More than one user: the prompt names none.
        #expect(outcome == .needsUserPresence(PresencePrompt(command: "getAssertion", rpId: "example.com")))
        let first = try Assertion(responseMap(harness.resume(.approved)))
        #expect(first.credentialId == registrations[2].credentialId)
        #expect(first.verifies(with: registrations[2].publicKey))
        #expect(first.response[5] == 3)
        #expect(first.user == ["id": .byteString([3])])
        #expect(first.response.mapValue.map { Set($0.keys) } == [1, 2, 3, 4, 5])
    }

    @Test func getNextAssertionReturnsTheRestThenNotAllowed() throws {
        var (harness, registrations) = try Self.threeUsers()
        let first = try harness.getAssertion(Request.getAssertion())
        let second = try Assertion(responseMap(harness.cbor(.getNextAssertion)))
        let third = try Assertion(responseMap(harness.cbor(.getNextAssertion)))
        #expect(harness.cbor(.getNextAssertion) == .response([0x30]))
        #expect(harness.cbor(.getNextAssertion) == .response([0x30]))

        #expect([first, second, third].map(\.credentialId) == registrations.reversed().map(\.credentialId))
        #expect([second, third].map(\.user) == [["id": .byteString([2])], ["id": .byteString([1])]])
        #expect(second.verifies(with: registrations[1].publicKey))
        #expect(third.verifies(with: registrations[0].publicKey))
        // Only the first response carries the count; every one is signed with the touch of the first.
        #expect(second.response[5] == nil)
        #expect(third.response[5] == nil)
        #expect([first, second, third].map(\.authData.flags) == [0x01, 0x01, 0x01])
        #expect([first, second, third].map(\.authData.counter) == [5, 6, 7])
    }

    @Test func upFalseAssertionsContinueWithoutTheUPFlag() throws {
        var (harness, registrations) = try Self.threeUsers()
        let outcome = harness.cbor(.getAssertion, Request.getAssertion(up: false))
        let first = try Assertion(responseMap(outcome))
        let second = try Assertion(responseMap(harness.cbor(.getNextAssertion)))
        #expect(first.authData.flags == 0x00)
        #expect(second.authData.flags == 0x00)
        #expect(second.verifies(with: registrations[1].publicKey))
    }

    @Test func singleDiscoverableCredentialHasNoCountAndNothingNext() throws {
        var harness = try Harness()
        let registration = try harness.register(Request.makeCredential(rk: true))
        _ = try harness.register(Request.makeCredential(rpId: "example.org", rk: true))
        let outcome = harness.cbor(.getAssertion, Request.getAssertion())
        #expect(
            outcome
                == .needsUserPresence(PresencePrompt(command: "getAssertion", rpId: "example.com", userName: "alice"))
        )
        let assertion = try Assertion(responseMap(harness.resume(.approved)))
        #expect(assertion.credentialId == registration.credentialId)
        #expect(assertion.response[5] == nil)
        #expect(assertion.user == ["id": .byteString(Request.userId)])
        #expect(harness.cbor(.getNextAssertion) == .response([0x30]))
    }

    @Test func userIsOnlyTheIdEvenWhenANameWasStored() throws {
        var harness = try Harness()
        let user: CBORValue = ["id": .byteString([5]), "name": "n", "displayName": "d", "icon": "https://i"]
        _ = try harness.register(Request.makeCredential(user: user, rk: true))
        #expect(try harness.getAssertion(Request.getAssertion()).user == ["id": .byteString([5])])
    }

    @Test func getNextAssertionWithoutGetAssertionIsNotAllowed() throws {
        var harness = try Harness()
        #expect(harness.cbor(.getNextAssertion) == .response([0x30]))
        _ = try harness.register(Request.makeCredential(rk: true))
        #expect(harness.cbor(.getNextAssertion) == .response([0x30]))
    }

    @Test func getNextAssertionWithinThirtySecondsOfTheLastResponse() throws {
        var (harness, _) = try Self.threeUsers()
        harness.now = .seconds(100)
        _ = try harness.getAssertion(Request.getAssertion())
        harness.now += .seconds(30)
        #expect(status(of: harness.cbor(.getNextAssertion)) == .ok)
        // The timer restarts with every response.
        harness.now += .seconds(30)
        #expect(status(of: harness.cbor(.getNextAssertion)) == .ok)
    }

    @Test func getNextAssertionAfterThirtySecondsIsNotAllowed() throws {
        var (harness, _) = try Self.threeUsers()
        harness.now = .seconds(100)
        _ = try harness.getAssertion(Request.getAssertion())
        harness.now += .seconds(30) + .milliseconds(1)
        #expect(harness.cbor(.getNextAssertion) == .response([0x30]))
        // The state is gone, not just late.
        harness.now = .seconds(100)
        #expect(harness.cbor(.getNextAssertion) == .response([0x30]))
    }

    @Test func timerStartsWhenTheTouchedAssertionIsSent() throws {
        var (harness, _) = try Self.threeUsers()
        let outcome = harness.cbor(.getAssertion, Request.getAssertion())
        harness.now = .seconds(20)  // the user takes 20 s to touch
        _ = try responseMap(harness.approve(outcome))
        harness.now = .seconds(50)
        #expect(status(of: harness.cbor(.getNextAssertion)) == .ok)
    }

    @Test(arguments: ["getInfo", "makeCredential", "getAssertion", "selection", "unknown", "u2fVersion"])
    func anotherCommandInBetweenEndsTheSequence(command: String) throws {
        var (harness, _) = try Self.threeUsers()
        _ = try harness.getAssertion(Request.getAssertion())
        switch command {
        case "getInfo": _ = harness.cbor(.getInfo)
        case "makeCredential": _ = harness.cbor(.makeCredential, Request.makeCredential())
        case "getAssertion": _ = harness.cbor(.getAssertion, Request.getAssertion(rpId: "nothing.example"))
        case "selection": _ = harness.cbor(.selection)
        case "unknown": _ = harness.cbor(raw: [0x40])
        default: _ = harness.u2f(U2FRequest.extended(0x03))
        }
        #expect(harness.cbor(.getNextAssertion) == .response([0x30]))
    }

    @Test func powerCycleEndsTheSequence() throws {
        var (harness, _) = try Self.threeUsers()
        _ = try harness.getAssertion(Request.getAssertion())
        harness.authenticator.powerCycle(now: harness.now)
        #expect(harness.cbor(.getNextAssertion) == .response([0x30]))
    }

    @Test func newGetAssertionStartsANewSequence() throws {
        var (harness, registrations) = try Self.threeUsers()
        _ = try harness.getAssertion(Request.getAssertion())
        _ = try Assertion(responseMap(harness.cbor(.getNextAssertion)))
        let again = try harness.getAssertion(Request.getAssertion())
        #expect(again.credentialId == registrations[2].credentialId)
        #expect(again.response[5] == 3)
        let next = try Assertion(responseMap(harness.cbor(.getNextAssertion)))
        #expect(next.credentialId == registrations[1].credentialId)
    }
}
