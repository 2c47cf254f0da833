import Testing

@testable import HIDBridge
@testable import VirtualKey

@Suite struct UDPRouterTests {
    let a = UDPPeer(address: 0x7F00_0001, port: 40001)
    let b = UDPPeer(address: 0x7F00_0001, port: 40002)
    let channel: UInt32 = 0x1122_3344

    /// An initialization report: channel, command (with the high bit), payload length.
    func initReport(_ channel: UInt32, _ command: UInt8, length: Int) -> [UInt8] {
        [
            UInt8(channel >> 24), UInt8(channel >> 16 & 0xFF), UInt8(channel >> 8 & 0xFF), UInt8(channel & 0xFF),
            command, UInt8(length >> 8), UInt8(length & 0xFF),
        ] + Array(repeating: 0, count: 57)
    }

    func continuation(_ channel: UInt32, _ sequence: UInt8) -> [UInt8] {
        [
            UInt8(channel >> 24), UInt8(channel >> 16 & 0xFF), UInt8(channel >> 8 & 0xFF), UInt8(channel & 0xFF),
            sequence,
        ] + Array(repeating: 0, count: 59)
    }

    /// The key's answer to an INIT on the broadcast channel, giving `channel`, sent through the router.
    func give(_ router: inout UDPRouter, _ channel: UInt32) {
        var answer = initReport(0xFFFF_FFFF, 0x86, length: 17)
        answer.replaceSubrange(
            15..<19,
            with: [
                UInt8(channel >> 24), UInt8(channel >> 16 & 0xFF), UInt8(channel >> 8 & 0xFF), UInt8(channel & 0xFF),
            ]
        )
        _ = router.outbound(answer, now: .zero)
    }

    func busy(_ channel: UInt32) -> [UInt8] {
        Array(initReport(channel, 0xBF, length: 1).prefix(7)) + [0x06] + Array(repeating: 0, count: 56)
    }

