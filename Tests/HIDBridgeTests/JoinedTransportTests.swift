import CTAPHID
import Logging
import Testing

@testable import HIDBridge
@testable import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// A host's end of a report transport, in memory: what it sent waits in `inbox`, what the key sent lands in `heard`.
final class MemoryHost: ReportTransport {
    var inbox: [TransportEvent] = []
    var heard: [[UInt8]] = []
    var replugs = 0
    var descriptor: Int32 { -1 }
    var summary: String { "memory" }
    func receive() -> TransportEvent? { inbox.isEmpty ? nil : inbox.removeFirst() }
    func send(_ report: [UInt8]) { heard.append(report) }
    func replug() throws(TransportError) { replugs += 1 }
}

func cidBytes(_ cid: UInt32) -> [UInt8] {
    [UInt8(cid >> 24), UInt8(cid >> 16 & 0xFF), UInt8(cid >> 8 & 0xFF), UInt8(cid & 0xFF)]
}

/// Whether `routes` lets `report` go out to `host` (a function, so that `#expect` does not split the mutating call).
func goesOut(_ routes: inout ChannelRoutes, _ report: [UInt8], to host: Int) -> Bool {
    routes.outbound(report, to: host)
}

@Suite struct ChannelRoutesTests {
    func initAnswer(assigning cid: UInt32) -> [UInt8] {
        cidBytes(0xFFFF_FFFF) + [0x86, 0, 17] + Array(repeating: 9, count: 8) + cidBytes(cid) + [2, 1, 0, 0, 5]
            + Array(repeating: 0, count: 40)
    }

    @Test func theInitAnswerGivesTheNewChannelToTheHostItGoesTo() {
        var routes = ChannelRoutes()
        #expect(routes.inbound(cidBytes(0xFFFF_FFFF) + [0x86, 0, 8], from: 1) == .deliver)
        #expect(goesOut(&routes, initAnswer(assigning: 7), to: 1))
        #expect(goesOut(&routes, initAnswer(assigning: 8), to: 0))
        // Other answers teach nothing: a keepalive, or an INIT answer on a channel (a resynchronisation); and
        // nothing goes out on a channel the host was not given.
        #expect(!goesOut(&routes, cidBytes(9) + [0xBB, 0, 1, 1], to: 0))
        #expect(!goesOut(&routes, cidBytes(7) + [0x86, 0, 17] + Array(repeating: 9, count: 8) + cidBytes(10), to: 0))
        #expect(goesOut(&routes, cidBytes(8) + [0x86, 0, 17] + Array(repeating: 9, count: 8) + cidBytes(8), to: 0))
        #expect(routes.channels == [1: [7], 0: [8]])
        // Two hosts' machines may give the same id: a channel of each.
        #expect(goesOut(&routes, initAnswer(assigning: 7), to: 0))
        #expect(routes.channels == [1: [7], 0: [7, 8]])
        #expect(routes.inbound(cidBytes(7) + [0x81, 0, 1, 4], from: 1) == .deliver)
    }

    @Test func aHostReachesTheKeyOnlyOnItsOwnChannels() {
        var routes = ChannelRoutes()
        _ = routes.outbound(initAnswer(assigning: 0x1234), to: 0)
        #expect(routes.inbound(cidBytes(0x1234) + [0x90, 0, 1, 4], from: 0) == .deliver)
        // Host 1 on host 0's channel, or on a channel nobody was given: ERR_INVALID_CHANNEL, the key hears nothing.
        let invalid = cidBytes(0x1234) + [0xBF, 0, 1, 0x0B] + Array(repeating: 0, count: 56)
        #expect(routes.inbound(cidBytes(0x1234) + [0x90, 0, 1, 4], from: 1) == .refuse(invalid))
        #expect(routes.inbound(cidBytes(0x5555) + [0x90, 0, 1, 4], from: 0) != .deliver)
        #expect(routes.inbound(cidBytes(0x1234) + [0x00] + Array(repeating: 0, count: 59), from: 1) == .drop)
        #expect(routes.inbound([1, 2], from: 0) == .drop)
        #expect(!goesOut(&routes, [1, 2], to: 0))
    }

