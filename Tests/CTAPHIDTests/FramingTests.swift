import CTAPHID
import Testing

/// Report sizes, sequence errors, stray packets, invalid channels and invalid commands.
@Suite struct FramingTests {
    @Test(arguments: [0, 1, 4, 65, 128])
    func reportsOfTheWrongSizeAreDropped(size: Int) {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let report = Array((cidBytes(channelA) + [0x81, 0x00, 0x00] + [UInt8](repeating: 0, count: 200)).prefix(size))
        let before = machine
        #expect(machine.receive(report: report, now: .zero).isEmpty)
        #expect(machine == before)
    }

    @Test func shortReportsAreZeroPadded() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        // CID + PING: the length bytes are padding, so an empty PING.
        #expect(machine.receive(report: cidBytes(channelA) + [0x81], now: .zero) == sends(channelA, .ping, []))
        // A 10-byte PING with two data bytes and the rest padding.
        let short = cidBytes(channelA) + [0x81, 0x00, 0x04, 0xAA, 0xBB]
        #expect(machine.receive(report: short, now: .zero) == sends(channelA, .ping, [0xAA, 0xBB, 0x00, 0x00]))
    }

    @Test func shortContinuationIsZeroPadded() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        _ = machine.receive(report: initPacket(channelA, .ping, length: 60, pattern(57)), now: .zero)
        let actions = machine.receive(report: cidBytes(channelA) + [0x00, 0xEE], now: .zero)
        #expect(actions == sends(channelA, .ping, pattern(57) + [0xEE, 0x00, 0x00]))
    }

    @Test func outOfOrderContinuationIsInvalidSequence() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let reports = packets(channelA, .ping, pattern(200))
        #expect(machine.receive(report: reports[0], now: .zero).isEmpty)
        #expect(machine.receive(report: reports[2], now: ms(1)) == [errorReport(channelA, .invalidSequence)])
        #expect(machine.assemblingChannel == nil)
        // The rest of the discarded message is stray.
        #expect(machine.receive(report: reports[1], now: ms(2)).isEmpty)
        #expect(machine.receive(report: reports[3], now: ms(3)).isEmpty)
    }

    @Test func repeatedContinuationIsInvalidSequence() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let reports = packets(channelA, .cbor, pattern(200))
        #expect(machine.receive(Array(reports[0...1]), now: .zero).isEmpty)
        #expect(machine.receive(report: reports[1], now: ms(1)) == [errorReport(channelA, .invalidSequence)])
        #expect(machine.busyChannel == nil)
    }

    @Test func initPacketOnAChannelMidMessageIsInvalidSequence() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let first = packets(channelA, .ping, pattern(100))
        #expect(machine.receive(report: first[0], now: .zero).isEmpty)
        #expect(
            machine.receive(report: initPacket(channelA, .ping, [1, 2]), now: ms(1))
                == [errorReport(channelA, .invalidSequence)]
        )
        #expect(machine.assemblingChannel == nil)
        #expect(machine.receive(report: first[1], now: ms(2)).isEmpty)
        // The channel is usable again.
        #expect(
            machine.receive(report: initPacket(channelA, .ping, [1, 2]), now: ms(3)) == sends(channelA, .ping, [1, 2])
        )
    }

    @Test func strayContinuationIsIgnored() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let before = machine
        #expect(machine.receive(report: continuationPacket(channelA, 0, pattern(59)), now: .zero).isEmpty)
        #expect(machine.receive(report: continuationPacket(channelA, 0x7F), now: .zero).isEmpty)
        #expect(machine == before)
    }

    @Test func continuationFromAnotherChannelDoesNotTouchAPartialMessage() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let reports = packets(channelA, .ping, pattern(100))
        #expect(machine.receive(report: reports[0], now: .zero).isEmpty)
        #expect(machine.receive(report: continuationPacket(channelB, 0, pattern(59, salt: 9)), now: ms(1)).isEmpty)
        #expect(machine.receive(report: reports[1], now: ms(2)) == sends(channelA, .ping, pattern(100)))
    }

    @Test(arguments: [CTAPHIDCommand.ping, .msg, .cbor, .lock, .wink, .cancel, .initialize, .keepalive, .error])
    func channelZeroIsInvalidChannel(command: CTAPHIDCommand) {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(machine.receive(report: initPacket(0, command, nonce), now: .zero) == [errorReport(0, .invalidChannel)])
    }

    @Test func continuationOnChannelZeroOrBroadcastIsInvalidChannel() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(machine.receive(report: continuationPacket(0, 0), now: .zero) == [errorReport(0, .invalidChannel)])
        #expect(
            machine.receive(report: continuationPacket(broadcast, 0), now: .zero)
                == [errorReport(broadcast, .invalidChannel)]
        )
    }

    @Test(arguments: [CTAPHIDCommand.ping, .msg, .cbor, .lock, .wink, .cancel, .keepalive, .error])
    func broadcastAcceptsOnlyInit(command: CTAPHIDCommand) {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(
            machine.receive(report: initPacket(broadcast, command, [1]), now: .zero)
                == [errorReport(broadcast, .invalidChannel)]
        )
    }

    @Test(arguments: [UInt8(0x3B), 0x3F, 0x00, 0x02, 0x05, 0x12, 0x40, 0x7F])
    func hostKeepaliveErrorAndUnknownCommandsAreInvalidCommand(command: UInt8) {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let actions = machine.receive(report: initPacket(channelA, command, length: 100, pattern(57)), now: .zero)
        #expect(actions == [errorReport(channelA, .invalidCommand)])
        #expect(machine.assemblingChannel == nil)
        // Its continuation packet is stray.
        #expect(machine.receive(report: continuationPacket(channelA, 0, pattern(43)), now: ms(1)).isEmpty)
    }

    @Test func channelsThatWereNeverAllocatedAreAccepted() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        for channel: UInt32 in [1, 0x7FFF_FFFF, 0xFFFF_FFFE] {
            #expect(machine.receive(report: initPacket(channel, .ping, [9]), now: .zero) == sends(channel, .ping, [9]))
        }
    }

    @Test func messageTimesOutAfterItsLastPacket() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let reports = packets(channelA, .ping, pattern(200))
        #expect(machine.receive(report: reports[0], now: ms(1000)).isEmpty)
        #expect(machine.nextDeadline == ms(1750))
        #expect(machine.tick(now: ms(1749)).isEmpty)
        #expect(machine.receive(report: reports[1], now: ms(1500)).isEmpty)
        #expect(machine.nextDeadline == ms(2250))
        #expect(machine.tick(now: ms(2249)).isEmpty)
        #expect(machine.assemblingChannel == channelA)
        #expect(machine.tick(now: ms(2250)) == [errorReport(channelA, .messageTimeout)])
        #expect(machine.assemblingChannel == nil)
        #expect(machine.nextDeadline == nil)
        #expect(machine.tick(now: ms(3000)).isEmpty)
        #expect(machine.receive(report: reports[2], now: ms(3001)).isEmpty)
    }

    @Test func messageTimeoutJustAfterTheDeadline() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        _ = machine.receive(report: initPacket(channelA, .cbor, length: 100, pattern(57)), now: .zero)
        #expect(machine.tick(now: .milliseconds(749) + .microseconds(999)).isEmpty)
        #expect(machine.tick(now: .milliseconds(750) + .microseconds(1)) == [errorReport(channelA, .messageTimeout)])
        #expect(machine.busyChannel == nil)
    }

    @Test func lateContinuationGetsTheTimeoutAndIsThenStray() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let reports = packets(channelA, .ping, pattern(100))
        _ = machine.receive(report: reports[0], now: .zero)
        #expect(machine.receive(report: reports[1], now: ms(800)) == [errorReport(channelA, .messageTimeout)])
    }

    @Test func messageTimeoutFollowsTheConfiguration() {
        var machine = CTAPHIDMachine(configuration: .init(messageTimeout: .seconds(3)), channelSeed: 1)
        _ = machine.receive(report: initPacket(channelA, .ping, length: 100, pattern(57)), now: .zero)
        #expect(machine.nextDeadline == .seconds(3))
        #expect(machine.tick(now: ms(2999)).isEmpty)
        #expect(machine.tick(now: ms(3000)) == [errorReport(channelA, .messageTimeout)])
    }

    @Test func newMessageFromAnotherChannelWhileBusyIsChannelBusy() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        for command in [CTAPHIDCommand.ping, .cbor, .msg, .wink, .lock] {
            #expect(
                machine.receive(report: initPacket(channelB, command, [1]), now: ms(1))
                    == [errorReport(channelB, .channelBusy)]
            )
        }
        #expect(machine.busyChannel == channelA)
    }

    @Test func newMessageOnTheBusyChannelIsChannelBusy() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        #expect(
            machine.receive(report: initPacket(channelA, .cbor, [4]), now: ms(1)) == [
                errorReport(channelA, .channelBusy)
            ]
        )
        #expect(
            machine.receive(report: initPacket(channelA, .ping, [4]), now: ms(1)) == [
                errorReport(channelA, .channelBusy)
            ]
        )
        #expect(machine.busyChannel == channelA)
        #expect(machine.complete(channel: channelA, payload: [0], now: ms(2)) == sends(channelA, .cbor, [0]))
    }

    @Test func newMessageWhileAnotherChannelIsMidMessageIsChannelBusy() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let reports = packets(channelA, .cbor, pattern(100))
        #expect(machine.receive(report: reports[0], now: .zero).isEmpty)
        #expect(
            machine.receive(report: initPacket(channelB, .ping, [1]), now: ms(1)) == [
                errorReport(channelB, .channelBusy)
            ]
        )
        // The partial message on channel A is not disturbed.
        #expect(
            machine.receive(report: reports[1], now: ms(2))
                == [.deliver(channel: channelA, command: .cbor, payload: pattern(100))]
        )
    }
}
