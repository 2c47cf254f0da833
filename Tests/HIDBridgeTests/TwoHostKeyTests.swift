import CTAPCore
import CTAPCoreTesting
import CTAPHID
import Profiles
import Testing

@testable import HIDBridge
@testable import VirtualKey

/// One key plugged into two hosts (`serve --transport uhid --transport usbip`): a CTAPHID machine per host, one
/// authenticator behind them.
@Suite struct TwoHostKeyTests {
    /// A key with a second host, and each host's channel.
    func twoHosts(presence: PresenceMode = .approve(after: .zero)) throws -> (KeyHarness, UInt32, UInt32) {
        var h = try KeyHarness(presence: presence)
        h.key.addHost(channelKey: Array(repeating: 3, count: 16))
        let zero = open(&h, host: 0)
        let one = open(&h, host: 1)
        return (h, zero, one)
    }

    /// A channel for `host`, from its INIT on the broadcast channel.
    func open(_ h: inout KeyHarness, host: Int) -> UInt32 {
        let answer = messages(send(&h, host: host, command: 0x06, payload: Array(repeating: 1, count: 8)), host: host)
        let cid = answer[0].payload[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return cid
    }

    /// Sends every report of one message from `host` (`only` the first ones, for a half-sent message).
    func send(
        _ h: inout KeyHarness,
        host: Int,
        command: UInt8,
        payload: [UInt8],
        channel: UInt32 = 0xFFFF_FFFF,
        only: Int? = nil
    ) -> [KeyOutput] {
        let reports = h.reports(command: command, payload: payload, channel: channel)
        return reports.prefix(only ?? reports.count).flatMap { h.key.receive(report: $0, now: h.now, host: host) }
    }

    let ping: UInt8 = 0x01
    let lock: UInt8 = 0x04
    let error: UInt8 = 0xBF

    @Test func eachHostHasItsOwnChannels() throws {
        let (h, zero, one) = try twoHosts()
        #expect(zero != one && h.key.hostCount == 2)
        #expect(h.key.hid.busyChannel == nil && h.key.otherHosts.count == 1)
    }

    @Test func aHalfSentMessageHoldsOnlyItsOwnHost() throws {
        var (h, zero, one) = try twoHosts()
        // Host 1 sends the first packet of a 200-byte message and never the rest.
        let half = send(&h, host: 1, command: cbor, payload: Array(repeating: 0xA0, count: 200), channel: one, only: 1)
        #expect(messages(half).isEmpty)
        // Host 0 is served meanwhile (a single machine answered ERR_CHANNEL_BUSY here).
        h.now = .milliseconds(100)
        let pinged = messages(send(&h, host: 0, command: ping, payload: [1, 2, 3], channel: zero))
        #expect(pinged == [Message(channel: zero, command: 0x80 | ping, payload: [1, 2, 3])])
        let info = messages(send(&h, host: 0, command: cbor, payload: [0x04], channel: zero), host: 0)
        #expect(info.count == 1 && info[0].payload.first == 0x00)
        // Host 1's message times out for host 1 alone.
        let timedOut = h.advance(to: .milliseconds(760))
        #expect(messages(timedOut, host: 1) == [Message(channel: one, command: error, payload: [0x05])])
        #expect(messages(timedOut, host: 0).isEmpty)
    }

    @Test func aLockIsAnsweredAndHoldsOnlyItsOwnHost() throws {
        var (h, zero, one) = try twoHosts()
        let locked = send(&h, host: 1, command: lock, payload: [10], channel: one)
        #expect(messages(locked, host: 1) == [Message(channel: one, command: 0x80 | lock, payload: [])])
        // Host 0 goes on while host 1 holds its lock.
        let info = messages(send(&h, host: 0, command: cbor, payload: [0x04], channel: zero), host: 0)
        #expect(info.count == 1 && info[0].payload.first == 0x00)
        // Host 1's other channels are held, as on a key with one host.
        let other = open(&h, host: 1)
        let refused = messages(send(&h, host: 1, command: ping, payload: [9], channel: other), host: 1)
        #expect(refused == [Message(channel: other, command: error, payload: [0x06])])
    }

    @Test func theAuthenticatorServesOneRequestAtATimeAndEachAnswerGoesToItsHost() throws {
        var (h, zero, one) = try twoHosts(presence: .prompt)
        // Host 1's authenticatorSelection waits for a touch.
        let asked = send(&h, host: 1, command: cbor, payload: [0x0B], channel: one)
        #expect(asked.contains { if case .prompt = $0 { true } else { false } })
        #expect(messages(asked, host: 0).isEmpty)
        // Host 0's request hears the authenticator is busy; its CANCEL does not end host 1's request.
        let busy = messages(send(&h, host: 0, command: cbor, payload: [0x04], channel: zero), host: 0)
        #expect(busy == [Message(channel: zero, command: 0x80 | cbor, payload: [0x06])])
        _ = send(&h, host: 0, command: 0x11, payload: [], channel: zero)
        #expect(h.key.pendingPrompt != nil)
        // Nor does a CANCEL or an abort for host 0's channel reaching the key (its machine has none in flight, but
        // the key checks the route itself).
        #expect(h.key.perform([.cancel(channel: zero), .abort(channel: zero)], host: 0, now: h.now).isEmpty)
        #expect(h.key.pendingPrompt != nil)
        // The touch answers host 1 only.
        let answered = h.key.touch(now: h.now)
        #expect(messages(answered, host: 1).last == Message(channel: one, command: 0x80 | cbor, payload: [0x00]))
        #expect(messages(answered, host: 0).isEmpty)
        // Host 1's CANCEL ends its own request.
        _ = send(&h, host: 1, command: cbor, payload: [0x0B], channel: one)
        let cancelled = messages(send(&h, host: 1, command: 0x11, payload: [], channel: one), host: 1)
        #expect(cancelled.last == Message(channel: one, command: 0x80 | cbor, payload: [0x2D]))
    }

    @Test func aReportForAHostTheKeyIsNotPluggedIntoIsIgnored() throws {
        var h = try KeyHarness(presence: .approve(after: .zero))
        let initRequest = h.reports(command: 0x06, payload: Array(repeating: 1, count: 8), channel: 0xFFFF_FFFF)[0]
        #expect(h.key.receive(report: initRequest, now: .zero, host: 3).isEmpty)
        #expect(!h.key.receive(report: initRequest, now: .zero, host: 0).isEmpty)
    }
}

/// getNextAssertion from another CTAPHID channel than the getAssertion that began it: continued by default (the
/// state is the key's), NOT_ALLOWED where the profile says so (OpenSK).
@Suite struct NextFromAnotherChannelTests {
    func key(_ choice: ProfileBehaviour.NextFromAnotherChannel) throws -> KeyHarness {
        var profile = try ProfileFile.load("fidosim")
        profile.profile.behaviour.nextFromAnotherChannel = choice
        return try KeyHarness(presence: .approve(after: .zero), profile: profile)
    }

