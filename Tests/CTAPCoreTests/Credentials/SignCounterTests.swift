import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// The global signature counter across CTAP2, U2F and power cycles.
@Suite struct SignCounterTests {
    @Test func counterStrictlyIncreasesAcrossEveryKindOfSignature() throws {
        var harness = try Harness()
        var counters: [UInt32] = []

        let registration = try harness.register()
        counters.append(registration.authData.counter)
        let u2f = try harness.u2fRegister()
        for round in 0..<3 {
            let assertion = try harness.getAssertion(Request.getAssertion(allowList: [registration.credentialId]))
            counters.append(assertion.authData.counter)

            let outcome = harness.approve(harness.u2f(U2FRequest.authenticate(p1: 0x03, keyHandle: u2f.keyHandle)))
            let bytes = try #require(responseBytes(outcome))
            counters.append(bytes[1..<5].reduce(0) { $0 << 8 | UInt32($1) })

            let silent = harness.u2f(U2FRequest.authenticate(p1: 0x08, keyHandle: u2f.keyHandle))
            let silentBytes = try #require(responseBytes(silent))
            counters.append(silentBytes[1..<5].reduce(0) { $0 << 8 | UInt32($1) })

            counters.append(
                try harness.register(Request.makeCredential(user: Request.user(id: [UInt8(round)]), rk: true))
                    .authData.counter
            )

            harness.now += .seconds(5)
            harness.authenticator.powerCycle(now: harness.now)
        }
        #expect(counters == Array(1...UInt32(counters.count)))
        #expect(zip(counters, counters.dropFirst()).allSatisfy { $0 < $1 })
        #expect(harness.signCounter == counters.last)
    }

    @Test func refusedAndUnansweredRequestsDoNotCount() throws {
        var harness = try Harness()
        let registration = try harness.register()
        _ = harness.answer(
            harness.cbor(.getAssertion, Request.getAssertion(allowList: [registration.credentialId])),
            with: .denied
        )
        _ = harness.cbor(.getAssertion, Request.getAssertion(allowList: [[1, 2, 3]]))
        _ = harness.cbor(.makeCredential, Request.makeCredential())
        harness.authenticator.abort()
        #expect(harness.signCounter == 1)
        let assertion = try harness.getAssertion(Request.getAssertion(allowList: [registration.credentialId]))
        #expect(assertion.authData.counter == 2)
    }
}
