import CTAPCore
import Console
import ControlProtocol
package import Logging
package import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// A ``KeySlot`` with the I/O it owns: its transport, its control socket, its trace and its clock. It carries out
/// what the slot decides.
///
/// Only the loop that owns it touches it.
package final class SlotIO {
    package internal(set) var slot: KeySlot
    let transport: any ReportTransport
    /// The key as a card in a PC/SC reader (`--transport pcsc`), if it is one.
    package let card: VPCDCard?
    /// The control plane's socket, if the key has one.
    let control: ControlServer?
    let logger: Logger
    let clock = ContinuousClock()
    let start: ContinuousClock.Instant
    /// The trace being written, if any (`--trace`, or the control command `trace`).
    package var tracer: TraceWriter? {
        didSet { slot.tracing = tracer != nil }
    }

    package init(
        key: VirtualKey,
        transport: any ReportTransport,
        logger: Logger,
        control: ControlServer? = nil,
        name: String = "default",
        card: VPCDCard? = nil
    ) {
        let summary = [transport.summary, card?.summary ?? ""].filter { !$0.isEmpty }.joined(separator: " and ")
        slot = KeySlot(key: key, name: name, transportSummary: summary, logger: logger)
        slot.transportDetail = .object(ReadyFile.transportMembers(transport, card: card))
        self.transport = transport
        self.card = card
        self.control = control
        self.logger = logger
        start = clock.now
    }

    /// Takes the key out for good (the hub removed it): its device goes, as when a key is pulled out, and its trace
    /// ends; the control socket closes when the slot is let go.
    func retire() {
        do { try transport.retire() } catch { logger.error("unplug: \(error)") }
        card?.remove()
        tracer = nil
    }

    /// The time since the key started.
    var now: Duration { clock.now - start }

    /// Milliseconds until this key has work to do, at most `cap`.
    func timeout(cap: Int32) -> Int32 {
        var cap = control?.timeout(cap: cap) ?? cap
        if let card { cap = card.timeout(cap: cap) }
        guard let deadline = slot.nextDeadline else { return cap }
        let wait = deadline - now
        let ms = wait <= .zero ? 0 : Int(wait.wholeMilliseconds) + 1
        return Int32(min(ms, Int(cap)))
    }

    /// The descriptors this key polls: its transport, its card's connection, its control socket.
    func pollDescriptors() -> [pollfd] {
        var fds = [
            pollfd(fd: transport.descriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: card?.descriptor ?? -1, events: Int16(POLLIN), revents: 0),
        ]
        if let control { fds += control.pollDescriptors() }
        return fds
    }

    /// Handles what `poll` reported on this key's descriptors, then lets time pass; returns the touch requests for
    /// the person.
    func service(_ fds: ArraySlice<pollfd>, powerCycles: Int) -> [PresencePrompt] {
        var asks: [PresencePrompt] = []
        var index = fds.startIndex
        if fds[index].revents & Int16(POLLIN) != 0 {
            // Drain first, then handle: a slow handler must not make the kernel drop queued reports.
            for event in transport.receiveAll() {
                asks += update { slot, now in slot.receive(event, now: now) }
            }
        }
        index += 1
        if let card {
            var events = card.maintain()
            if fds[index].revents != 0 { events += card.receive() }
            for event in events {
                asks += update { slot, now in slot.receive(card: event, now: now) }
            }
        }
        index += 1
        if let control, fds[index...].contains(where: { $0.revents != 0 }) {
            control.service(fds[index...]) { command, subscribed in
                let reply: KeySlot.ControlReply
                if case .trace(let path, let format) = command {
                    reply = KeySlot.ControlReply(result: trace(path: path, format: format))
                } else {
                    slot.listening = control.hasSubscribers
                    reply = slot.control(command, subscribed: &subscribed, now: now)
                }
                asks += perform(reply.effects)
                return reply.result
            }
        }
        asks += update { slot, now in slot.tick(now: now, powerCycles: powerCycles) }
        tracer?.flush()
        return asks
    }

    /// Runs `change` on the slot at the current time and carries out its effects; returns the touch requests.
    @discardableResult
    func update(_ change: (inout KeySlot, Duration) -> [SlotEffect]) -> [PresencePrompt] {
        slot.listening = control?.hasSubscribers ?? false
        return perform(change(&slot, now))
    }

    /// Starts or stops a trace (the control command `trace`).
    func trace(path: String?, format: String?) -> Result<JSONValue, ControlError> {
        tracer = nil
        guard let path else { return .success(["tracing": nil]) }
        do {
            tracer = try TraceWriter(path: path, format: format.flatMap(TraceWriter.Format.init(rawValue:)))
        } catch {
            return .failure(ControlError(.failed, error.description))
        }
        return .success(["tracing": .string(path), "format": .string(tracer?.format.rawValue ?? "")])
    }

    /// Carries out the slot's effects in order; returns its touch requests, which the loop's prompter asks.
    func perform(_ effects: [SlotEffect]) -> [PresencePrompt] {
        var asks: [PresencePrompt] = []
        for effect in effects {
            switch effect {
            case .send(let reports, let host):
                transport.send(batch: reports, host: host)
            case .sendAPDU(let apdu):
                card?.send(apdu)
            case .unplug:
                do { try transport.unplug() } catch { logger.error("unplug: \(error)") }
                card?.remove()
            case .plug:
                do { try transport.plug() } catch { logger.error("power cycle: \(error)") }
                card?.insert(after: .zero)
            case .replug:
                do { try transport.replug() } catch { logger.error("power cycle: \(error)") }
                if let card {
                    card.remove()
                    card.insert(after: VPCDCard.replugDelay)
                }
            case .event(let name, let fields):
                control?.broadcast(ControlMessage.event(name, fields))
            case .say(let line):
                printLine(line)
            case .ask(let prompt):
                asks.append(prompt)
            case .traceReport(let report, let fromHost):
                tracer?.report(report, fromHost: fromHost)
            case .traceMessage(let message):
                tracer?.message(message)
            }
        }
        return asks
    }
}
