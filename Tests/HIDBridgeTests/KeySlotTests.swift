import CTAPCore
import ControlProtocol
import Logging
import Synchronization
import Testing

@testable import HIDBridge
@testable import VirtualKey

/// A ``KeySlot`` driven with a mock clock: transport events, ticks and control commands in, effects out.
struct SlotHarness {
    var slot: KeySlot
    var now: Duration = .zero
    let frames: KeyHarness

    init(presence: PresenceMode) throws {
        frames = try KeyHarness(presence: presence)
        slot = KeySlot(key: frames.key, name: "k1", transportSummary: "udp 127.0.0.1:8111", logger: Logger(label: "t"))
    }

    mutating func send(command: UInt8, payload: [UInt8]) -> [SlotEffect] {
        frames.reports(command: command, payload: payload).flatMap { slot.receive(.report($0), now: now) }
    }

    mutating func tick(at time: Duration, powerCycles: Int = 0) -> [SlotEffect] {
        now = time
        return slot.tick(now: now, powerCycles: powerCycles)
    }

    mutating func control(_ command: ControlCommand) -> (JSONValue?, [SlotEffect]) {
        var subscribed = false
        let reply = slot.control(command, subscribed: &subscribed, now: now)
        return (try? reply.result.get(), reply.effects)
    }
}

/// The reports of the `.send` effects, in order.
func sent(_ effects: [SlotEffect]) -> [KeyOutput] {
    effects.flatMap { effect -> [KeyOutput] in
        if case .send(let reports, let host) = effect { reports.map { .report($0, host: host) } } else { [] }
    }
}

func events(_ effects: [SlotEffect]) -> [String] {
    effects.compactMap { if case .event(let name, _) = $0 { name } else { nil } }
}

@Suite struct KeySlotTests {
    @Test func theReportsOfOneAnswerGoOutInOneSend() throws {
        var h = try SlotHarness(presence: .approve(after: .zero))
        // getInfo's answer takes several reports; they leave in one batch, and nothing else is done.
        let effects = h.send(command: cbor, payload: [0x04])
        #expect(effects.count == 1)
        guard case .send(let reports, _) = effects.first else {
            Issue.record("expected one send, got \(effects)")
            return
        }
        #expect(reports.count > 1)
        #expect(messages(sent(effects)).map(\.payload.first) == [0x00])
    }

