import Testing

@testable import CTAPHID

/// `CTAPHID_INIT`: channel allocation, resynchronisation and channel ids.
@Suite struct InitTests {
    @Test func broadcastInitAllocatesAChannelAndEchoesTheNonce() {
        let configuration = CTAPHIDConfiguration(deviceVersionMajor: 3, deviceVersionMinor: 4, deviceVersionBuild: 5)
        var machine = CTAPHIDMachine(configuration: configuration, channelSeed: 42)
        let actions = machine.receive(report: initPacket(broadcast, .initialize, nonce), now: .zero)

        let messages = reassemble(actions)
        #expect(messages.count == 1)
        let response = messages[0]
        #expect(response.channel == broadcast)
        #expect(response.command == 0x86)
        #expect(response.payload.count == 17)
        #expect(Array(response.payload[0..<8]) == nonce)
        #expect(Array(response.payload[12..<17]) == [2, 3, 4, 5, 0x05])
        let cid = Array(response.payload[8..<12])
        let expected = padded(cidBytes(broadcast) + [0x86, 0x00, 0x11] + nonce + cid + [2, 3, 4, 5, 0x05])
        #expect(actions == [.send(expected)])
        #expect(cid != cidBytes(broadcast) && cid != [0, 0, 0, 0])
    }

