import CTAPHID
import Testing

/// `powerCycle()`.
@Suite struct PowerCycleTests {
    @Test func powerCycleForgetsTheRequestInFlight() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        machine.powerCycle()
        #expect(machine.busyChannel == nil)
        #expect(machine.nextDeadline == nil)
        #expect(machine.complete(channel: channelA, payload: [0], now: ms(1)).isEmpty)
        #expect(machine.tick(now: ms(1000)).isEmpty)
        machine.startRequest(on: channelB, now: ms(1001))
    }

    @Test func powerCycleForgetsTheLockAndPartialMessages() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        _ = machine.receive(report: initPacket(channelA, .lock, [10]), now: .zero)
        let reports = packets(channelA, .ping, pattern(100))
        _ = machine.receive(report: reports[0], now: ms(1))
        machine.powerCycle()
        #expect(machine.lockedChannel == nil)
        #expect(machine.assemblingChannel == nil)
        #expect(machine.nextDeadline == nil)
        #expect(machine.receive(report: reports[1], now: ms(2)).isEmpty)
        #expect(machine.receive(report: initPacket(channelB, .ping, [7]), now: ms(3)) == sends(channelB, .ping, [7]))
    }

    @Test func powerCycledMachineEqualsAFreshOneApartFromChannelAllocation() {
        var machine = CTAPHIDMachine(channelSeed: 5)
        _ = machine.receive(report: initPacket(channelA, .lock, [10]), now: .zero)
        machine.startRequest(on: channelA, now: ms(1))
        machine.powerCycle()
        #expect(machine == CTAPHIDMachine(channelSeed: 5))
    }
}
