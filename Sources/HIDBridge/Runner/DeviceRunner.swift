import CTAPCore
import ControlProtocol
import Logging
import Synchronization

#if canImport(Glibc)
import CTAPCBOR
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Set by SIGINT/SIGTERM; the run loop stops when it sees it.
let stopRequested = Atomic<Bool>(false)
/// Counts SIGUSR1 signals; each key power-cycles when the count moves.
let powerCycleRequests = Atomic<Int>(0)

/// The I/O loop of one or several virtual keys: moves reports, keeps time, asks the user, serves the control
/// sockets. It runs on the calling thread until SIGINT or SIGTERM; the keys it owns are touched by nothing else.
public final class DeviceRunner {
    public let slots: [KeySlot]
    let logger: Logger
    /// How long the loop keeps polling without sleeping after it handled something (`serve --busy-poll`).
    /// Waking a sleeping thread when a datagram arrives from another core costs tens of microseconds on some
    /// machines, more than handling a request; a request that comes within this window finds the loop awake.
    let busyPoll: Duration

    /// The person at the terminal (and on the desktop) who answers the keys' touch requests.
    let prompter: Prompter

    public init(slots: [KeySlot], logger: Logger, busyPoll: Duration = .zero, notifications: Bool = false) {
        self.slots = slots
        self.logger = logger
        self.busyPoll = busyPoll
        prompter = Prompter(names: slots.map(\.name), notifier: notifications ? DesktopNotifier() : nil)
    }

    /// One key.
    public convenience init(
        key: VirtualKey,
        transport: any ReportTransport,
        logger: Logger,
        control: ControlServer? = nil
    ) {
        self.init(slots: [KeySlot(key: key, transport: transport, logger: logger, control: control)], logger: logger)
    }

    /// Installs the SIGINT/SIGTERM handlers that end ``run()`` and the SIGUSR1 handler that power-cycles the keys.
    public static func installSignalHandlers() {
        for sig in [SIGINT, SIGTERM] {
            signal(sig) { _ in stopRequested.store(true, ordering: .relaxed) }
        }
        signal(SIGUSR1) { _ in powerCycleRequests.add(1, ordering: .relaxed) }
    }

    /// Serves until SIGINT or SIGTERM.
    public func run() {
        let clock = ContinuousClock()
        var awakeUntil = clock.now
        while !stopRequested.load(ordering: .relaxed) {
            var fds: [pollfd] = []
            var ranges: [Range<Int>] = []
            var timeoutMs: Int32 = 100
            for slot in slots {
                let own = slot.pollDescriptors()
                ranges.append(fds.count..<fds.count + own.count)
                fds += own
                timeoutMs = min(timeoutMs, slot.timeout(cap: 100))
            }
            let prompts = fds.count..<fds.count
            let asking = slots.contains { if case .prompt = $0.key.presence { true } else { false } }
            fds += prompter.pollDescriptors(terminal: asking)
            let promptRange = prompts.lowerBound..<fds.count
            timeoutMs = min(timeoutMs, prompter.timeout(cap: 100))
            if busyPoll > .zero && clock.now < awakeUntil { timeoutMs = 0 }
            let ready = poll(&fds, nfds_t(fds.count), timeoutMs)
            if ready < 0 && errno != EINTR {
                logger.error("poll failed: \(String(cString: strerror(errno)))")
                break
            }
            let cycles = powerCycleRequests.load(ordering: .relaxed)
            if ready <= 0 { for i in fds.indices { fds[i].revents = 0 } }
            for (slot, range) in zip(slots, ranges) {
                slot.service(fds[range], powerCycles: cycles)
            }
            prompter.service(fds[promptRange], slots: slots)
            // The window opens when the handling is done, so a slow request does not use it up.
            if ready > 0 && busyPoll > .zero { awakeUntil = clock.now + busyPoll }
        }
        for slot in slots { slot.tracer = nil }
        prompter.closeAll()
        logger.info("stopping")
    }
}

