import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import CTAPHID
import Profiles
import Testing

@testable import HIDBridge
@testable import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// Drives a whole ``VirtualKey`` (framing, authenticator, simulated user) with a mock clock.
struct KeyHarness {
    var key: VirtualKey
    var now: Duration = .zero
    let channel: UInt32 = 0x0102_0304

    /// The key `serve` would build (its recipe's defaults, the built-in profile), over memory and seeded entropy.
    init(
        presence: PresenceMode,
        resetWindow: Bool = true,
        profile: ProfileFile? = nil,
        spec: KeySpec = KeySpec()
    ) throws {
        var recipe = KeyRecipe()
        recipe.resetWindow = resetWindow
        key = try recipe.makeKey(
            spec,
            profile: try profile ?? ProfileFile.load(spec.profile),
            storage: MemoryStorage(deviceSecret: Array(repeating: 7, count: 32)),
            entropy: EntropySource(SeededGenerator(seed: 42)),
            presence: presence
        )
    }

    /// The reports of one message on `channel`.
    func reports(command: UInt8, payload: [UInt8], channel: UInt32? = nil) -> [[UInt8]] {
        let cid = channel ?? self.channel
        let cidBytes = [UInt8(cid >> 24), UInt8((cid >> 16) & 0xFF), UInt8((cid >> 8) & 0xFF), UInt8(cid & 0xFF)]
        var out: [[UInt8]] = []
        var first = cidBytes + [0x80 | command, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        first += payload.prefix(57)
        out.append(first + Array(repeating: 0, count: 64 - first.count))
        var rest = payload.dropFirst(57)
        var seq: UInt8 = 0
        while !rest.isEmpty {
            var packet = cidBytes + [seq] + rest.prefix(59)
            packet += Array(repeating: 0, count: 64 - packet.count)
            out.append(packet)
            rest = rest.dropFirst(59)
            seq += 1
        }
        return out
    }

    mutating func send(command: UInt8, payload: [UInt8]) -> [KeyOutput] {
        reports(command: command, payload: payload).flatMap { key.receive(report: $0, now: now) }
    }

    mutating func advance(to time: Duration) -> [KeyOutput] {
        now = time
        return key.tick(now: now)
    }
}

/// One reassembled message from the key.
struct Message: Equatable {
    var channel: UInt32
    var command: UInt8
    var payload: [UInt8]
}

/// Reassembles the reports among `outputs` (those to `host` when given) into messages (each response here fits the
/// tests' sizes).
func messages(_ outputs: [KeyOutput], host: Int? = nil) -> [Message] {
    var result: [Message] = []
    var current: (Message, Int)?
    for case .report(let r, let to) in outputs where host == nil || to == host {
        #expect(r.count == 64)
        let cid = UInt32(r[0]) << 24 | UInt32(r[1]) << 16 | UInt32(r[2]) << 8 | UInt32(r[3])
        if r[4] & 0x80 != 0 {
            let length = Int(r[5]) << 8 | Int(r[6])
            var m = Message(channel: cid, command: r[4], payload: Array(r[7..<min(64, 7 + length)]))
            if m.payload.count == length {
                result.append(m)
                current = nil
            } else {
                m.payload.reserveCapacity(length)
                current = (m, length)
            }
        } else if case (var m, let length)? = current {
            m.payload += r[5..<min(64, 5 + length - m.payload.count)]
            if m.payload.count == length {
                result.append(m)
                current = nil
            } else {
                current = (m, length)
            }
        }
    }
    return result
}

func makeCredentialRequest(rk: Bool = false) -> [UInt8] {
    CTAPRequests.message(.makeCredential, CTAPRequests.makeCredential(rk: rk))
}

let cbor: UInt8 = 0x10
let msg: UInt8 = 0x03
let keepalive: UInt8 = 0xBB

@Suite struct VirtualKeyTests {
    @Test func getInfoAnswersAtOnce() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(200)))
        let out = messages(h.send(command: cbor, payload: [0x04]))
        #expect(out.count == 1)
        #expect(out[0].command == 0x90 && out[0].payload.first == 0x00)
        let info = try CBORDecoder.decode(Array(out[0].payload.dropFirst()))
        #expect(info[1] == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1", "FIDO_2_3"])
    }

    @Test func approveSendsUpNeededThenAnswersAfterTheDelay() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(200)))
        let first = messages(h.send(command: cbor, payload: makeCredentialRequest()))
        #expect(first == [Message(channel: h.channel, command: keepalive, payload: [2])])
        #expect(h.key.pendingPrompt?.rpId == "example.com")
        #expect(h.key.pendingPrompt?.userName == "alice")
        let mid = messages(h.advance(to: .milliseconds(199)))
        #expect(mid.allSatisfy { $0.command == keepalive && $0.payload == [2] })
        #expect(!mid.isEmpty)  // keepalives at 75 and 150 ms
        let done = messages(h.advance(to: .milliseconds(200)))
        #expect(done.count == 1)
        #expect(done[0].command == 0x90 && done[0].payload.first == 0x00)
        #expect(h.key.pendingPrompt == nil)
    }

    @Test func denyAnswersOperationDenied() throws {
        var h = try KeyHarness(presence: .deny(after: .milliseconds(50)))
        _ = h.send(command: cbor, payload: makeCredentialRequest())
        let done = messages(h.advance(to: .milliseconds(50)))
        #expect(done.last?.payload == [CTAPStatus.operationDenied.rawValue])
    }

    @Test func promptWaitsForATouch() throws {
        var h = try KeyHarness(presence: .prompt)
        let out = h.send(command: cbor, payload: makeCredentialRequest(rk: true))
        #expect(out.contains { if case .prompt(let p) = $0 { p.command == "makeCredential" } else { false } })
        #expect(messages(h.advance(to: .seconds(5))).allSatisfy { $0.command == keepalive })
        h.now = .seconds(6)
        let touched = messages(h.key.touch(now: h.now))
        #expect(touched.count == 1 && touched[0].payload.first == 0x00)
    }

    @Test func promptTimesOutAfterThirtySeconds() throws {
        var h = try KeyHarness(presence: .prompt)
        _ = h.send(command: cbor, payload: makeCredentialRequest())
        let late = messages(h.advance(to: .seconds(30)))
        #expect(late.last?.payload == [CTAPStatus.userActionTimeout.rawValue])
    }

    @Test func refusingAPromptDeniesTheRequest() throws {
        var h = try KeyHarness(presence: .prompt)
        _ = h.send(command: cbor, payload: makeCredentialRequest())
        h.now = .seconds(2)
        let refused = messages(h.key.refuse(now: h.now))
        #expect(refused.last?.payload == [CTAPStatus.operationDenied.rawValue])
        #expect(h.key.pendingPrompt == nil)
        #expect(h.key.refuse(now: h.now).isEmpty)  // nothing waits any more
    }

    @Test func cancelEndsTheWait() throws {
        var h = try KeyHarness(presence: .prompt)
        _ = h.send(command: cbor, payload: makeCredentialRequest())
        let out = messages(h.send(command: 0x11, payload: []))
        #expect(out == [Message(channel: h.channel, command: 0x90, payload: [CTAPStatus.keepaliveCancel.rawValue])])
        #expect(h.key.pendingPrompt == nil)
        #expect(h.key.nextDeadline == nil)
    }

    @Test func u2fRegisterApprovesAtOnce() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(200)))
        let apdu: [UInt8] = [0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x40] + Array(repeating: 0x11, count: 64) + [0, 0]
        let out = messages(h.send(command: msg, payload: apdu))
        #expect(out.count == 1)
        #expect(out[0].command == 0x83)
        #expect(out[0].payload.first == 0x05)
        #expect(out[0].payload.suffix(2) == [0x90, 0x00])
    }

    @Test func u2fInPromptModeNeedsATouchBeforeTheRetry() throws {
        var h = try KeyHarness(presence: .prompt)
        let apdu: [UInt8] = [0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x40] + Array(repeating: 0x11, count: 64) + [0, 0]
        let first = h.send(command: msg, payload: apdu)
        #expect(first.contains { if case .prompt = $0 { true } else { false } })
        #expect(messages(first).last?.payload == [0x69, 0x85])
        h.now = .seconds(1)
        #expect(h.key.touch(now: h.now).isEmpty)
        h.now = .seconds(2)
        let retry = messages(h.send(command: msg, payload: apdu))
        #expect(retry.last?.payload.suffix(2) == [0x90, 0x00])
        // The touch is used up.
        h.now = .seconds(3)
        #expect(messages(h.send(command: msg, payload: apdu)).last?.payload == [0x69, 0x85])
    }

    @Test func u2fTouchExpires() throws {
        var h = try KeyHarness(presence: .prompt)
        let apdu: [UInt8] = [0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x40] + Array(repeating: 0x11, count: 64) + [0, 0]
        _ = h.key.touch(now: .zero)
        h.now = .milliseconds(10_001)
        #expect(messages(h.send(command: msg, payload: apdu)).last?.payload == [0x69, 0x85])
    }

    @Test func powerCycleDropsTheWaitingRequestAndKeepsCredentials() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(100)))
        _ = h.send(command: cbor, payload: makeCredentialRequest(rk: true))
        _ = h.advance(to: .milliseconds(100))
        #expect(h.key.authenticator.storage.residentCredentials.count == 1)
        _ = h.send(command: cbor, payload: makeCredentialRequest(rk: true))
        h.key.powerCycle(now: .milliseconds(150))
        #expect(h.key.nextDeadline == nil)
        #expect(messages(h.advance(to: .seconds(1))).isEmpty)
        #expect(h.key.authenticator.storage.residentCredentials.count == 1)
        // The same channel keeps working after the power cycle.
        let info = messages(h.send(command: cbor, payload: [0x04]))
        #expect(info.first?.payload.first == 0x00)
    }

    @Test func aBusyKeyAnswersOtherChannelsAtOnce() throws {
        var h = try KeyHarness(presence: .prompt)
        _ = h.send(command: cbor, payload: makeCredentialRequest())
        let other = h.reports(command: cbor, payload: [0x04], channel: 0x0A0B_0C0D)
        let out = messages(other.flatMap { h.key.receive(report: $0, now: h.now) })
        #expect(out == [Message(channel: 0x0A0B_0C0D, command: 0xBF, payload: [0x06])])
    }

    @Test(arguments: ["approve", "deny", "prompt", "delay:0", "delay:1500"])
    func presenceArgumentsParse(_ argument: String) {
        #expect(PresenceMode(argument: argument) != nil)
    }

    @Test(arguments: ["", "yes", "delay:", "delay:-1", "delay:abc", "delay:9999999"])
    func badPresenceArgumentsAreRefused(_ argument: String) {
        #expect(PresenceMode(argument: argument) == nil)
    }

    @Test func powerCycleDatagramIsTheDocumentedOne() {
        #expect(UDPTransport.powerCycleDatagram.count == 64)
        #expect(Hex.string(UDPTransport.powerCycleDatagram).hasPrefix("ac1052ca"))
        #expect(Hex.string(UDPTransport.powerCycleDatagram).hasSuffix("7250dc"))
    }
}

