import CTAPCore
package import ControlProtocol

extension KeySlot {
    /// A control command's answer, and what the loop must do for it.
    package struct ControlReply: Sendable {
        package var result: Result<JSONValue, ControlError>
        package var effects: [SlotEffect] = []

        package init(result: Result<JSONValue, ControlError>, effects: [SlotEffect] = []) {
            self.result = result
            self.effects = effects
        }
    }

    /// Carries out one control command of a client; `subscribed` is that client's subscription. The commands about
    /// the slot (subscriptions, power cycles, status) are handled here, the rest by the key; `trace` opens a file,
    /// so the loop handles it.
    package mutating func control(_ command: ControlCommand, subscribed: inout Bool, now: Duration) -> ControlReply {
        switch command {
        case .subscribe:
            subscribed = true
            return ControlReply(result: .success(["subscribed": true]))
        case .unsubscribe:
            subscribed = false
            return ControlReply(result: .success(["subscribed": false]))
        case .powerCycle(let offMilliseconds):
            let effects =
                if let offMilliseconds, offMilliseconds > 0 {
                    unplug(milliseconds: offMilliseconds, now: now)
                } else {
                    powerCycle(now: now)
                }
            return ControlReply(result: .success([:]), effects: effects)
        case .status:
            guard case .success(let status) = key.execute(.status, now: now).result,
                case .object(var members) = status
            else { return ControlReply(result: .failure(ControlError(.failed, "status unavailable"))) }
            members["transport"] = .string(transportSummary)
            members["transportDetail"] = transportDetail
            members["uptimeMs"] = JSONValue(now.wholeMilliseconds)
            return ControlReply(result: .success(.object(members)))
        default:
            let (result, outputs) = key.execute(command, now: now)
            return ControlReply(result: result, effects: effects(of: outputs, now: now))
        }
    }
}