/// One virtual key in the I/O loop: its state machine, its transport, its control socket and trace.
///
/// Only the loop that owns the slot touches it.
public final class KeySlot {
    public internal(set) var key: VirtualKey
    let transport: any ReportTransport
    let logger: Logger
    let clock = ContinuousClock()
    let start: ContinuousClock.Instant
    /// The control plane's socket, if the key has one.
    let control: ControlServer?
    /// The trace being written, if any (`--trace`, or the control command `trace`).
    public var tracer: TraceWriter? {
        didSet { key.traceMessages = tracer != nil }
    }
    /// The key's name, as prompts show it.
    public let name: String
    /// Touch requests of this key since the runner last looked (the runner asks the person).
    var asks: [PresencePrompt] = []
    /// How many SIGUSR1 power cycles this key has done.
    var powerCyclesSeen = 0
    /// While the key is unplugged (control `powerCycle` with `offMs`): when it is plugged back in.
    var unpluggedUntil: Duration?

    public init(
        key: VirtualKey,
        transport: any ReportTransport,
        logger: Logger,
        control: ControlServer? = nil,
        name: String = "default"
    ) {
        self.key = key
        self.transport = transport
        self.logger = logger
        self.control = control
        self.name = name
        self.start = clock.now
    }

    var now: Duration { clock.now - start }

    /// Milliseconds until this key has work to do, at most `cap`.
    func timeout(cap: Int32) -> Int32 {
        let cap = control?.timeout(cap: cap) ?? cap
        let next = key.nextDeadline
        guard let deadline = unpluggedUntil.map({ until in next.map { min($0, until) } ?? until }) ?? next else {
            return cap
        }
        let wait = deadline - now
        let ms = wait <= .zero ? 0 : Int(wait.wholeMilliseconds) + 1
        return Int32(min(ms, Int(cap)))
    }

    /// The descriptors this key polls: its transport, its control socket.
    func pollDescriptors() -> [pollfd] {
        var fds = [pollfd(fd: transport.descriptor, events: Int16(POLLIN), revents: 0)]
        if let control { fds += control.pollDescriptors() }
        return fds
    }

    /// Handles what `poll` reported on this key's descriptors, then lets time pass.
    func service(_ fds: ArraySlice<pollfd>, powerCycles: Int) {
        var index = fds.startIndex
        if fds[index].revents & Int16(POLLIN) != 0 {
            // Drain first, then handle: a slow handler must not make the kernel drop queued reports.
            for event in transport.receiveAll() { handle(event) }
        }
        index += 1
        if let control, fds[index...].contains(where: { $0.revents != 0 }) {
            control.service(fds[index...]) { command, subscribed in
                handleControl(command, subscribed: &subscribed)
            }
        }
        if powerCycles != powerCyclesSeen {
            powerCyclesSeen = powerCycles
            powerCycle()
        }
        if let until = unpluggedUntil, now >= until { powerCycle() }
        emit(key.tick(now: now))
        tracer?.flush()
    }

    func handle(_ event: TransportEvent) {
        switch event {
        case .report(let report):
            // An unplugged key hears nothing (UDP datagrams still arrive).
            if unpluggedUntil != nil { return }
            logger.trace("report in: \(Hex.string(report))")
            tracer?.report(report, fromHost: true)
            emit(key.receive(report: report, now: now))
        case .powerCycle:
            powerCycle()
        case .note(let text):
            logger.info("\(text)")
        }
    }

    /// Unplugs and re-plugs the key: the transport's device goes away and returns, volatile state is cleared.
    func powerCycle() {
        key.powerCycle(now: now)
        do {
            if unpluggedUntil != nil {
                unpluggedUntil = nil
                try transport.plug()
            } else {
                try transport.replug()
            }
        } catch {
            logger.error("power cycle: \(error)")
        }
        logger.notice("power cycle: volatile state cleared")
        publish("powerCycle")
    }

    /// Unplugs the key for `milliseconds` (or until the next power cycle), then plugs it back in as a power cycle.
    func unplug(milliseconds: Int) {
        if unpluggedUntil == nil {
            key.powerCycle(now: now)
            do {
                try transport.unplug()
            } catch {
                logger.error("unplug: \(error)")
            }
            logger.notice("unplugged for \(milliseconds) ms")
            publish("unplugged")
        }
        unpluggedUntil = now + .milliseconds(milliseconds)
    }