@Suite struct UDPTransportTests {
    @Test func datagramsRoundTripToTheLatestSender() throws {
        let transport = try UDPTransport(host: "127.0.0.1", port: 0)
        #expect(transport.port != 0)
        let client = try UDPTransport(host: "127.0.0.1", port: 0)
        // Client "sends" by making the server its peer: send a datagram from client to server.
        try client.sendTo(port: transport.port, [UInt8](repeating: 0x5A, count: 64))
        var received: [UInt8]?
        for _ in 0..<100 where received == nil {
            received = transport.receiveDatagram()
            if received == nil { usleep(1000) }
        }
        #expect(received == [UInt8](repeating: 0x5A, count: 64))
        transport.send([UInt8](repeating: 0xA5, count: 64))
        var back: [UInt8]?
        for _ in 0..<100 where back == nil {
            back = client.receiveDatagram()
            if back == nil { usleep(1000) }
        }
        #expect(back == [UInt8](repeating: 0xA5, count: 64))
    }

    @Test func receiveAllDrainsMoreThanOneBatchInOrder() throws {
        let transport = try UDPTransport(host: "127.0.0.1", port: 0)
        let client = try UDPTransport(host: "127.0.0.1", port: 0)
        // 40 reports (more than one recvmmsg's 32), an oversized datagram cut to 65 bytes, the power-cycle datagram.
        var sent = (0..<40).map { [UInt8](repeating: UInt8($0), count: 64) }
        sent.append([UInt8](repeating: 0xEE, count: 100))
        sent.append(UDPTransport.powerCycleDatagram)
        client.sendTo(port: transport.port, batch: sent)
        var events: [TransportEvent] = []
        for _ in 0..<200 where events.count < sent.count {
            events += transport.receiveAll()
            if events.count < sent.count { usleep(1000) }
        }
        var expected = (0..<40).map { TransportEvent.report([UInt8](repeating: UInt8($0), count: 64)) }
        expected.append(.report([UInt8](repeating: 0xEE, count: 65)))
        expected.append(.powerCycle)
        #expect(events == expected)
        #expect(transport.receiveAll().isEmpty)
        // The sender became the peer: an answer reaches the client.
        transport.send([UInt8](repeating: 0xA5, count: 64))
        var back: [TransportEvent] = []
        for _ in 0..<100 where back.isEmpty {
            back = client.receiveAll()
            if back.isEmpty { usleep(1000) }
        }
        #expect(back == [.report([UInt8](repeating: 0xA5, count: 64))])
    }

