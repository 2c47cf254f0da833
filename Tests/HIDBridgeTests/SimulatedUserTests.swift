import CTAPCore
import Testing

@testable import VirtualKey

/// The simulated user alone: a prompt in, a deadline and an answer out.
@Suite struct SimulatedUserTests {
    let now = Duration.seconds(100)

    @Test func eachModeAnswersACTAP2PromptWhenItShould() {
        let touch = PresencePrompt(command: "makeCredential")
        var user = SimulatedUser(mode: .approve(after: .milliseconds(200)))
        #expect(user.respond(to: touch, now: now) == (now + .milliseconds(200), .approved))
        let reset = PresencePrompt(command: "reset", gesture: .longTouch)
        #expect(user.respond(to: reset, now: now).deadline == now + .milliseconds(200) + .seconds(5), "held 5 s")
        user.mode = .deny(after: .zero)
        #expect(user.respond(to: touch, now: now) == (now, .denied))
        user.mode = .prompt
        user.presenceTimeout = .seconds(7)
        #expect(user.respond(to: touch, now: now) == (now + .seconds(7), .timedOut), "only the person answers")
    }

    @Test func aFingerOnTheSensorMatchesOnlyWhenTheControlPlaneSaysSo() {
        let finger = PresencePrompt(command: "getAssertion", gesture: .fingerprint)
        var user = SimulatedUser(mode: .approve(after: .zero))
        user.userVerified = false
        #expect(user.respond(to: finger, now: now).answer == .denied)
        #expect(user.respond(to: PresencePrompt(command: "getAssertion"), now: now).answer == .approved, "a touch")
        user.userVerified = true
        user.mode = .deny(after: .zero)
        #expect(user.respond(to: finger, now: now).answer == .approved)
        #expect(user.answer(.timedOut, to: .fingerprint) == .timedOut)
    }

    @Test func approvingTheNextRequestOnlyReturnsToTheModeBefore() {
        var user = SimulatedUser(mode: .prompt)
        user.setMode(.approve(after: .zero), once: true)
        user.setMode(.approve(after: .milliseconds(5)), once: true)  // still back to prompt afterwards
        #expect(user.respond(to: PresencePrompt(command: "makeCredential"), now: now).answer == .approved)
        #expect(user.mode == .prompt && user.modeAfterNext == nil)
        user.setMode(.deny(after: .zero), once: true)
        user.setMode(.approve(after: .zero), once: false)
        #expect(user.respondAtOnce(now: now) == (.approved, false) && user.mode == .approve(after: .zero))
    }

    @Test func aU2FRequestTakesARecentTouchInPromptMode() {
        var user = SimulatedUser(mode: .prompt)
        #expect(user.respondAtOnce(now: now) == (.denied, true), "asks the person")
        user.lastTouch = now - .seconds(10)
        #expect(user.respondAtOnce(now: now) == (.approved, false))
        #expect(user.respondAtOnce(now: now) == (.denied, true), "a touch counts once")
        user.lastTouch = now - .seconds(11)
        #expect(user.respondAtOnce(now: now) == (.denied, true), "too old")
    }
}
