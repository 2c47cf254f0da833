import CTAPHID
import Testing

/// Random reports and events: the machine never traps and keeps its invariants.
@Suite struct FuzzTests {
    @Test(arguments: [UInt64(1), 2, 3, 0xC0FFEE])
    func randomEventsKeepTheInvariants(seed: UInt64) {
        var random = SplitMix64(state: seed)
        var machine = CTAPHIDMachine(channelSeed: UInt32(truncatingIfNeeded: seed))
        var now = Duration.zero
        let channels: [UInt32] = [0, broadcast, channelA, channelB]
        let commands: [UInt8] = [0x01, 0x03, 0x04, 0x06, 0x08, 0x10, 0x11, 0x3B, 0x3F]

        for _ in 0..<20_000 {
            now += .microseconds(Int.random(in: 0...150_000, using: &random))
            let busyBefore = machine.busyChannel
            var actions: [CTAPHIDAction]
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<70:
                actions = machine.receive(report: Self.randomReport(channels, commands, &random), now: now)
            case 70..<85:
                actions = machine.tick(now: now)
            case 85..<95:
                let channel = machine.busyChannel ?? channels.randomElement(using: &random)!
                let payload = (0..<Int.random(in: 0...8000, using: &random)).map { UInt8(truncatingIfNeeded: $0) }
                actions = machine.complete(channel: channel, payload: payload, now: now)
            case 95..<99:
                let status: KeepaliveStatus = Bool.random(using: &random) ? .upNeeded : .processing
                actions = machine.setKeepaliveStatus(status, now: now)
            default:
                machine.powerCycle()
                actions = []
            }

            for action in actions {
                switch action {
                case .send(let report):
                    #expect(report.count == 64)
                case .deliver(let channel, let command, let payload):
                    #expect(busyBefore == nil)
                    #expect(machine.busyChannel == channel)
                    #expect(command == .cbor || command == .msg)
                    #expect(!payload.isEmpty && payload.count <= 7609)
                case .cancel(let channel), .abort(let channel):
                    #expect(channel == busyBefore)
                case .wink:
                    break
                }
            }
            if let deadline = machine.nextDeadline {
                #expect(deadline > now)
            }
        }
    }

    /// A report of 0 to 70 bytes, mostly on known channels with known commands, sometimes fully random.
    private static func randomReport(
        _ channels: [UInt32],
        _ commands: [UInt8],
        _ random: inout SplitMix64
    ) -> [UInt8] {
        let size = Int.random(in: 0...70, using: &random)
        var report = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
        guard size >= 7, Int.random(in: 0..<10, using: &random) < 8 else {
            return report
        }
        let channel =
            Int.random(in: 0..<10, using: &random) < 9
            ? channels.randomElement(using: &random)! : UInt32.random(in: 0...UInt32.max, using: &random)
        report.replaceSubrange(0..<4, with: cidBytes(channel))
        if Bool.random(using: &random) {
            report[4] = commands.randomElement(using: &random)! | 0x80
            let length = [0, 1, 8, 57, 58, 200, 7609, 7610].randomElement(using: &random)!
            report[5] = UInt8(length >> 8)
            report[6] = UInt8(length & 0xFF)
        } else {
            report[4] = UInt8.random(in: 0...3, using: &random)
        }
        return report
    }
}