    @Test func aHostCannotPushAnotherHostsChannelsOut() {
        var routes = ChannelRoutes()
        _ = routes.outbound(initAnswer(assigning: 1), to: 0)
        for cid in 2...UInt32(ChannelRoutes.capacity + 500) { _ = routes.outbound(initAnswer(assigning: cid), to: 1) }
        #expect(routes.channels[0] == [1])
        #expect(routes.channels[1]?.count == ChannelRoutes.capacity)
        // Host 1's oldest went instead.
        #expect(routes.channels[1]?.contains(2) == false)
        #expect(routes.channels[1]?.contains(UInt32(ChannelRoutes.capacity + 500)) == true)
        // A host that leaves: its channels are forgotten.
        routes.hostLeft(0)
        #expect(routes.channels[0] == nil)
        #expect(!goesOut(&routes, cidBytes(1) + [0x90, 0, 1, 0x2D], to: 0), "nothing goes to a host that left")
        routes.reset()
        #expect(routes.channels.isEmpty)
    }
}

@Suite struct JoinedTransportTests {
    /// One key (the factory's) behind two in-memory hosts, through the loop's own service path.
    func twoHosts(
        presence: PresenceMode = .approve(after: .zero)
    ) throws -> (SlotIO, MemoryHost, MemoryHost, KeyHarness) {
        var harness = try KeyHarness(presence: presence)
        harness.key.addHost(channelKey: Array(repeating: 9, count: 16))
        let a = MemoryHost()
        let b = MemoryHost()
        let joined = try JoinedTransport([a, b])
        let io = SlotIO(key: harness.key, transport: joined, logger: Logger(label: "t"))
        return (io, a, b, harness)
    }

    func serviceOnce(_ io: SlotIO) {
        let ready = [
            pollfd(fd: 0, events: Int16(POLLIN), revents: Int16(POLLIN)),
            pollfd(fd: -1, events: Int16(POLLIN), revents: 0),
        ]
        _ = io.service(ready[...], powerCycles: 0)
    }

    func initRequest(_ harness: KeyHarness, nonce: UInt8) -> TransportEvent {
        .report(harness.reports(command: 0x06, payload: Array(repeating: nonce, count: 8), channel: 0xFFFF_FFFF)[0])
    }