    @Test func anAnswerGoesOnlyToTheSenderOfItsRequestAndOthersAreToldTheChannelIsBusy() {
        var router = UDPRouter()
        give(&router, channel)
        #expect(router.inbound(initReport(channel, 0x90, length: 10), from: a, now: .zero) == .deliver)
        // Anything from B on A's channel while A's answer is owed (an empty-payload report, a continuation).
        #expect(
            router.inbound(initReport(channel, 0x90, length: 0), from: b, now: .milliseconds(1))
                == .refuse(busy(channel))
        )
        #expect(router.inbound(continuation(channel, 0), from: b, now: .milliseconds(2)) == .refuse(busy(channel)))
        // Keepalives and the answer (200 bytes: the first report and three continuations) go to A.
        #expect(router.outbound(initReport(channel, 0xBB, length: 1), now: .milliseconds(3)) == a)
        #expect(router.outbound(initReport(channel, 0x90, length: 200), now: .milliseconds(4)) == a)
        #expect(router.outbound(continuation(channel, 0), now: .milliseconds(4)) == a)
        #expect(router.outbound(continuation(channel, 1), now: .milliseconds(4)) == a)
        #expect(
            router.inbound(initReport(channel, 0x90, length: 0), from: b, now: .milliseconds(5))
                == .refuse(busy(channel))
        )
        #expect(router.outbound(continuation(channel, 2), now: .milliseconds(6)) == a)
        // The answer is complete: the channel is free, and B's request (and its answer) are B's.
        #expect(router.inbound(initReport(channel, 0x90, length: 1), from: b, now: .milliseconds(7)) == .deliver)
        #expect(router.outbound(initReport(channel, 0x90, length: 1), now: .milliseconds(8)) == b)
    }

    @Test func twoClientsOnTheBroadcastChannelEachGetTheirOwnInitAnswer() {
        var router = UDPRouter()
        let broadcast: UInt32 = 0xFFFF_FFFF
        #expect(router.inbound(initReport(broadcast, 0x86, length: 8), from: a, now: .zero) == .deliver)
        #expect(router.inbound(initReport(broadcast, 0x86, length: 8), from: b, now: .zero) == .refuse(busy(broadcast)))
        #expect(router.outbound(initReport(broadcast, 0x86, length: 17), now: .zero) == a)
        #expect(router.inbound(initReport(broadcast, 0x86, length: 8), from: b, now: .zero) == .deliver)
        #expect(router.outbound(initReport(broadcast, 0x86, length: 17), now: .zero) == b)
    }

    @Test func aChannelSilentForFiveSecondsIsFreed() {
        var router = UDPRouter()
        give(&router, channel)
        #expect(router.inbound(initReport(channel, 0x90, length: 100), from: a, now: .zero) == .deliver)
        #expect(
            router.inbound(initReport(channel, 0x90, length: 1), from: b, now: .seconds(4)) == .refuse(busy(channel))
        )
        #expect(router.inbound(initReport(channel, 0x90, length: 1), from: b, now: .seconds(5)) == .deliver)
    }

    @Test func aCancelAsksNothingOfItsOwn() {
        var router = UDPRouter()
        give(&router, channel)
        #expect(router.inbound(initReport(channel, 0x91, length: 0), from: a, now: .zero) == .deliver)
        #expect(router.inbound(initReport(channel, 0x90, length: 1), from: b, now: .zero) == .deliver)
    }

    @Test func aChannelTheKeyNeverGaveIsRefusedWithInvalidChannel() {
        var router = UDPRouter()
        let invalid = Array(initReport(channel, 0xBF, length: 1).prefix(7)) + [0x0B] + Array(repeating: 0, count: 56)
        #expect(router.inbound(initReport(channel, 0x90, length: 1), from: a, now: .zero) == .refuse(invalid))
        #expect(router.inbound(initReport(channel, 0x86, length: 8), from: a, now: .zero) == .refuse(invalid))
        #expect(router.inbound(continuation(channel, 0), from: a, now: .zero) == .ignore)
        // The broadcast channel is open to INIT, and the channel the answer gives is open after it.
        #expect(router.inbound(initReport(0xFFFF_FFFF, 0x86, length: 8), from: a, now: .zero) == .deliver)
        give(&router, channel)
        #expect(router.inbound(initReport(channel, 0x90, length: 1), from: b, now: .zero) == .deliver)
        // A power cycle does not close it: clients keep their channels.
        router.release()
        #expect(router.inbound(initReport(channel, 0x90, length: 1), from: b, now: .seconds(1)) == .deliver)
    }

    @Test func shortDatagramsAndUnknownChannelsGoNowhere() {
        var router = UDPRouter()
        give(&router, channel)
        #expect(router.inbound([], from: a, now: .zero) == .ignore)
        #expect(router.inbound([1, 2, 3, 4], from: a, now: .zero) == .ignore)
        #expect(router.outbound(initReport(channel, 0x90, length: 1), now: .zero) == nil)
        #expect(router.inbound(initReport(channel, 0x90, length: 1), from: a, now: .zero) == .deliver)
    }

    @Test func aPowerCycleFreesEveryChannelAndKeepsWhoSpokeLast() {
        var router = UDPRouter()
        give(&router, channel)
        #expect(router.inbound(initReport(channel, 0x90, length: 100), from: a, now: .zero) == .deliver)
        router.release()
        #expect(router.outbound(initReport(channel, 0xBF, length: 1), now: .zero) == a)
        #expect(router.inbound(initReport(channel, 0x90, length: 1), from: b, now: .zero) == .deliver)
    }

    @Test func aFloodOfChannelsIsBounded() {
        var router = UDPRouter()
        router.maxClaims = 100
        for i in 1...10_000 {
            give(&router, UInt32(i))
            _ = router.inbound(initReport(UInt32(i), 0x90, length: 1), from: b, now: .milliseconds(i))
            #expect(router.claims.count <= 101)
        }
        // The newest claims survive.
        #expect(router.outbound(initReport(10_000, 0x90, length: 1), now: .seconds(10)) == b)
    }
}
