import CTAPHID
import Testing

/// `PING`, `WINK`, `MSG`, `CBOR` and `CANCEL`.
@Suite struct CommandTests {
    @Test(arguments: [0, 1, 56, 57, 58, 116, 117, 1024])
    func pingEchoesItsPayload(length: Int) {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let payload = pattern(length)
        let actions = machine.receive(packets(channelA, .ping, payload), now: .zero)
        #expect(actions == sends(channelA, .ping, payload))
        #expect(reassemble(actions) == [SentMessage(channel: channelA, command: 0x81, payload: payload)])
    }

    @Test func maximumSizePingRoundTrips() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let payload = pattern(7609, salt: 3)
        let reports = packets(channelA, .ping, payload)
        #expect(reports.count == 129)
        var actions: [CTAPHIDAction] = []
        for (index, report) in reports.enumerated() {
            actions = machine.receive(report: report, now: ms(index))
            if index < 128 {
                #expect(actions.isEmpty)
            }
        }
        #expect(actions.count == 129)
        #expect(actions == sends(channelA, .ping, payload))
        #expect(reassemble(actions) == [SentMessage(channel: channelA, command: 0x81, payload: payload)])
    }

    @Test func messageOneByteOverTheMaximumIsInvalidLength() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let reports = packets(channelA, .ping, pattern(7610))
        #expect(machine.receive(report: reports[0], now: .zero) == [errorReport(channelA, .invalidLength)])
        #expect(machine.assemblingChannel == nil)
        // Its continuation packets (sequence 0...0x7F; a 130th packet cannot be framed) are stray.
        #expect(reports.count == 130)
        #expect(machine.receive(Array(reports[1..<129]), now: .zero).isEmpty)
        #expect(
            machine.receive(report: initPacket(channelA, .cbor, length: 0xFFFF), now: .zero)
                == [errorReport(channelA, .invalidLength)]
        )
    }

    @Test func configuredMaximumMessageSizeIsEnforced() {
        var machine = CTAPHIDMachine(configuration: .init(maxMessageSize: 1024), channelSeed: 1)
        #expect(
            machine.receive(report: initPacket(channelA, .ping, length: 1025), now: .zero)
                == [errorReport(channelA, .invalidLength)]
        )
        #expect(
            machine.receive(packets(channelA, .ping, pattern(1024)), now: .zero)
                == sends(channelA, .ping, pattern(1024))
        )
    }

    @Test func winkEmitsWinkAndAnEmptyResponse() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let actions = machine.receive(report: initPacket(channelA, .wink), now: .zero)
        #expect(actions == [.wink, .send(padded(cidBytes(channelA) + [0x88, 0x00, 0x00]))])
    }

    @Test func winkWithAPayloadIsInvalidLength() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(
            machine.receive(report: initPacket(channelA, .wink, [1]), now: .zero)
                == [errorReport(channelA, .invalidLength)]
        )
    }

    @Test(arguments: [CTAPHIDCommand.cbor, .msg])
    func requestIsDeliveredAndAnsweredWithItsCommand(command: CTAPHIDCommand) {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let request = pattern(300, salt: 1)
        var actions: [CTAPHIDAction] = []
        for report in packets(channelA, command, request) {
            actions += machine.receive(report: report, now: ms(1))
        }
        #expect(actions == [.deliver(channel: channelA, command: command, payload: request)])
        #expect(machine.busyChannel == channelA)

        let response = pattern(1000, salt: 2)
        let sent = machine.complete(channel: channelA, payload: response, now: ms(20))
        #expect(sent == sends(channelA, command, response))
        #expect(machine.busyChannel == nil)
        #expect(machine.nextDeadline == nil)
        // A second completion has no request left to answer.
        #expect(machine.complete(channel: channelA, payload: response, now: ms(21)).isEmpty)
    }

    @Test func completionForAnotherChannelIsIgnored() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        #expect(machine.complete(channel: channelB, payload: [0], now: ms(1)).isEmpty)
        #expect(machine.busyChannel == channelA)
    }

    @Test func completionWithNothingInFlightIsIgnored() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(machine.complete(channel: channelA, payload: [0], now: .zero).isEmpty)
    }

    @Test func emptyResponseIsOneInitPacket() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        #expect(
            machine.complete(channel: channelA, payload: [], now: ms(1))
                == [.send(padded(cidBytes(channelA) + [0x90, 0x00, 0x00]))]
        )
    }

    @Test func responseTooLongToFrameIsErrorOther() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        #expect(
            machine.complete(channel: channelA, payload: pattern(7610), now: ms(1)) == [errorReport(channelA, .other)]
        )
        #expect(machine.busyChannel == nil)
    }

    @Test func maximumSizeResponseIsFramed() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        let sent = machine.complete(channel: channelA, payload: pattern(7609), now: ms(1))
        #expect(sent.count == 129)
        #expect(reassemble(sent) == [SentMessage(channel: channelA, command: 0x90, payload: pattern(7609))])
    }

    @Test(arguments: [CTAPHIDCommand.cbor, .msg])
    func zeroLengthRequestIsInvalidLength(command: CTAPHIDCommand) {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(
            machine.receive(report: initPacket(channelA, command), now: .zero) == [
                errorReport(channelA, .invalidLength)
            ]
        )
        #expect(machine.busyChannel == nil)
    }

    @Test func cancelOnTheBusyChannelIsPassedOnAndNotAnswered() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        #expect(machine.receive(report: initPacket(channelA, .cancel), now: ms(10)) == [.cancel(channel: channelA)])
        #expect(machine.busyChannel == channelA)
        // The authenticator ends the request with CTAP2_ERR_KEEPALIVE_CANCEL.
        #expect(machine.complete(channel: channelA, payload: [0x2D], now: ms(11)) == sends(channelA, .cbor, [0x2D]))
        #expect(machine.busyChannel == nil)
    }

    @Test func cancelWithNothingInFlightDoesNothing() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let before = machine
        #expect(machine.receive(report: initPacket(channelA, .cancel), now: .zero).isEmpty)
        #expect(machine == before)
    }

    @Test func cancelFromAnotherChannelDoesNothing() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: .zero)
        let before = machine
        #expect(machine.receive(report: initPacket(channelB, .cancel), now: ms(1)).isEmpty)
        #expect(machine == before)
    }

    @Test func cancelOnAChannelMidMessageIsInvalidSequence() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(machine.receive(report: initPacket(channelA, .cbor, length: 100, pattern(57)), now: .zero).isEmpty)
        #expect(
            machine.receive(report: initPacket(channelA, .cancel), now: ms(1)) == [
                errorReport(channelA, .invalidSequence)
            ]
        )
        #expect(machine.assemblingChannel == nil)
    }

    @Test func cancelWhileAnotherChannelIsMidMessageDoesNothing() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        #expect(machine.receive(report: initPacket(channelA, .cbor, length: 100, pattern(57)), now: .zero).isEmpty)
        #expect(machine.receive(report: initPacket(channelB, .cancel), now: ms(1)).isEmpty)
        #expect(machine.assemblingChannel == channelA)
    }
}
