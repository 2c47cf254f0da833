import CTAPHID
import Testing

/// `KEEPALIVE` cadence and status while a request is in flight.
@Suite struct KeepaliveTests {
    @Test func processingKeepaliveEveryInterval() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(machine.nextDeadline == nil)
        machine.startRequest(on: channelA, now: ms(1000))
        #expect(machine.nextDeadline == ms(1075))
        #expect(machine.tick(now: ms(1074)).isEmpty)
        #expect(machine.tick(now: ms(1075)) == [keepaliveReport(channelA, .processing)])
        #expect(machine.nextDeadline == ms(1150))
        #expect(machine.tick(now: ms(1100)).isEmpty)
        #expect(machine.tick(now: ms(1150)) == [keepaliveReport(channelA, .processing)])
        #expect(machine.nextDeadline == ms(1225))
        #expect(machine.complete(channel: channelA, payload: [0], now: ms(1200)) == sends(channelA, .cbor, [0]))
        #expect(machine.nextDeadline == nil)
        #expect(machine.tick(now: ms(1225)).isEmpty)
    }

    @Test func upNeededIsSentAtOnceAndThenEveryInterval() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        #expect(machine.tick(now: ms(75)) == [keepaliveReport(channelA, .processing)])
        #expect(machine.setKeepaliveStatus(.upNeeded, now: ms(100)) == [keepaliveReport(channelA, .upNeeded)])
        #expect(machine.nextDeadline == ms(175))
        #expect(machine.tick(now: ms(150)).isEmpty)
        #expect(machine.tick(now: ms(175)) == [keepaliveReport(channelA, .upNeeded)])
        #expect(machine.nextDeadline == ms(250))
        // No second immediate keepalive while the status stays the same.
        #expect(machine.setKeepaliveStatus(.upNeeded, now: ms(200)).isEmpty)
        #expect(machine.nextDeadline == ms(250))
        #expect(machine.tick(now: ms(250)) == [keepaliveReport(channelA, .upNeeded)])
        // Back to processing (a long touch has counted): one keepalive at once, then the cadence with the new status.
        #expect(machine.setKeepaliveStatus(.processing, now: ms(260)) == [keepaliveReport(channelA, .processing)])
        #expect(machine.nextDeadline == ms(335))
        #expect(machine.tick(now: ms(335)) == [keepaliveReport(channelA, .processing)])
        // A new change to UP needed is sent at once again.
        #expect(machine.setKeepaliveStatus(.upNeeded, now: ms(340)) == [keepaliveReport(channelA, .upNeeded)])
        #expect(machine.nextDeadline == ms(415))
    }

    @Test func upNeededAtDeliveryTime() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: ms(10))
        #expect(machine.setKeepaliveStatus(.upNeeded, now: ms(10)) == [keepaliveReport(channelA, .upNeeded)])
        #expect(machine.nextDeadline == ms(85))
    }

    @Test func dueKeepaliveCarriesAStatusSetAtTheSameTime() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        _ = machine.setKeepaliveStatus(.upNeeded, now: ms(10))
        // Switching back to processing exactly when a keepalive is due sends it with the new status.
        #expect(machine.setKeepaliveStatus(.processing, now: ms(85)) == [keepaliveReport(channelA, .processing)])
    }

    @Test func eachRequestStartsAsProcessing() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        _ = machine.setKeepaliveStatus(.upNeeded, now: ms(1))
        _ = machine.complete(channel: channelA, payload: [0], now: ms(2))
        machine.startRequest(on: channelB, now: ms(10))
        #expect(machine.tick(now: ms(85)) == [keepaliveReport(channelB, .processing)])
    }

    @Test func statusWithoutARequestIsIgnored() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let before = machine
        #expect(machine.setKeepaliveStatus(.upNeeded, now: .zero).isEmpty)
        #expect(machine == before)
        #expect(machine.nextDeadline == nil)
    }

    @Test func lateTickSendsOneKeepaliveAndReschedulesFromNow() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        #expect(machine.tick(now: ms(1000)) == [keepaliveReport(channelA, .processing)])
        #expect(machine.nextDeadline == ms(1075))
        // Slightly late: the cadence is kept.
        #expect(machine.tick(now: ms(1080)) == [keepaliveReport(channelA, .processing)])
        #expect(machine.nextDeadline == ms(1150))
    }

    @Test func keepaliveIsSentBeforeAReportThatArrivesWhenItIsDue() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        #expect(
            machine.receive(report: initPacket(channelA, .cancel), now: ms(75))
                == [keepaliveReport(channelA, .processing), .cancel(channel: channelA)]
        )
    }

    @Test func keepaliveFollowsTheConfiguredInterval() {
        var machine = CTAPHIDMachine(configuration: .init(keepaliveInterval: .milliseconds(100)), channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        #expect(machine.nextDeadline == ms(100))
        #expect(machine.tick(now: ms(99)).isEmpty)
        #expect(machine.tick(now: ms(100)) == [keepaliveReport(channelA, .processing)])
    }

    @Test func zeroIntervalDisablesKeepalives() {
        var machine = CTAPHIDMachine(configuration: .init(keepaliveInterval: .zero), channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        #expect(machine.nextDeadline == nil)
        #expect(machine.tick(now: ms(1000)).isEmpty)
        // The change to UP needed is still announced once.
        #expect(machine.setKeepaliveStatus(.upNeeded, now: ms(1001)) == [keepaliveReport(channelA, .upNeeded)])
        #expect(machine.nextDeadline == nil)
    }

    @Test func nextDeadlineIsTheEarliestTimer() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        _ = machine.receive(report: initPacket(channelA, .lock, [1]), now: .zero)
        #expect(machine.nextDeadline == ms(1000))
        machine.startRequest(on: channelA, now: ms(950))
        #expect(machine.nextDeadline == ms(1000))
        #expect(machine.tick(now: ms(1000)).isEmpty)
        #expect(machine.lockedChannel == nil)
        #expect(machine.nextDeadline == ms(1025))
    }
}
