import CTAPCore
import Console
import ControlProtocol
package import Logging
import Synchronization
package import VirtualKey

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Set by SIGINT/SIGTERM; the run loop stops when it sees it.
let stopRequested = Atomic<Bool>(false)
/// Counts SIGUSR1 signals; each key power-cycles when the count moves.
let powerCycleRequests = Atomic<Int>(0)
/// The program `fidosim run` started (0 before it starts): the signals that would stop the key go to it instead.
let forwardedChild = Atomic<Int32>(0)
/// A signal for `fidosim run`'s program that came before the program's pid was known.
let pendingSignal = Atomic<Int32>(0)

/// The I/O loop of one or several virtual keys: moves reports, keeps time, asks the user, serves the control
/// sockets. It runs on the calling thread until SIGINT or SIGTERM; the keys it owns are touched by nothing else.
package final class DeviceRunner {
    package internal(set) var slots: [SlotIO]
    /// The hub socket that adds and removes keys while the loop runs (`--hub`), if there is one.
    package var hub: KeyHub?
    let logger: Logger
    let clock = ContinuousClock()
    let started: ContinuousClock.Instant
    /// How long the loop keeps polling without sleeping after it handled something (`serve --busy-poll`).
    /// Waking a sleeping thread when a datagram arrives from another core costs tens of microseconds on some
    /// machines, more than handling a request; a request that comes within this window finds the loop awake.
    let busyPoll: Duration

    /// The person at the terminal (and on the desktop) who answers the keys' touch requests.
    let prompter: Prompter

    /// `terminal`: whether the person answers prompts on standard input (`fidosim run` leaves the terminal to its
    /// program: its prompts are answered through the control socket or a desktop notification).
    package init(
        slots: [SlotIO],
        logger: Logger,
        busyPoll: Duration = .zero,
        notifications: Bool = false,
        terminal: Bool = true
    ) {
        self.slots = slots
        self.logger = logger
        started = clock.now
        self.busyPoll = busyPoll
        prompter = Prompter(names: slots.map(\.slot.name), notifier: notifications ? DesktopNotifier() : nil)
        prompter.terminalOpen = terminal
    }

    /// One key.
    package convenience init(
        key: VirtualKey,
        transport: any ReportTransport,
        logger: Logger,
        control: ControlServer? = nil
    ) {
        self.init(slots: [SlotIO(key: key, transport: transport, logger: logger, control: control)], logger: logger)
    }

    /// Installs the SIGINT/SIGTERM handlers that end ``run()`` and the SIGUSR1 handler that power-cycles the keys.
    package static func installSignalHandlers() {
        touchSignalState()
        for sig in [SIGINT, SIGTERM] {
            signal(sig) { _ in stopRequested.store(true, ordering: .relaxed) }
        }
        signal(SIGUSR1) { _ in powerCycleRequests.add(1, ordering: .relaxed) }
    }

    /// `fidosim run`'s handlers: SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR2 go to the program (whose end stops the
    /// key); one that comes before the program started stops the run; SIGUSR1 power-cycles the keys.
    package static func installForwardingSignalHandlers() {
        touchSignalState()
        for sig in [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR2] {
            signal(sig) { sig in DeviceRunner.signalForProgram(sig) }
        }
        signal(SIGUSR1) { _ in powerCycleRequests.add(1, ordering: .relaxed) }
    }

    /// Initialises the globals the handlers use before any handler can run: a Swift global is made on first use,
    /// and a handler that made one while the main thread was making it would wait for itself.
    static func touchSignalState() {
        _ = stopRequested.load(ordering: .relaxed)
        _ = powerCycleRequests.load(ordering: .relaxed)
        _ = forwardedChild.load(ordering: .relaxed)
        _ = pendingSignal.load(ordering: .relaxed)
    }

    /// What `fidosim run`'s handlers do with a signal: it goes to the program; before the program's pid is known it
    /// stops the run, and is kept for the program in case the program starts all the same (``forwardSignals(to:)``).
    package static func signalForProgram(_ sig: Int32) {
        let child = forwardedChild.load(ordering: .relaxed)
        if child > 0 {
            kill(child, sig)
        } else {
            pendingSignal.store(sig, ordering: .relaxed)
            stopRequested.store(true, ordering: .relaxed)
        }
    }

    /// Starts `fidosim run`'s program (searched in PATH) with this process's environment, its signal mask cleared
    /// and `defaultSignals` back to their default action; the pid, or posix_spawn's error number.
    package static func spawnProgram(
        _ command: [String],
        defaultSignals: [Int32] = [SIGPIPE]
    ) -> Result<
        Int32, SpawnError
    > {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for sig in defaultSignals { sigaddset(&defaults, sig) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, command[0], nil, &attributes, &argv, environ)
        return result == 0 ? .success(pid) : .failure(SpawnError(code: result))
    }

    /// Where `fidosim run`'s signals go from now on. A signal that came while the program was being started (after
    /// the run last looked, before its pid was known) goes to it now, and the key serves on until the program ends.
    package static func forwardSignals(to child: Int32) {
        forwardedChild.store(child, ordering: .relaxed)
        let missed = pendingSignal.exchange(0, ordering: .relaxed)
        if missed != 0 {
            stopRequested.store(false, ordering: .relaxed)
            kill(child, missed)
        }
    }

    /// Ends ``run()`` at its next turn (within 100 ms); safe from any thread.
    package static func requestStop() { stopRequested.store(true, ordering: .relaxed) }

    /// Whether a stop was asked for.
    package static var stopping: Bool { stopRequested.load(ordering: .relaxed) }

    /// Hands a key's touch requests to the person.
    func ask(slot index: Int, _ prompts: [PresencePrompt]) {
        for prompt in prompts { prompter.ask(slot: index, prompt: prompt, now: clock.now - started) }
    }

    /// Serves the hub's clients: keys added join the loop, removed ones leave it (their prompts with them).
    func serviceHub(_ fds: ArraySlice<pollfd>) {
        guard let hub, fds.contains(where: { $0.revents != 0 }) else { return }
        hub.server.service(fds) { command, _ in
            var removed: [Int] = []
            let result = hub.handle(command, slots: &slots, removed: &removed)
            for index in removed { prompter.keyRemoved(slot: index) }
            prompter.names = slots.map(\.slot.name)
            return result
        }
    }

    /// Serves until SIGINT or SIGTERM.
    package func run() {
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
            let asking = slots.contains { $0.slot.prompts }
            fds += prompter.pollDescriptors(terminal: asking)
            let promptRange = prompts.lowerBound..<fds.count
            let hubFds = hub?.server.pollDescriptors() ?? []
            let hubRange = fds.count..<fds.count + hubFds.count
            fds += hubFds
            if let hub { timeoutMs = min(timeoutMs, hub.server.timeout(cap: 100)) }
            timeoutMs = min(timeoutMs, prompter.timeout(cap: 100))
            if busyPoll > .zero && clock.now < awakeUntil { timeoutMs = 0 }
            let ready = poll(&fds, nfds_t(fds.count), timeoutMs)
            if ready < 0 && errno != EINTR {
                logger.error("poll failed: \(String(cString: strerror(errno)))")
                break
            }
            let cycles = powerCycleRequests.load(ordering: .relaxed)
            if ready <= 0 { for i in fds.indices { fds[i].revents = 0 } }
            for (index, (slot, range)) in zip(slots, ranges).enumerated() {
                ask(slot: index, slot.service(fds[range], powerCycles: cycles))
            }
            let answers = prompter.service(
                fds[promptRange],
                now: clock.now - started,
                waits: { slots[$0].slot.waitsForPerson },
                prompting: slots.indices.filter { slots[$0].slot.prompts }
            )
            for answer in answers {
                let slot = slots[answer.slot]
                let asks = slot.update { slot, now in
                    answer.answer == .refuse ? slot.refuse(now: now) : slot.touch(now: now)
                }
                printLine(answer.line)
                ask(slot: answer.slot, asks)
            }
            serviceHub(fds[hubRange])
            // The window opens when the handling is done, so a slow request does not use it up.
            if ready > 0 && busyPoll > .zero { awakeUntil = clock.now + busyPoll }
        }
        for slot in slots { slot.tracer = nil }
        prompter.closeAll()
        logger.info("stopping")
    }
}

/// Why a program did not start: posix_spawn's error number.
package struct SpawnError: Error {
    package var code: Int32
}
