import CTAPCore

/// The person at the key, simulated, as a small machine of its own: a prompt in, a deadline and an answer out
/// (firmware-spec/transports.md, "User presence"). How it answers is its ``PresenceMode``; the control plane changes
/// the mode (until changed again, or for the next request only) and says whether a finger on the sensor matches; a
/// touch given while nothing waits counts for the next U2F request for a while.
package struct SimulatedUser: Sendable, Equatable {
    package var mode: PresenceMode
    /// The mode to return to after an "approve the next request only".
    package var modeAfterNext: PresenceMode?
    /// What a finger on the simulated sensor does: true matches, false does not; nil lets the mode decide.
    package var userVerified: Bool?
    /// How long a prompt waits for a touch before the request fails with USER_ACTION_TIMEOUT.
    package var presenceTimeout: Duration = .seconds(30)
    /// How long a touch given in prompt mode stays valid for the next U2F request.
    package var u2fTouchValidity: Duration = .seconds(10)
    /// How long a long touch lasts (reset with longTouchForReset; CTAP 2.3 asks for 5 seconds): the automatic user
    /// holds the key this long, and a control-plane touch shorter than this does not count.
    package var longTouchHold: Duration = .seconds(5)
    /// When the person last touched the key while nothing waited (prompt mode: the next U2F request may take it).
    var lastTouch: Duration?

    package init(mode: PresenceMode) {
        self.mode = mode
    }

    /// The answer to a CTAP2 prompt, which waits with keepalives: when it comes and what it is. An automatic touch
    /// or refusal comes after the mode's delay (a long touch held as long as it must); in prompt mode nothing comes
    /// before the timeout, unless the person touches or refuses first.
    mutating func respond(to prompt: PresencePrompt, now: Duration) -> (deadline: Duration, answer: PresenceResult) {
        switch mode {
        case .approve(let delay):
            let hold = prompt.gesture == .longTouch ? longTouchHold : .zero
            answered()
            return (now + delay + hold, answer(.approved, to: prompt.gesture))
        case .deny(let delay):
            answered()
            return (now + delay, answer(.denied, to: prompt.gesture))
        case .prompt:
            return (now + presenceTimeout, .timedOut)
        }
    }

    /// The answer to a U2F request, which cannot wait: the host asks again until it is approved. In prompt mode a
    /// recent touch approves it, else it is denied and the person is asked (`ask`).
    mutating func respondAtOnce(now: Duration) -> (answer: PresenceResult, ask: Bool) {
        switch mode {
        case .approve:
            answered()
            return (.approved, false)
        case .deny:
            answered()
            return (.denied, false)
        case .prompt:
            if let touched = lastTouch, now - touched <= u2fTouchValidity {
                lastTouch = nil
                return (.approved, false)
            }
            return (.denied, true)
        }
    }

    /// What a touch or a refusal means for a prompt of `gesture`: for a fingerprint, ``userVerified`` decides when
    /// set.
    func answer(_ presence: PresenceResult, to gesture: PresencePrompt.Gesture?) -> PresenceResult {
        guard presence == .approved || presence == .denied, gesture == .fingerprint, let verified = userVerified
        else { return presence }
        return verified ? .approved : .denied
    }

    /// Changes how the user answers; `once`: for the next request only, then the mode before comes back.
    mutating func setMode(_ mode: PresenceMode, once: Bool) {
        modeAfterNext = once ? modeAfterNext ?? self.mode : nil
        self.mode = mode
    }

    /// Once a request has had its answer: an "approve the next request only" mode ends.
    mutating func answered() {
        if let previous = modeAfterNext {
            mode = previous
            modeAfterNext = nil
        }
    }
}
