import CTAPHID
import Testing

/// `CTAPHID_LOCK`.
@Suite struct LockTests {
    private let lockResponseA = CTAPHIDAction.send(padded(cidBytes(channelA) + [0x84, 0x00, 0x00]))

    @Test func lockIsHeldUntilItExpires() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(machine.receive(report: initPacket(channelA, .lock, [5]), now: ms(1000)) == [lockResponseA])
        #expect(machine.lockedChannel == channelA)
        #expect(machine.nextDeadline == ms(6000))

        // Other channels are busy; the holder is served.
        #expect(
            machine.receive(report: initPacket(channelB, .ping, [1]), now: ms(2000)) == [
                errorReport(channelB, .channelBusy)
            ]
        )
        #expect(
            machine.receive(report: initPacket(channelB, .cbor, [4]), now: ms(2000)) == [
                errorReport(channelB, .channelBusy)
            ]
        )
        #expect(
            machine.receive(report: initPacket(channelB, .lock, [1]), now: ms(2000)) == [
                errorReport(channelB, .channelBusy)
            ]
        )
        #expect(machine.receive(report: initPacket(channelA, .ping, [1]), now: ms(2000)) == sends(channelA, .ping, [1]))

        #expect(machine.tick(now: ms(5999)).isEmpty)
        #expect(machine.lockedChannel == channelA)
        #expect(machine.tick(now: ms(6000)).isEmpty)
        #expect(machine.lockedChannel == nil)
        #expect(machine.nextDeadline == nil)
        #expect(machine.receive(report: initPacket(channelB, .ping, [1]), now: ms(6001)) == sends(channelB, .ping, [1]))
    }

    @Test func expiredLockIsReleasedByTheNextReport() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        _ = machine.receive(report: initPacket(channelA, .lock, [1]), now: .zero)
        #expect(machine.receive(report: initPacket(channelB, .ping, [1]), now: ms(1000)) == sends(channelB, .ping, [1]))
    }

    @Test func lockZeroReleases() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        _ = machine.receive(report: initPacket(channelA, .lock, [10]), now: .zero)
        #expect(machine.receive(report: initPacket(channelA, .lock, [0]), now: ms(100)) == [lockResponseA])
        #expect(machine.lockedChannel == nil)
        #expect(machine.nextDeadline == nil)
        #expect(machine.receive(report: initPacket(channelB, .ping, [1]), now: ms(200)) == sends(channelB, .ping, [1]))
    }

    @Test func lockZeroWithoutALockIsAnswered() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(machine.receive(report: initPacket(channelA, .lock, [0]), now: .zero) == [lockResponseA])
        #expect(machine.lockedChannel == nil)
    }

    @Test func lockIsRenewedByTheHolder() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        _ = machine.receive(report: initPacket(channelA, .lock, [2]), now: .zero)
        #expect(machine.receive(report: initPacket(channelA, .lock, [10]), now: ms(1000)) == [lockResponseA])
        #expect(machine.nextDeadline == ms(11_000))
        #expect(machine.tick(now: ms(2000)).isEmpty)
        #expect(machine.lockedChannel == channelA)
    }

    @Test func initAndCancelFromOtherChannelsAreNotBlockedByTheLock() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        _ = machine.receive(report: initPacket(channelA, .lock, [5]), now: .zero)
        let initActions = machine.receive(report: initPacket(channelB, .initialize, nonce), now: ms(1))
        #expect(initActions == sends(channelB, .initialize, nonce + cidBytes(channelB) + [2, 1, 0, 0, 0x05]))
        #expect(reassemble(machine.receive(report: initPacket(broadcast, .initialize, nonce), now: ms(2))).count == 1)
        #expect(machine.receive(report: initPacket(channelB, .cancel), now: ms(3)).isEmpty)
        #expect(machine.lockedChannel == channelA)
    }

    @Test func holderCanRunRequestsUnderTheLock() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        _ = machine.receive(report: initPacket(channelA, .lock, [5]), now: .zero)
        machine.startRequest(on: channelA, now: ms(1))
        #expect(machine.complete(channel: channelA, payload: [0], now: ms(2)) == sends(channelA, .cbor, [0]))
        #expect(machine.lockedChannel == channelA)
    }

    @Test(arguments: [0, 2, 8])
    func lockWithALengthOtherThanOneIsInvalidLength(length: Int) {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(
            machine.receive(report: initPacket(channelA, .lock, length: length, [5, 5]), now: .zero)
                == [errorReport(channelA, .invalidLength)]
        )
        #expect(machine.lockedChannel == nil)
    }

    @Test(arguments: [UInt8(11), 100, 255])
    func lockLongerThanTenSecondsIsInvalidParameter(seconds: UInt8) {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(
            machine.receive(report: initPacket(channelA, .lock, [seconds]), now: .zero)
                == [errorReport(channelA, .invalidParameter)]
        )
        #expect(machine.lockedChannel == nil)
    }

    @Test func lockWhileAnotherChannelIsBusyIsChannelBusy() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelB, now: .zero)
        #expect(
            machine.receive(report: initPacket(channelA, .lock, [5]), now: ms(1)) == [
                errorReport(channelA, .channelBusy)
            ]
        )
        #expect(machine.lockedChannel == nil)
    }
}
