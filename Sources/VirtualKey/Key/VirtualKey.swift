package import CTAPCore
package import CTAPHID
package import CTAPNFC

/// Something the I/O loop must do for a ``VirtualKey``.
package enum KeyOutput: Equatable, Sendable {
    /// Send one 64-byte report to a host: the first (0) unless the key is plugged into several
    /// (``VirtualKey/addHost(channelKey:)``).
    case report([UInt8], host: Int = 0)
    /// Answer the reader's command APDU with this response APDU (NFC).
    case apdu([UInt8])
    /// A request waits for the user (in prompt mode, ask the person at the terminal to touch the key).
    case prompt(PresencePrompt)
    /// The host asked the key to identify itself.
    case wink
    /// A request was answered (for logs and the control plane's events).
    case processed(RequestRecord)
    /// A whole CTAP message, for a trace (only while ``VirtualKey/traceMessages`` is on).
    case traced(TraceMessage)
}

/// A request the key answered: what was asked, the answer, and the credential involved.
package struct RequestRecord: Equatable, Sendable, CustomStringConvertible {
    /// The CTAP2 command's name (`makeCredential`, …), `U2F register`/`U2F authenticate`/`U2F INS xx`.
    package var command: String
    /// The CTAP2 status name (`ok`, `operationDenied`, …) or the U2F status word in hex.
    package var status: String
    /// True when a fault injected by the control plane gave the answer.
    package var injected: Bool = false
    package var activity: CredentialActivity?

    package var description: String {
        "\(command) -> \(status)\(injected ? " (injected)" : "")"
    }
}

