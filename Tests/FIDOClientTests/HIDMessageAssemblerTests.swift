import Testing

@testable import FIDOClient

@Suite struct HIDMessageAssemblerTests {
    static let channel: UInt32 = 0x0102_0304
    static let mine: [UInt8] = [1, 2, 3, 4]

    static func report(_ bytes: [UInt8]) -> [UInt8] { bytes + [UInt8](repeating: 0, count: 64 - bytes.count) }

    @Test func passesOverOtherChannelsAndHandsBackKeepalives() throws {
        var assembler = HIDMessageAssembler(channel: Self.channel)
        #expect(try assembler.add(Self.report([9, 9, 9, 9, 0x90, 0, 1, 7])) == .pending)
        #expect(try assembler.add([1, 2, 3]) == .pending)
        #expect(try assembler.add(Self.report(Self.mine + [0xBB, 0, 1, 2])) == .keepalive(2))
        #expect(try assembler.add(Self.mine + [0xBB, 0, 1]) == .keepalive(0))
        #expect(
            try assembler.add(Self.report(Self.mine + [0x90, 0, 3, 0, 0xA1, 0x01]))
                == .message(HIDMessage(channel: Self.channel, command: 0x90, payload: [0, 0xA1, 0x01]))
        )
    }

    @Test func joinsContinuationPacketsInOrder() throws {
        var assembler = HIDMessageAssembler(channel: Self.channel)
        let payload = (0..<120).map { UInt8($0) }
        #expect(try assembler.add(Self.report(Self.mine + [0x81, 0, 120] + payload[0..<57])) == .pending)
        #expect(try assembler.add(Self.report(Self.mine + [0] + payload[57..<116])) == .pending)
        #expect(
            try assembler.add(Self.report(Self.mine + [1] + payload[116...]))
                == .message(HIDMessage(channel: Self.channel, command: 0x81, payload: payload))
        )
        // The next message starts afresh.
        #expect(
            try assembler.add(Self.report(Self.mine + [0xBF, 0, 1, 6]))
                == .message(HIDMessage(channel: Self.channel, command: 0xBF, payload: [6]))
        )
    }

    @Test func refusesWhatNoAnswerLooksLike() {
        var early = HIDMessageAssembler(channel: Self.channel)
        #expect(throws: ClientError.self) { try early.add(Self.report(Self.mine + [0])) }
        var skipped = HIDMessageAssembler(channel: Self.channel)
        _ = try? skipped.add(Self.report(Self.mine + [0x81, 0, 120]))
        #expect(throws: ClientError.self) { try skipped.add(Self.report(Self.mine + [1])) }
        var huge = HIDMessageAssembler(channel: Self.channel)
        #expect(throws: ClientError.self) { try huge.add(Self.report(Self.mine + [0x90, 0xFF, 0xFF])) }
        var short = HIDMessageAssembler(channel: Self.channel)
        #expect(throws: ClientError.self) { try short.add(Self.mine + [0x90, 0]) }
    }
}
