import CTAPCBOR
import CTAPCore
package import ControlProtocol
package import Logging

/// One virtual key in the I/O loop, without the I/O: its state machine, the state of its plug, and what it asks of
/// the loop. Events and the time go in, ``SlotEffect`` values come out; a test drives it with any clock.
///
/// The loop (``DeviceRunner``) owns the transport, the control socket and the trace, and carries out the effects.
package struct KeySlot: Sendable {
    package internal(set) var key: VirtualKey
    /// The key's name, as prompts show it.
    package let name: String
    /// Where the key can be reached (the transport's summary), for `status`.
    package let transportSummary: String
    /// The transport as `status` gives it structured (`transportDetail`): the members of a key in the ready file.
    package var transportDetail: JSONValue = .null
    let logger: Logger
    /// Whether the control plane has subscribers: events are made only then.
    package var listening = false
    /// How many SIGUSR1 power cycles this key has done.
    var powerCyclesSeen = 0
    /// While the key is unplugged (control `powerCycle` with `offMs`): when it is plugged back in.
    package internal(set) var unpluggedUntil: Duration?

    package init(key: VirtualKey, name: String = "default", transportSummary: String = "", logger: Logger) {
        self.key = key
        self.name = name
        self.transportSummary = transportSummary
        self.logger = logger
    }

    /// Whether a trace is being written (the loop sets it with the trace).
    package var tracing: Bool {
        get { key.traceMessages }
        set { key.traceMessages = newValue }
    }

    /// The earliest time ``tick(now:powerCycles:)`` has work to do.
    package var nextDeadline: Duration? {
        let next = key.nextDeadline
        return unpluggedUntil.map { until in next.map { min($0, until) } ?? until } ?? next
    }

    /// Whether a CTAP2 request of this key waits for the person.
    package var waitsForPerson: Bool { key.pendingPrompt != nil }

    /// Whether the person at the terminal answers this key's touch requests.
    package var prompts: Bool { if case .prompt = key.presence { true } else { false } }

    /// What the transport delivered.
    package mutating func receive(_ event: TransportEvent, now: Duration) -> [SlotEffect] {
        switch event {
        case .report(let report, let host):
            // An unplugged key hears nothing (UDP datagrams still arrive).
            if unpluggedUntil != nil { return [] }
            logger.trace("report in: \(Hex.string(report))")
            let traced: [SlotEffect] = tracing ? [.traceReport(report, fromHost: true)] : []
            return traced + effects(of: key.receive(report: report, now: now, host: host), now: now)
        case .powerCycle, .detached:
            return powerCycle(now: now)
        case .hostLeft(let host):
            key.hostLeft(host)
            return []
        case .note(let text):
            // A transport's notes quote what peers sent (a bus id, an address): printed escaped.
            logger.info("\(TerminalText.escape(text))")
            return []
        }
    }

    /// What the card's reader did.
    package mutating func receive(card event: CardEvent, now: Duration) -> [SlotEffect] {
        switch event {
        case .fieldOn:
            if unpluggedUntil != nil { return [] }
            key.fieldOn(now: now)
            logger.info("pcsc: the reader powered the card")
            return self.event("field", now: now) { ["on": true] }
        case .fieldOff:
            key.fieldOff(now: now)
            logger.info("pcsc: the card is off")
            return self.event("field", now: now) { ["on": false] }
        case .apdu(let apdu):
            if unpluggedUntil != nil { return [] }
            logger.trace("apdu in: \(Hex.string(apdu))")
            return effects(of: key.receive(apdu: apdu, now: now), now: now)
        case .note(let text):
            logger.notice("\(TerminalText.escape(text))")
            return []
        }
    }

    /// Lets time pass: a power cycle asked by a signal (`powerCycles` is the count of SIGUSR1 so far), the end of
    /// an unplugged spell, keepalives, timeouts and automatic touches.
    package mutating func tick(now: Duration, powerCycles: Int) -> [SlotEffect] {
        var out: [SlotEffect] = []
        if powerCycles != powerCyclesSeen {
            powerCyclesSeen = powerCycles
            out += powerCycle(now: now)
        }
        if let until = unpluggedUntil, now >= until { out += powerCycle(now: now) }
        return out + effects(of: key.tick(now: now), now: now)
    }

    /// Unplugs and re-plugs the key: the transport's device goes away and returns, volatile state is cleared.
    package mutating func powerCycle(now: Duration) -> [SlotEffect] {
        key.powerCycle(now: now)
        let plug: SlotEffect = unpluggedUntil != nil ? .plug : .replug
        unpluggedUntil = nil
        logger.notice("power cycle: volatile state cleared")
        return [plug] + event("powerCycle", now: now)
    }

    /// Unplugs the key for `milliseconds` (or until the next power cycle), then plugs it back in as a power cycle.
    package mutating func unplug(milliseconds: Int, now: Duration) -> [SlotEffect] {
        var out: [SlotEffect] = []
        if unpluggedUntil == nil {
            key.powerCycle(now: now)
            logger.notice("unplugged for \(milliseconds) ms")
            out = [.unplug] + event("unplugged", now: now)
        }
        unpluggedUntil = now + .milliseconds(milliseconds)
        return out
    }

    /// The person touched the key.
    package mutating func touch(now: Duration) -> [SlotEffect] { effects(of: key.touch(now: now), now: now) }

    /// The person refused the request waiting for a touch.
    package mutating func refuse(now: Duration) -> [SlotEffect] { effects(of: key.refuse(now: now), now: now) }

    /// An event for the control plane's subscribers; its fields are built only when someone listens.
    func event(_ name: String, now: Duration, _ fields: () -> [String: JSONValue] = { [:] }) -> [SlotEffect] {
        guard listening else { return [] }
        var members = fields()
        members["timeMs"] = JSONValue(now.wholeMilliseconds)
        return [.event(name, members)]
    }

    /// What the loop does for the key's outputs. The reports of one answer (to one host) go out together, before
    /// anything that follows them.
    mutating func effects(of outputs: [KeyOutput], now: Duration) -> [SlotEffect] {
        var out: [SlotEffect] = []
        var reports: [[UInt8]] = []
        var reportsHost = 0
        for output in outputs {
            if case .report(_, let host) = output, reports.isEmpty || host == reportsHost {
            } else if !reports.isEmpty {
                out.append(.send(reports, host: reportsHost))
                reports.removeAll()
            }
            switch output {
            case .apdu(let apdu):
                logger.trace("apdu out: \(Hex.string(apdu))")
                out.append(.sendAPDU(apdu))
            case .report(let report, let host):
                logger.trace("report out: \(Hex.string(report))")
                if tracing { out.append(.traceReport(report, fromHost: false)) }
                reports.append(report)
                reportsHost = host
            case .traced(let message):
                if tracing { out.append(.traceMessage(message)) }
            case .wink:
                logger.notice("wink")
                out += event("wink", now: now)
            case .processed(let record):
                logger.info("\(record)")
                if record.status == "userActionTimeout" && prompts {
                    out.append(
                        .say(
                            "fidosim: key \(name): nobody answered within "
                                + "\(key.user.presenceTimeout.wholeMilliseconds / 1000) s: "
                                + "\(record.command) timed out (CTAP2_ERR_USER_ACTION_TIMEOUT)"
                        )
                    )
                }
                out += event("request", now: now) { record.controlFields }
            case .prompt(let prompt):
                out += event("prompt", now: now) { prompt.controlFields }
                if prompts { out.append(.ask(prompt)) }
            }
        }
        if !reports.isEmpty { out.append(.send(reports, host: reportsHost)) }
        return out
    }
}

extension RequestRecord {
    /// The fields of the control plane's `request` event.
    var controlFields: [String: JSONValue] {
        var fields: [String: JSONValue] = [
            "command": .string(command), "status": .string(status), "injected": .boolean(injected),
        ]
        if let activity {
            fields["credentialId"] = .string(Base64URL.encode(activity.credentialId))
            if let rpId = activity.rpId { fields["rpId"] = .string(rpId) }
            if let user = activity.userHandle { fields["userHandle"] = .string(Base64URL.encode(user)) }
        }
        return fields
    }
}

extension Duration {
    /// The whole milliseconds in this duration.
    package var wholeMilliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