/// A whole virtual security key without I/O: CTAPHID framing, the NFC binding when the key has one, the
/// authenticator and the simulated user.
///
/// A key plugged into several hosts at once (`serve --transport uhid --transport usbip`) has one CTAPHID machine per
/// host, as a device has a HID interface per host it is attached to: a host's half-sent message or `LOCK` holds only
/// that host's channels. The authenticator behind them is one, and works on one request at a time: a request from a
/// host while another host's (or the card's) is in flight hears ERR_CHANNEL_BUSY.
///
/// Reports, APDUs and time go in, reports, APDUs and prompts come out; the I/O loop only moves bytes and sleeps
/// until ``nextDeadline``.
package struct VirtualKey: Sendable {
    /// The first host's CTAPHID machine.
    package private(set) var hid: CTAPHIDMachine
    /// The CTAPHID machines of the other hosts the key is plugged into (host 1, 2, …).
    package private(set) var otherHosts: [CTAPHIDMachine] = []
    /// The NFC binding (ISO 7816-4 APDUs), when the key is also, or only, a card.
    package private(set) var nfc: NFCMachine?
    /// The card is in the reader's field (powered): NFC requests are heard only then.
    package private(set) var inField = false
    /// NFC is the key's only transport: the field going away powers the whole key down.
    package private(set) var nfcOnly = false
    package internal(set) var authenticator: Authenticator
    /// The person at the key, simulated (``SimulatedUser``).
    package var user: SimulatedUser
    /// The user's mode (``SimulatedUser/mode``).
    package var presence: PresenceMode {
        get { user.mode }
        set { user.mode = newValue }
    }

    /// Where a request came from, and where its answer goes.
    enum Route: Equatable, Sendable {
        case hid(channel: UInt32, host: Int)
        case nfc

        /// The host of a CTAPHID request.
        var host: Int? { if case .hid(_, let host) = self { host } else { nil } }
    }

    struct PresenceWait: Sendable {
        var channel: Route
        /// When the automatic answer is given (approve/deny modes) or the prompt times out.
        var deadline: Duration
        var answer: PresenceResult
    }

    var waiting: PresenceWait?
    var inFlight: (name: String, u2f: Bool, route: Route)?
    /// Where the last CTAP2 request came from (a profile may end a getNextAssertion begun on another channel).
    var lastCTAP2Route: Route?
    /// The faults the control plane armed on the transport side (``ArmedFaults`` holds them with the rest).
    package var transportFaults = TransportFaults()
    /// Emit ``KeyOutput/traced(_:)`` for every CTAP request and response.
    package var traceMessages = false
    /// Requests answered since start, by command name.
    package private(set) var requestCounts: [String: Int] = [:]
    /// How long the key takes to answer CTAPHID INIT and getInfo at least (a captured key's timing; zero: at once).
    package var initLatency: Duration = .zero
    package var getInfoLatency: Duration = .zero
    /// Reports held back until their time (an answer the key takes longer to give), in order.
    var heldReports: [(due: Duration, report: [UInt8], host: Int)] = []
    /// While set, reports the key sends are held until then.
    var holdUntil: Duration?

    static func describe(command: CTAPHIDCommand, payload: [UInt8]) -> String {
        if command == .msg {
            switch payload.count > 1 ? payload[1] : 0xFF {
            case 0x01: return "U2F register"
            case 0x02: return "U2F authenticate"
            case 0x03: return "U2F version"
            case let ins: return "U2F INS " + String(ins, radix: 16)
            }
        }
        guard let first = payload.first else { return "(empty)" }
        return commandNames[Int(first)]
    }

    static func describe(response: [UInt8], u2f: Bool) -> String {
        if u2f {
            guard response.count >= 2 else { return "?" }
            return "SW "
                + String(UInt16(response[response.count - 2]) << 8 | UInt16(response[response.count - 1]), radix: 16)
        }
        guard let status = response.first else { return "?" }
        return statusNames[Int(status)]
    }

    // The names of every command and status byte, made once: interpolating an enum case goes through the runtime's
    // reflection (dynamic casts), which was 5% of a request through CTAPHID.
    static let commandNames: [String] = (0...255).map { (byte: Int) -> String in
        CTAPCommand(rawValue: UInt8(byte)).map { "\($0)" } ?? "0x" + String(byte, radix: 16)
    }
    static let statusNames: [String] = (0...255).map { (byte: Int) -> String in
        CTAPStatus(rawValue: UInt8(byte)).map { "\($0)" } ?? "0x" + String(byte, radix: 16)
    }

    package init(hid: CTAPHIDMachine, authenticator: Authenticator, presence: PresenceMode) {
        self.hid = hid
        self.authenticator = authenticator
        user = SimulatedUser(mode: presence)
    }

    /// Plugs the key into one more host: its own CTAPHID machine (the first host's timings and identity, channel ids
    /// keyed by `channelKey`, 16 bytes from a CSPRNG). Returns the new host's number.
    @discardableResult
    package mutating func addHost(channelKey: [UInt8]) -> Int {
        otherHosts.append(CTAPHIDMachine(configuration: hid.configuration, channelKey: channelKey))
        return otherHosts.count
    }

    /// One of the hosts let go of the key while another keeps it powered: its request (in flight or waiting for a
    /// touch) ends without an answer, its held reports go, and its CTAPHID machine starts afresh (a `LOCK` or a
    /// half-sent message of that host ends with it; its channel ids are never given again).
    package mutating func hostLeft(_ host: Int) {
        if inFlight?.route.host == host || waiting?.channel.host == host {
            waiting = nil
            inFlight = nil
            authenticator.abort()
        }
        heldReports.removeAll { $0.host == host }
        _ = onMachine(host) { machine in
            machine.powerCycle()
            return []
        }
    }

    /// The number of hosts the key is plugged into.
    package var hostCount: Int { 1 + otherHosts.count }

    /// Runs `change` on `host`'s CTAPHID machine; nothing for a host the key is not plugged into.
    mutating func onMachine(_ host: Int, _ change: (inout CTAPHIDMachine) -> [CTAPHIDAction]) -> [CTAPHIDAction] {
        if host == 0 { return change(&hid) }
        guard otherHosts.indices.contains(host - 1) else { return [] }
        return change(&otherHosts[host - 1])
    }

    /// Gives the key the NFC binding: `only` when it has no other transport.
    package mutating func addNFC(only: Bool) {
        nfc = NFCMachine(
            u2f: authenticator.configuration.profile.speaksU2F,
            maxMessageSize: hid.configuration.maxMessageSize
        )
        nfcOnly = only
    }

    /// The earliest time ``tick(now:)`` has work to do.
    package var nextDeadline: Duration? {
        ([hid.nextDeadline, waiting?.deadline, nfc?.nextDeadline, heldReports.map(\.due).min()]
            + otherHosts.map(\.nextDeadline))
            .compactMap { $0 }.min()
    }

    /// The request waiting for a touch, if any.
    package var pendingPrompt: PresencePrompt? { waiting == nil ? nil : authenticator.pendingPrompt }

    /// A report from a host (the first unless the key is plugged into several).
    package mutating func receive(report: [UInt8], now: Duration, host: Int = 0) -> [KeyOutput] {
        if transportFaults.dropInbound > 0 {
            transportFaults.dropInbound -= 1
            return []
        }
        return perform(onMachine(host) { $0.receive(report: report, now: now) }, host: host, now: now)
    }

    /// The reader powered the card (it entered the field, or the reader reset it). On a key whose only transport
    /// is NFC this is its power-up: volatile state goes, and the reset window starts.
    package mutating func fieldOn(now: Duration) {
        if nfcOnly && !inField { powerCycle(now: now) }
        nfc?.powerOff()
        inField = true
    }

    /// The card left the field (or the reader cut its power): a request from NFC in flight is dropped.
    package mutating func fieldOff(now: Duration) {
        nfc?.powerOff()
        inField = false
        if inFlight?.route == .nfc || waiting?.channel == .nfc {
            waiting = nil
            inFlight = nil
            authenticator.abort()
        }
        if nfcOnly { powerCycle(now: now) }
    }

    /// A command APDU from the reader; every one gets exactly one response APDU, now or (for a request the
    /// authenticator works on) later.
    package mutating func receive(apdu: [UInt8], now: Duration) -> [KeyOutput] {
        guard nfc != nil, inField else { return [] }
        var out: [KeyOutput] = []
        for action in nfc!.receive(apdu, now: now) {
            switch action {
            case .respond(let bytes):
                out.append(.apdu(bytes))
            case .cancel:
                if waiting?.channel == .nfc { waiting = nil }
                if inFlight?.route == .nfc, let response = authenticator.cancel() {
                    out += answer(.response(response), channel: .nfc, now: now)
                }
            case .ctap2(let payload), .u2f(let payload):
                let isU2F: Bool
                if case .u2f = action { isU2F = true } else { isU2F = false }
                let command: CTAPHIDCommand = isU2F ? .msg : .cbor
                if inFlight != nil {
                    // The authenticator works for the other transport: one request at a time, as on a real key.
                    out += nfcComplete(isU2F ? [0x69, 0x85] : [CTAPStatus.channelBusy.rawValue], now: now)
                    continue
                }
                out += deliver(command: command, payload: payload, route: .nfc, now: now)
            }
        }
        return out
    }

    /// The answer to the NFC request in flight, through the binding (now, or when the reader polls).
    mutating func nfcComplete(_ bytes: [UInt8], now: Duration) -> [KeyOutput] {
        guard nfc != nil else { return [] }
        return nfc!.complete(bytes, now: now).compactMap { action in
            if case .respond(let apdu) = action { return .apdu(apdu) }
            return nil
        }
    }

    /// Lets time pass: keepalives, timeouts, automatic touches.
    package mutating func tick(now: Duration) -> [KeyOutput] {
        var out: [KeyOutput] = []
        // Each host's held reports leave in order; another host's may be due earlier.
        let due = heldReports.filter { $0.due <= now }
        if !due.isEmpty {
            heldReports.removeAll { $0.due <= now }
            out += due.map { .report($0.report, host: $0.host) }
        }
        if let wait = waiting, now >= wait.deadline {
            waiting = nil
            if wait.answer == .approved { out += longTouchRegistered(now: now) }
            out += answer(authenticator.resume(wait.answer, now: now), channel: wait.channel, now: now)
        }
        for host in 0..<hostCount { out += perform(onMachine(host) { $0.tick(now: now) }, host: host, now: now) }
        if nfc != nil {
            for case .respond(let apdu) in nfc!.tick(now: now) { out.append(.apdu(apdu)) }
        }
        return out
    }

    /// The person touched the key (prompt mode, or the control plane), for `held` when the control plane says how
    /// long: a request that needs a long touch takes only one of at least ``SimulatedUser/longTouchHold`` (a touch
    /// that does not say how long, from the terminal or the desktop, is taken as the touch the prompt asked for).
    package mutating func touch(now: Duration, held: Duration? = nil) -> [KeyOutput] {
        guard let wait = waiting else {
            user.lastTouch = now
            return []
        }
        if let held, held < user.longTouchHold, authenticator.pendingPrompt?.gesture == .longTouch { return [] }
        waiting = nil
        return longTouchRegistered(now: now)
            + answer(authenticator.resume(userAnswer(.approved), now: now), channel: wait.channel, now: now)
    }

    /// Once a long touch has lasted long enough the keepalives say PROCESSING (the person may let go) before the
    /// reset answers.
    mutating func longTouchRegistered(now: Duration) -> [KeyOutput] {
        guard authenticator.pendingPrompt?.gesture == .longTouch else { return [] }
        guard let host = waiting?.channel.host ?? inFlight?.route.host else {
            nfc?.setStatus(.processing)
            return []
        }
        return perform(onMachine(host) { $0.setKeepaliveStatus(.processing, now: now) }, host: host, now: now)
    }

    /// The person refused the request waiting for a touch (`n` at the terminal, Deny on the desktop prompt).
    package mutating func refuse(now: Duration) -> [KeyOutput] {
        guard let wait = waiting else { return [] }
        waiting = nil
        return answer(authenticator.resume(userAnswer(.denied), now: now), channel: wait.channel, now: now)
    }

    /// The answer the simulated user gives to the prompt waiting now (``SimulatedUser/answer(_:to:)``).
    func userAnswer(_ presence: PresenceResult) -> PresenceResult {
        user.answer(presence, to: authenticator.pendingPrompt?.gesture)
    }

    /// Changes how the simulated user answers; a request already waiting keeps its answer.
    package mutating func setPresence(_ mode: PresenceMode, once: Bool = false) {
        user.setMode(mode, once: once)
    }

    /// When a report the key sends now goes out, if not at once: an INIT answer after ``initLatency``, reports
    /// made while ``holdUntil`` is set then, and anything after a held report no earlier than it (order is kept).
    func due(of report: [UInt8], host: Int, now: Duration) -> Duration? {
        var due = holdUntil
        if initLatency > .zero, report.count > 4, report[4] == 0x86 { due = max(due ?? .zero, now + initLatency) }
        // Behind the host's own held reports only: another host's answers are not held up by them.
        if let last = heldReports.last(where: { $0.host == host })?.due { due = max(due ?? last, last) }
        return due
    }

    /// Unplugs and re-plugs the key: volatile state goes, persistent state stays.
    package mutating func powerCycle(now: Duration) {
        heldReports.removeAll()
        hid.powerCycle()
        for host in otherHosts.indices { otherHosts[host].powerCycle() }
        authenticator.powerCycle(now: now)
        waiting = nil
        inFlight = nil
        lastCTAP2Route = nil
        user.lastTouch = nil
    }

    /// Carries out what `host`'s CTAPHID machine asked for.
    mutating func perform(_ actions: [CTAPHIDAction], host: Int, now: Duration) -> [KeyOutput] {
        var out: [KeyOutput] = []
        for action in actions {
            switch action {
            case .send(let report):
                if transportFaults.dropOutbound > 0 {
                    transportFaults.dropOutbound -= 1
                } else if let due = due(of: report, host: host, now: now) {
                    heldReports.append((due, report, host))
                } else {
                    out.append(.report(report, host: host))
                }
            case .wink:
                out.append(.wink)
            case .deliver(let channel, let command, let payload):
                if inFlight != nil {
                    // The authenticator works for the card or another host: this host hears busy, as from a busy key.
                    let busy: [UInt8] = command == .msg ? [0x69, 0x85] : [CTAPStatus.channelBusy.rawValue]
                    out += perform(
                        onMachine(host) { $0.complete(channel: channel, payload: busy, now: now) },
                        host: host,
                        now: now
                    )
                    continue
                }
                out += deliver(command: command, payload: payload, route: .hid(channel: channel, host: host), now: now)
            case .cancel(let channel):
                // Only the request this host's channel has in flight (the card's or another host's goes on).
                guard inFlight?.route == .hid(channel: channel, host: host) else { continue }
                waiting = nil
                if let response = authenticator.cancel() {
                    out += answer(.response(response), channel: .hid(channel: channel, host: host), now: now)
                }
            case .abort(let channel):
                guard inFlight?.route == .hid(channel: channel, host: host) else { continue }
                waiting = nil
                inFlight = nil
                authenticator.abort()
            }
        }
        return out
    }

    /// Hands a whole request to the authenticator (or answers it with a fault the control plane injected).
    mutating func deliver(command: CTAPHIDCommand, payload: [UInt8], route: Route, now: Duration) -> [KeyOutput] {
        var out: [KeyOutput] = []
        inFlight = (Self.describe(command: command, payload: payload), command == .msg, route)
        authenticator.setTransport(route == .nfc ? "nfc" : "usb")
        if command == .cbor {
            if let last = lastCTAP2Route, last != route { authenticator.requestFromAnotherChannel() }
            lastCTAP2Route = route
        }
        if traceMessages {
            let channel: UInt32
            if case .hid(let id, _) = route { channel = id } else { channel = 0 }
            out.append(
                .traced(TraceMessage(fromHost: true, channel: channel, command: command.rawValue, payload: payload))
            )
        }
        if let status = transportFaults.injectedStatus(u2f: command == .msg, commandByte: payload.first) {
            return out + answer(.response(status), channel: route, now: now, injected: true)
        }
        let outcome =
            command == .msg
            ? authenticator.handleU2F(payload, now: now) : authenticator.handleCBOR(payload, now: now)
        return out + answer(outcome, channel: route, now: now)
    }

    mutating func answer(
        _ outcome: AuthenticatorOutcome,
        channel route: Route,
        now: Duration,
        injected: Bool = false
    ) -> [KeyOutput] {
        switch outcome {
        case .response(let bytes):
            var out: [KeyOutput] = []
            let answered = inFlight?.name
            if let request = inFlight {
                requestCounts[request.name, default: 0] += 1
                out.append(
                    .processed(
                        RequestRecord(
                            command: request.name,
                            status: Self.describe(response: bytes, u2f: request.u2f),
                            injected: injected,
                            activity: injected ? nil : authenticator.lastActivity
                        )
                    )
                )
                if traceMessages {
                    var channel: UInt32 = 0
                    if case .hid(let id, _) = route { channel = id }
                    out.append(
                        .traced(
                            TraceMessage(
                                fromHost: false,
                                channel: channel,
                                command: request.u2f ? 0x03 : 0x10,
                                payload: bytes
                            )
                        )
                    )
                }
                inFlight = nil
            }
            guard case .hid(let channel, let host) = route else { return out + nfcComplete(bytes, now: now) }
            // A captured key's getInfo takes this long.
            if getInfoLatency > .zero && answered == "getInfo" { holdUntil = now + getInfoLatency }
            defer { holdUntil = nil }
            return out
                + perform(
                    onMachine(host) { $0.complete(channel: channel, payload: bytes, now: now) },
                    host: host,
                    now: now
                )
        case .needsUserPresence(let prompt) where prompt.protocolKind == .u2f:
            // U2F has no keepalive: the request answers at once, and the host polls until it succeeds.
            let (result, ask) = user.respondAtOnce(now: now)
            let out: [KeyOutput] = ask ? [.prompt(prompt)] : []
            return out + answer(authenticator.resume(result, now: now), channel: route, now: now)
        case .needsUserPresence(let prompt):
            // Over NFC too: the tap brings the card into the field; it is not consent to every request, so the
            // simulated user answers as over USB (the reader hears "user presence needed" meanwhile).
            var out: [KeyOutput] = []
            if let host = route.host {
                out = perform(onMachine(host) { $0.setKeepaliveStatus(.upNeeded, now: now) }, host: host, now: now)
            } else {
                nfc?.setStatus(.upNeeded)
            }
            let (deadline, answer) = user.respond(to: prompt, now: now)
            waiting = PresenceWait(channel: route, deadline: deadline, answer: answer)
            // In every mode: the control plane's subscribers learn that a request waits for the user.
            out.append(.prompt(prompt))
            return out
        }
    }
}