    @Test func eachHostGetsItsOwnChannelAndOnlyItsOwnAnswers() throws {
        let (io, a, b, harness) = try twoHosts()
        // Both hosts ask for a channel before the key looks: each answer goes to the host that asked.
        a.inbox = [initRequest(harness, nonce: 0xAA)]
        b.inbox = [initRequest(harness, nonce: 0xBB)]
        serviceOnce(io)
        serviceOnce(io)
        let answerA = messages(a.heard.map { KeyOutput.report($0) })
        let answerB = messages(b.heard.map { KeyOutput.report($0) })
        #expect(answerA.count == 1 && answerB.count == 1)
        #expect(Array(answerA[0].payload.prefix(8)) == Array(repeating: 0xAA, count: 8))
        #expect(Array(answerB[0].payload.prefix(8)) == Array(repeating: 0xBB, count: 8))
        let channelA = ChannelRoutes.channel(Array(answerA[0].payload[8..<12]))!
        let channelB = ChannelRoutes.channel(Array(answerB[0].payload[8..<12]))!
        #expect(channelA != channelB)
        a.heard.removeAll()
        b.heard.removeAll()
        // getInfo from B, then PING from A: the answers do not cross.
        b.inbox = harness.reports(command: 0x10, payload: [0x04], channel: channelB).map { TransportEvent.report($0) }
        serviceOnce(io)
        a.inbox = harness.reports(command: 0x01, payload: [1, 2, 3], channel: channelA).map {
            TransportEvent.report($0)
        }
        serviceOnce(io)
        let toB = messages(b.heard.map { KeyOutput.report($0) })
        let toA = messages(a.heard.map { KeyOutput.report($0) })
        #expect(
            toB.map(\.channel) == [channelB] && toB.first?.payload.first == 0x00 && (toB.first?.payload.count ?? 0) > 50
        )
        #expect(toA.map(\.channel) == [channelA] && toA.first?.payload == [1, 2, 3])
    }

    /// Host A's channel, from an INIT through the loop.
    func channel(_ io: SlotIO, _ host: MemoryHost, _ harness: KeyHarness) -> UInt32 {
        host.inbox = [initRequest(harness, nonce: 7)]
        serviceOnce(io)
        let answer = messages(host.heard.map { KeyOutput.report($0) })
        host.heard.removeAll()
        return ChannelRoutes.channel(Array(answer[0].payload[8..<12]))!
    }

    @Test func aHostDetachingEndsItsRequestsAndTheOtherHostKeepsThePoweredKey() throws {
        let (io, a, b, harness) = try twoHosts(presence: .prompt)
        let channelA = channel(io, a, harness)
        let channelB = channel(io, b, harness)
        // B's authenticatorSelection waits for a touch; then B's host detaches the key.
        b.inbox = harness.reports(command: 0x10, payload: [0x0B], channel: channelB).map { TransportEvent.report($0) }
        serviceOnce(io)
        #expect(io.slot.key.pendingPrompt != nil)
        b.heard.removeAll()
        b.inbox = [.detached]
        serviceOnce(io)
        #expect(io.slot.key.pendingPrompt == nil, "the detached host's request was cancelled")
        #expect(a.replugs == 0 && b.replugs == 0, "no power cycle: A still powers the key")
        #expect(b.heard.isEmpty && a.heard.isEmpty, "the cancelled request's answer goes nowhere")
        // A's channel lives on, and the authenticator is free for it (getInfo answers, not CHANNEL_BUSY).
        a.inbox = harness.reports(command: 0x10, payload: [0x04], channel: channelA).map { TransportEvent.report($0) }
        serviceOnce(io)
        let info = messages(a.heard.map { KeyOutput.report($0) })
        #expect(info.count == 1 && info.first?.channel == channelA && info.first?.payload.first == 0x00)
    }

    @Test func aHostDetachingEndsItsLockAndHalfSentMessage() throws {
        let (io, _, b, harness) = try twoHosts()
        let channelB = channel(io, b, harness)
        // B locks its channels and leaves a message half sent, then detaches.
        b.inbox = harness.reports(command: 0x04, payload: [10], channel: channelB).map { TransportEvent.report($0) }
        b.inbox += [
            TransportEvent.report(
                harness.reports(
                    command: 0x10,
                    payload: Array(repeating: 1, count: 100),
                    channel: channelB
                )[0]
            )
        ]
        serviceOnce(io)
        #expect(io.slot.key.otherHosts[0].lockedChannel == channelB)
        b.inbox = [.detached]
        serviceOnce(io)
        #expect(io.slot.key.otherHosts[0].lockedChannel == nil && io.slot.key.otherHosts[0].assemblingChannel == nil)
        // The next host to attach gets a fresh channel and is served at once.
        b.heard.removeAll()
        let fresh = channel(io, b, harness)
        #expect(fresh != channelB)
        b.inbox = harness.reports(command: 0x01, payload: [7], channel: fresh).map { TransportEvent.report($0) }
        serviceOnce(io)
        #expect(
            messages(b.heard.map { KeyOutput.report($0) }) == [Message(channel: fresh, command: 0x81, payload: [7])]
        )
    }

    @Test func aPowerCycleFromAnyHostReachesEveryHost() throws {
        let (io, a, b, harness) = try twoHosts()
        _ = channel(io, a, harness)
        b.inbox = [.powerCycle]
        serviceOnce(io)
        #expect(a.replugs == 1 && b.replugs == 1)
        let joined = try #require(io.transport as? JoinedTransport)
        #expect(joined.routes.channels.isEmpty)
    }
}