    /// Two discoverable credentials for one RP, a getAssertion on `first`, then getNextAssertion on `second`.
    func next(_ h: inout KeyHarness, first: UInt32, second: UInt32) -> [UInt8]? {
        for id in [1, 2] as [UInt8] {
            let request = CTAPRequests.message(
                .makeCredential,
                CTAPRequests.makeCredential(user: CTAPRequests.user(id: [id]), rk: true)
            )
            let made = messages(sendAll(&h, request, channel: first) + h.advance(to: h.now + .milliseconds(10)))
            #expect(made.last?.payload.first == 0x00)
        }
        let asked = messages(
            sendAll(&h, CTAPRequests.message(.getAssertion, CTAPRequests.getAssertion()), channel: first)
                + h.advance(to: h.now + .milliseconds(10))
        )
        #expect(asked.last?.payload.first == 0x00)
        return messages(sendAll(&h, [0x08], channel: second)).last?.payload
    }

    func sendAll(_ h: inout KeyHarness, _ payload: [UInt8], channel: UInt32) -> [KeyOutput] {
        let now = h.now
        return h.reports(command: cbor, payload: payload, channel: channel).flatMap {
            h.key.receive(report: $0, now: now)
        }
    }

    @Test func continuedByDefault() throws {
        var h = try key(.continued)
        #expect(next(&h, first: 0x0101_0101, second: 0x0202_0202)?.first == 0x00)
    }

    @Test func notAllowedWhereTheProfileSays() throws {
        var h = try key(.notAllowed)
        #expect(next(&h, first: 0x0101_0101, second: 0x0202_0202) == [CTAPStatus.notAllowed.rawValue])
        // On the channel that began it, the next credential comes.
        var same = try key(.notAllowed)
        #expect(next(&same, first: 0x0101_0101, second: 0x0101_0101)?.first == 0x00)
    }
}