    @Test func aBatchOfOneSizeGoesOutSegmentedAndArrivesAsOneDatagramPerReport() throws {
        let transport = try UDPTransport(host: "127.0.0.1", port: 0)
        let client = try UDPTransport(host: "127.0.0.1", port: 0)
        // 130 reports: three sendmsg calls of at most 64 segments; then a batch whose last datagram is shorter.
        let reports = (0..<130).map { i in (0..<64).map { UInt8(truncatingIfNeeded: i &* 7 &+ $0) } }
        client.sendTo(port: transport.port, batch: reports)
        client.sendTo(
            port: transport.port,
            batch: [[UInt8](repeating: 1, count: 64), [UInt8](repeating: 2, count: 20)]
        )
        // Read one datagram at a time, as a client that knows nothing of segmentation does.
        var received: [[UInt8]] = []
        for _ in 0..<2000 where received.count < 132 {
            if let datagram = transport.receiveDatagram() { received.append(datagram) } else { usleep(1000) }
        }
        #expect(received == reports + [[UInt8](repeating: 1, count: 64), [UInt8](repeating: 2, count: 20)])
        // The kernel took the segmented sends (this one has UDP_SEGMENT): no fall back to sendmmsg.
        #expect(client.segments)
    }

    @Test func badHostIsAClearError() {
        #expect(throws: TransportError.self) { try UDPTransport(host: "not an address", port: 0) }
    }