    @Test func initOnAChannelResynchronisesWithTheSameChannelId() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let actions = machine.receive(report: initPacket(channelA, .initialize, nonce), now: .zero)
        #expect(actions == sends(channelA, .initialize, nonce + cidBytes(channelA) + [2, 1, 0, 0, 0x05]))
    }

    @Test func initOnAnAllocatedChannelKeepsIt() {
        var machine = CTAPHIDMachine(channelSeed: 9)
        let channel = machine.allocateChannel()
        let actions = machine.receive(report: initPacket(channel, .initialize, nonce), now: .zero)
        #expect(actions == sends(channel, .initialize, nonce + cidBytes(channel) + [2, 1, 0, 0, 0x05]))
    }

    @Test(arguments: [0, 7, 9, 17, 64])
    func initWithAPayloadOtherThanEightBytesIsInvalidLength(length: Int) {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let onBroadcast = machine.receive(report: initPacket(broadcast, .initialize, length: length, nonce), now: .zero)
        #expect(onBroadcast == [errorReport(broadcast, .invalidLength)])
        let onChannel = machine.receive(report: initPacket(channelA, .initialize, length: length, nonce), now: .zero)
        #expect(onChannel == [errorReport(channelA, .invalidLength)])
    }

    @Test func capabilitiesComeFromTheConfiguration() {
        let configuration = CTAPHIDConfiguration(capabilities: CTAPHIDConfiguration.capabilityCBOR)
        var machine = CTAPHIDMachine(configuration: configuration, channelSeed: 1)
        let actions = machine.receive(report: initPacket(channelA, .initialize, nonce), now: .zero)
        #expect(reassemble(actions).first?.payload.last == 0x04)
    }

    @Test func initDiscardsAPartialMessageOnItsChannel() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let ping = packets(channelA, .ping, pattern(100))
        #expect(machine.receive(report: ping[0], now: ms(0)).isEmpty)
        #expect(machine.assemblingChannel == channelA)

        let actions = machine.receive(report: initPacket(channelA, .initialize, nonce), now: ms(10))
        #expect(actions == sends(channelA, .initialize, nonce + cidBytes(channelA) + [2, 1, 0, 0, 0x05]))
        #expect(machine.assemblingChannel == nil)
        #expect(machine.nextDeadline == nil)
        // The rest of the discarded message is now stray.
        #expect(machine.receive(report: ping[1], now: ms(20)).isEmpty)
    }

    @Test func initOnAnotherChannelDoesNotDisturbAPartialMessage() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        let ping = packets(channelA, .ping, pattern(100))
        #expect(machine.receive(report: ping[0], now: ms(0)).isEmpty)
        let initActions = machine.receive(report: initPacket(channelB, .initialize, nonce), now: ms(1))
        #expect(initActions == sends(channelB, .initialize, nonce + cidBytes(channelB) + [2, 1, 0, 0, 0x05]))
        #expect(machine.receive(report: ping[1], now: ms(2)) == sends(channelA, .ping, pattern(100)))
    }

    @Test func initOnTheBusyChannelAbortsTheRequest() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: ms(0))

        let actions = machine.receive(report: initPacket(channelA, .initialize, nonce), now: ms(10))
        #expect(
            actions
                == [.abort(channel: channelA)]
                + sends(channelA, .initialize, nonce + cidBytes(channelA) + [2, 1, 0, 0, 0x05])
        )
        #expect(machine.busyChannel == nil)
        #expect(machine.nextDeadline == nil)
        // The response of the aborted request is discarded.
        #expect(machine.complete(channel: channelA, payload: [0x00], now: ms(20)).isEmpty)
        // The channel takes a new request at once.
        machine.startRequest(on: channelA, payload: [0x01], now: ms(30))
    }

    @Test func initFromAnotherChannelWhileBusyIsAnswered() {
        var machine = CTAPHIDMachine(channelSeed: 1)
        machine.startRequest(on: channelA, now: ms(0))

        let onChannel = machine.receive(report: initPacket(channelB, .initialize, nonce), now: ms(10))
        #expect(onChannel == sends(channelB, .initialize, nonce + cidBytes(channelB) + [2, 1, 0, 0, 0x05]))
        let onBroadcast = machine.receive(report: initPacket(broadcast, .initialize, nonce), now: ms(20))
        #expect(reassemble(onBroadcast).map(\.payload.count) == [17])
        #expect(machine.busyChannel == channelA)
        #expect(machine.complete(channel: channelA, payload: [0x00], now: ms(30)) == sends(channelA, .cbor, [0x00]))
    }

    @Test func tenThousandChannelIdsAreDistinctAndNeverReserved() {
        var machine = CTAPHIDMachine(channelSeed: 0xDEAD_BEEF)
        var seen = Set<UInt32>()
        for _ in 0..<10_000 {
            let channel = machine.allocateChannel()
            #expect(channel != 0 && channel != broadcast)
            seen.insert(channel)
        }
        #expect(seen.count == 10_000)
    }

    @Test(arguments: [UInt32(0), 1, 0x8000_0000, 0xFFFF_FFFF])
    func channelIdsAreDeterministicPerSeed(seed: UInt32) {
        var first = CTAPHIDMachine(channelSeed: seed)
        var second = CTAPHIDMachine(channelSeed: seed)
        var other = CTAPHIDMachine(channelSeed: seed &+ 12345)
        let a = (0..<5).map { _ in first.allocateChannel() }
        let b = (0..<5).map { _ in second.allocateChannel() }
        let c = (0..<5).map { _ in other.allocateChannel() }
        #expect(a == b)
        #expect(a != c)
    }

    @Test func sipHashMatchesTheReferenceVector() {
        // SipHash-2-4's reference vector for key 00 01 … 0f and the 8-byte message 00 01 … 07.
        let hash = ChannelAllocator.sipHash(0x0706_0504_0302_0100, 0x0F0E_0D0C_0B0A_0908, 0x0706_0504_0302_0100)
        #expect(hash == 0x93F5_F579_9A93_2462)
    }

    @Test func allocatorIsAPermutationThatSkipsZeroAndBroadcast() {
        var allocator = ChannelAllocator(key0: 0x0123_4567_89AB_CDEF, key1: 0xFEDC_BA98_7654_3210)
        let ids = (0..<200_000).map { _ in allocator.next() }
        #expect(Set(ids).count == ids.count)
        #expect(!ids.contains(0) && !ids.contains(0xFFFF_FFFF))
    }

    @Test func channelIdsDependOnTheKey() {
        var first = CTAPHIDMachine(channelKey: Array(repeating: 1, count: 16))
        var second = CTAPHIDMachine(channelKey: Array(repeating: 1, count: 16))
        var other = CTAPHIDMachine(channelKey: Array(repeating: 1, count: 15) + [2])
        let a = (0..<5).map { _ in first.allocateChannel() }
        #expect(a == (0..<5).map { _ in second.allocateChannel() })
        #expect(a != (0..<5).map { _ in other.allocateChannel() })
    }

    @Test func channelIdsAreNotReusedAfterAPowerCycle() {
        var machine = CTAPHIDMachine(channelSeed: 7)
        let before = Set((0..<100).map { _ in machine.allocateChannel() })
        machine.powerCycle()
        let after = Set((0..<100).map { _ in machine.allocateChannel() })
        #expect(before.isDisjoint(with: after))
    }

}