    @Test func traceEffectsOnlyWhileTracing() throws {
        var h = try SlotHarness(presence: .approve(after: .zero))
        #expect(!h.send(command: cbor, payload: [0x04]).contains { if case .traceReport = $0 { true } else { false } })
        h.slot.tracing = true
        let effects = h.send(command: cbor, payload: [0x04])
        let inbound = effects.filter {
            $0 == .traceReport(h.frames.reports(command: cbor, payload: [0x04])[0], fromHost: true)
        }
        #expect(inbound.count == 1)
        #expect(
            effects.contains {
                if case .traceMessage(let m) = $0 { !m.fromHost && m.payload.first == 0 } else { false }
            }
        )
        #expect(effects.contains { if case .traceReport(_, fromHost: false) = $0 { true } else { false } })
    }

    @Test func eventsAreMadeOnlyForListeners() throws {
        var h = try SlotHarness(presence: .approve(after: .zero))
        #expect(events(h.send(command: cbor, payload: [0x04])).isEmpty)
        h.slot.listening = true
        h.now = .milliseconds(1500)
        let effects = h.send(command: cbor, payload: [0x04])
        let request = effects.compactMap { if case .event("request", let fields) = $0 { fields } else { nil } }
        #expect(request.count == 1)
        #expect(request.first?["command"] == "getInfo")
        #expect(request.first?["status"] == "ok")
        #expect(request.first?["timeMs"] == 1500)
        // The key records the request as it answers: the event, then the answer's reports.
        #expect(effects.count == 2)
        #expect(effects.last.map { if case .send = $0 { true } else { false } } == true)
    }

    @Test func aPromptAsksThePersonAndATouchAnswers() throws {
        var h = try SlotHarness(presence: .prompt)
        h.slot.listening = true
        let asked = h.send(command: cbor, payload: makeCredentialRequest())
        #expect(asked.contains { if case .ask(let p) = $0 { p.command == "makeCredential" } else { false } })
        #expect(events(asked) == ["prompt"])
        #expect(h.slot.waitsForPerson)
        #expect(messages(sent(h.tick(at: .seconds(1)))).allSatisfy { $0.command == keepalive })
        h.now = .seconds(2)
        let answered = messages(sent(h.slot.touch(now: h.now)))
        #expect(answered.last?.payload.first == 0x00)
        #expect(!h.slot.waitsForPerson)
    }

    @Test func anApprovingKeyDoesNotAskThePerson() throws {
        var h = try SlotHarness(presence: .approve(after: .milliseconds(100)))
        let effects = h.send(command: cbor, payload: makeCredentialRequest())
        #expect(!effects.contains { if case .ask = $0 { true } else { false } })
        #expect(h.slot.nextDeadline != nil)
        #expect(messages(sent(h.tick(at: .milliseconds(100)))).last?.payload.first == 0x00)
    }

    @Test func aTimedOutPromptTellsThePerson() throws {
        var h = try SlotHarness(presence: .prompt)
        _ = h.send(command: cbor, payload: makeCredentialRequest())
        #expect(!h.tick(at: .seconds(29)).contains { if case .say = $0 { true } else { false } })
        let late = h.tick(at: .seconds(30))
        #expect(messages(sent(late)).last?.payload == [CTAPStatus.userActionTimeout.rawValue])
        #expect(
            late.contains(
                .say(
                    "fidosim: key k1: nobody answered within 30 s: makeCredential timed out (CTAP2_ERR_USER_ACTION_TIMEOUT)"
                )
            )
        )
    }

    @Test func aSignalPowerCyclesOncePerCount() throws {
        var h = try SlotHarness(presence: .prompt)
        _ = h.send(command: cbor, payload: makeCredentialRequest())
        #expect(h.slot.waitsForPerson)
        #expect(h.tick(at: .seconds(1), powerCycles: 1).first == .replug)
        #expect(!h.slot.waitsForPerson)
        #expect(!h.tick(at: .seconds(2), powerCycles: 1).contains(.replug))
        #expect(h.tick(at: .seconds(3), powerCycles: 2).first == .replug)
    }

    @Test func anUnpluggedKeyHearsNothingUntilItIsPluggedBackIn() throws {
        var h = try SlotHarness(presence: .approve(after: .zero))
        h.slot.listening = true
        h.now = .seconds(1)
        let (result, unplugged) = h.control(.powerCycle(offMilliseconds: 500))
        #expect(result == [:])
        #expect(unplugged.first == .unplug)
        #expect(events(unplugged) == ["unplugged"])
        #expect(h.slot.nextDeadline == .milliseconds(1500))
        #expect(h.send(command: cbor, payload: [0x04]).isEmpty)
        #expect(!h.tick(at: .milliseconds(1499)).contains(.plug))
        let plugged = h.tick(at: .milliseconds(1500))
        #expect(plugged.first == .plug)
        #expect(events(plugged) == ["powerCycle"])
        #expect(h.slot.unpluggedUntil == nil)
        #expect(messages(sent(h.send(command: cbor, payload: [0x04]))).count == 1)
    }

    @Test func aPowerCycleWhileUnpluggedPlugsTheKeyIn() throws {
        var h = try SlotHarness(presence: .approve(after: .zero))
        _ = h.control(.powerCycle(offMilliseconds: 10_000))
        #expect(h.control(.powerCycle(offMilliseconds: nil)).1 == [.plug])
        #expect(h.control(.powerCycle(offMilliseconds: nil)).1 == [.replug])
    }

    @Test func subscriptionsBelongToTheClient() throws {
        var h = try SlotHarness(presence: .prompt)
        var subscribed = false
        #expect(
            try h.slot.control(.subscribe, subscribed: &subscribed, now: h.now).result.get() == ["subscribed": true]
        )
        #expect(subscribed)
        #expect(
            try h.slot.control(.unsubscribe, subscribed: &subscribed, now: h.now).result.get() == ["subscribed": false]
        )
        #expect(!subscribed)
    }

    @Test func statusNamesTheTransportAndTheUptime() throws {
        var h = try SlotHarness(presence: .prompt)
        h.now = .milliseconds(2500)
        let (status, effects) = h.control(.status)
        #expect(effects.isEmpty)
        #expect(status?["transport"] == "udp 127.0.0.1:8111")
        #expect(status?["uptimeMs"] == 2500)
        #expect(status?["presence"] != nil)
    }

    @Test func aControlTouchAnswersTheWaitingRequest() throws {
        var h = try SlotHarness(presence: .prompt)
        _ = h.send(command: cbor, payload: makeCredentialRequest())
        h.now = .seconds(1)
        let (_, effects) = h.control(.touch)
        #expect(messages(sent(effects)).last?.payload.first == 0x00)
        #expect(!h.slot.waitsForPerson)
    }

    @Test func otherCommandsGoToTheKey() throws {
        var h = try SlotHarness(presence: .prompt)
        let (_, effects) = h.control(.presence(.approve(delayMilliseconds: 0)))
        #expect(effects.isEmpty)
        #expect(!h.slot.prompts)
        #expect(h.slot.key.presence == .approve(after: .zero))
    }
}

/// The lines a logger was given.
final class LogLines: Sendable {
    let lines = Mutex<[String]>([])

    var logger: Logger {
        Logger(label: "t") { _ in CapturingLogHandler(sink: self) }
    }
}

struct CapturingLogHandler: LogHandler {
    let sink: LogLines
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        sink.lines.withLock { $0.append(event.message.description) }
    }
}

@Suite struct TransportNoteTests {
    @Test func aRefusedPeersLineIsEscapedOnceWherePrinted() throws {
        let log = LogLines()
        var slot = KeySlot(
            key: try KeyHarness(presence: .prompt).key,
            name: "k1",
            transportSummary: "usbip",
            logger: log.logger
        )
        let line = PeerAccess.note(door: "usbip", peer: "\u{1B}]0;PWNED\u{07}\u{1B}[2J", refusal: "why")
        _ = slot.receive(.note(line), now: .zero)
        _ = slot.receive(card: .note(PeerAccess.note(door: "pcsc", peer: "a\u{9B}b", refusal: "why")), now: .zero)
        let printed = log.lines.withLock { $0 }
        #expect(printed == ["usbip: refused \\x1b]0;PWNED\\x07\\x1b[2J: why", "pcsc: refused a\\u{009b}b: why"])
        #expect(
            printed.allSatisfy { !$0.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) } }
        )
    }
}