    @Test func portInUseIsAClearError() throws {
        let first = try UDPTransport(host: "127.0.0.1", port: 0)
        do {
            _ = try UDPTransport(host: "127.0.0.1", port: first.port)
            Issue.record("second bind succeeded")
        } catch {
            #expect(error.description.contains("cannot listen on udp 127.0.0.1:\(first.port)"))
        }
    }
}

/// A reset with longTouchForReset: keepalives say UPNEEDED until the touch has lasted five seconds, then PROCESSING.
@Suite struct LongTouchTests {
    let cbor: UInt8 = 0x10
    /// Commands as the reports carry them (the initialization bit set).
    let keepaliveReport: UInt8 = 0xBB
    let cborReport: UInt8 = 0x90

    func enableLongTouch(_ h: inout KeyHarness) {
        let done = messages(h.send(command: cbor, payload: [0x0D] + CBORValue.map([1: 4]).encoded()))
        #expect(done.last?.payload == [0x00])
    }

    @Test func aShortTouchDoesNotCountAndALongOneDoes() throws {
        var h = try KeyHarness(presence: .prompt)
        enableLongTouch(&h)
        let asked = h.send(command: cbor, payload: [0x07])
        #expect(asked.contains { if case .prompt(let p) = $0 { p.gesture == .longTouch } else { false } })
        #expect(messages(asked).map { $0.payload } == [[2]])
        h.now = .seconds(1)
        #expect(h.key.touch(now: h.now, held: .seconds(2)).isEmpty)
        h.now = .seconds(2)
        let answered = messages(h.key.touch(now: h.now, held: .seconds(5)))
        #expect(answered.map(\.command) == [keepaliveReport, cborReport])
        #expect(answered.first?.payload == [1] && answered.last?.payload == [0x00])
    }

    @Test func theAutomaticUserHoldsForFiveSeconds() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(200)))
        enableLongTouch(&h)
        _ = h.send(command: cbor, payload: [0x07])
        let holding = messages(h.advance(to: .seconds(5)))
        #expect(!holding.isEmpty && holding.allSatisfy { $0.command == keepaliveReport && $0.payload == [2] })
        let done = messages(h.advance(to: .milliseconds(5200)))
        #expect(done.map(\.command).suffix(2) == [keepaliveReport, cborReport])
        #expect(done.last?.payload == [0x00])
    }
}