    /// Carries out one control command; the ones about the loop itself are handled here.
    func handleControl(_ command: ControlCommand, subscribed: inout Bool) -> Result<JSONValue, ControlError> {
        switch command {
        case .subscribe:
            subscribed = true
            return .success(["subscribed": true])
        case .unsubscribe:
            subscribed = false
            return .success(["subscribed": false])
        case .powerCycle(let offMilliseconds):
            if let offMilliseconds, offMilliseconds > 0 {
                unplug(milliseconds: offMilliseconds)
            } else {
                powerCycle()
            }
            return .success([:])
        case .trace(let path, let format):
            tracer = nil
            guard let path else { return .success(["tracing": nil]) }
            do {
                tracer = try TraceWriter(path: path, format: format.flatMap(TraceWriter.Format.init(rawValue:)))
            } catch {
                return .failure(ControlError(.failed, error.description))
            }
            return .success(["tracing": .string(path), "format": .string(tracer?.format.rawValue ?? "")])
        case .status:
            guard case .success(var status) = key.execute(.status, now: now).result, case .object(var members) = status
            else { return .failure(ControlError(.failed, "status unavailable")) }
            members["transport"] = .string(transport.summary)
            members["uptimeMs"] = JSONValue(now.wholeMilliseconds)
            status = .object(members)
            return .success(status)
        default:
            let (result, outputs) = key.execute(command, now: now)
            emit(outputs)
            return result
        }
    }

    /// Sends an event to the control plane's subscribers; its fields are built only when someone listens.
    func publish(_ name: String, _ fields: () -> [String: JSONValue] = { [:] }) {
        guard let control, control.hasSubscribers else { return }
        var members = fields()
        members["timeMs"] = JSONValue(now.wholeMilliseconds)
        control.broadcast(ControlMessage.event(name, members))
    }

    /// Whether a CTAP2 request of this key waits for the person.
    var waitsForPerson: Bool { key.pendingPrompt != nil }

    func emit(_ outputs: [KeyOutput]) {
        // The reports of one answer go out together (one system call over UDP), before anything that follows them.
        var reports: [[UInt8]] = []
        defer { if !reports.isEmpty { transport.send(batch: reports) } }
        for output in outputs {
            if case .report = output {
            } else if !reports.isEmpty {
                transport.send(batch: reports)
                reports.removeAll()
            }
            switch output {
            case .report(let report):
                logger.trace("report out: \(Hex.string(report))")
                tracer?.report(report, fromHost: false)
                reports.append(report)
            case .traced(let message):
                tracer?.message(message)
            case .wink:
                logger.notice("wink")
                publish("wink")
            case .processed(let record):
                logger.info("\(record)")
                if record.status == "userActionTimeout", case .prompt = key.presence {
                    printLine(
                        "fidosim: key \(name): nobody answered within \(key.presenceTimeout.wholeMilliseconds / 1000) s: "
                            + "\(record.command) timed out (CTAP2_ERR_USER_ACTION_TIMEOUT)"
                    )
                }
                publish("request") {
                    var fields: [String: JSONValue] = [
                        "command": .string(record.command), "status": .string(record.status),
                        "injected": .boolean(record.injected),
                    ]
                    if let activity = record.activity {
                        fields["credentialId"] = .string(Base64URL.encode(activity.credentialId))
                        if let rpId = activity.rpId { fields["rpId"] = .string(rpId) }
                        if let user = activity.userHandle { fields["userHandle"] = .string(Base64URL.encode(user)) }
                    }
                    return fields
                }
            case .prompt(let prompt):
                publish("prompt") { prompt.controlFields }
                guard case .prompt = key.presence else { continue }
                asks.append(prompt)
            }
        }
    }
}

/// Writes a line to standard output at once (no stdio buffering), for status lines scripts wait for.
public func printLine(_ line: String) {
    var bytes = Array(line.utf8)
    bytes.append(UInt8(ascii: "\n"))
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
        if n <= 0 { return }
        offset += n
    }
}

/// Writes a line to standard error at once.
public func printError(_ line: String) {
    var bytes = Array(line.utf8)
    bytes.append(UInt8(ascii: "\n"))
    _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
}

extension Duration {
    /// The whole milliseconds in this duration.
    var wholeMilliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
