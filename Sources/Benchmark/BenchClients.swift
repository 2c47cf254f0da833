import CTAPCBOR
import CTAPCore
import CTAPHID
import FIDOClient
import FlashImage
import FlashStore
import HIDAPIDevice
import HIDBridge
import Profiles
import VirtualKey

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import CProcessControl
import Glibc
#endif

struct BenchError: Error, CustomStringConvertible {
    var description: String
}

/// The last getAssertion request built, so that the measured loops send bytes made once (as a client would).
final class GetAssertionMemo {
    var credential: [UInt8] = []
    var bytes: [UInt8] = []

    func request(_ credential: [UInt8]) -> [UInt8] {
        if credential != self.credential {
            self.credential = credential
            bytes = BenchRequests.getAssertion(credential: credential)
        }
        return bytes
    }
}

/// Requests shared by the benchmarks.
enum BenchRequests {
    static func makeCredential(resident: Bool, user: Int) -> [UInt8] {
        let params: CBORValue = [
            1: .byteString(Array(repeating: 1, count: 32)),
            2: ["id": "bench.example.com"],
            3: ["id": .byteString(Array(String(user).utf8)), "name": "bench"],
            4: [["alg": -7, "type": "public-key"]],
            7: ["rk": .boolean(resident)],
        ]
        return [0x01] + params.encoded()
    }

    static func getAssertion(credential: [UInt8]) -> [UInt8] {
        let params: CBORValue = [
            1: "bench.example.com", 2: .byteString(Array(repeating: 2, count: 32)),
            3: [["id": .byteString(credential), "type": "public-key"]], 5: ["up": false],
        ]
        return [0x02] + params.encoded()
    }

    /// The credential id in a makeCredential response.
    static func credentialId(_ response: [UInt8]) throws -> [UInt8] {
        guard response.first == 0, let map = try? CBORDecoder.decode(Array(response.dropFirst())),
            let authData = map[2]?.bytesValue, authData.count > 55
        else { throw BenchError(description: "makeCredential failed: status \(response.first ?? 0xFF)") }
        let length = Int(authData[53]) << 8 | Int(authData[54])
        return Array(authData[55..<(55 + length)])
    }
}

/// The authenticator alone, in memory.
struct BenchKey {
    var authenticator: Authenticator
    let memo = GetAssertionMemo()
    var users = 0

    init(authenticator: Authenticator) {
        self.authenticator = authenticator
    }

    init() throws {
        var entropy = EntropySource.system
        authenticator = try Authenticator(
            storage: MemoryStorage(deviceSecret: entropy.bytes(32), capacity: 1_000_000),
            entropy: entropy,
            now: .zero
        )
    }

    mutating func makeCredential(resident: Bool) throws -> [UInt8] {
        users += 1
        return try makeCredential(resident: resident, user: users)
    }

    /// A credential for user number `user` (a discoverable one replaces that user's stored one).
    mutating func makeCredential(resident: Bool, user: Int) throws -> [UInt8] {
        var outcome = authenticator.handleCBOR(BenchRequests.makeCredential(resident: resident, user: user), now: .zero)
        if case .needsUserPresence = outcome { outcome = authenticator.resume(.approved, now: .zero) }
        guard case .response(let bytes) = outcome else { throw BenchError(description: "no response") }
        return try BenchRequests.credentialId(bytes)
    }

    mutating func getAssertion(credential: [UInt8]) throws {
        guard case .response(let bytes) = authenticator.handleCBOR(memo.request(credential), now: .zero),
            bytes.first == 0
        else { throw BenchError(description: "getAssertion failed") }
    }

    /// A key on a new flash image at `image` (large geometry) holding `count` discoverable credentials; returns
    /// it and the id of the last credential.
    static func filled(image: String, count: Int) throws -> (BenchKey, [UInt8]) {
        unlink(image)
        var entropy = EntropySource.system
        let device = try FileFlash.open(path: image, geometry: .large, create: true, sync: false)
        let storage = try FlashStorage(device: device, entropy: &entropy)
        var key = BenchKey(
            authenticator: try Authenticator(
                configuration: AuthenticatorConfiguration(maxResidentCredentials: 1_000_000),
                storage: storage,
                entropy: entropy,
                now: .zero
            )
        )
        var last: [UInt8] = []
        for _ in 0..<count { last = try key.makeCredential(resident: true) }
        return (key, last)
    }
}

/// The whole key (CTAPHID + authenticator) in process.
struct BenchVirtualKey {
    var key: VirtualKey
    let memo = GetAssertionMemo()
    let channel: UInt32 = 0x1234_5678

    init() throws {
        var entropy = EntropySource.system
        key = try KeyRecipe().makeKey(
            profile: try ProfileFile.load("fidosim"),
            storage: MemoryStorage(deviceSecret: entropy.bytes(32), capacity: 1_000_000),
            entropy: entropy,
            presence: .approve(after: .zero)
        )
    }

    mutating func call(_ message: [UInt8]) throws -> [UInt8] {
        var assembler = HIDMessageAssembler(channel: channel)
        var outputs: [KeyOutput] = []
        for report in CTAPHIDMachine.reports(channel: channel, command: .cbor, payload: message) {
            outputs += key.receive(report: report, now: .zero)
        }
        outputs += key.tick(now: .zero)
        for case .report(let r, _) in outputs {
            if case .message(let answer) = try assembler.add(r) { return answer.payload }
        }
        throw BenchError(description: "no CTAPHID response")
    }

    mutating func makeCredential(resident: Bool = false, user: Int = 1) throws -> [UInt8] {
        try BenchRequests.credentialId(call(BenchRequests.makeCredential(resident: resident, user: user)))
    }

    mutating func getAssertion(credential: [UInt8]) throws {
        guard try call(memo.request(credential)).first == 0 else {
            throw BenchError(description: "getAssertion failed")
        }
    }
}

/// `fidosim serve` in a child process, driven over UDP from this process.
struct UDPBench {
    let memo = GetAssertionMemo()
    let process: ChildProcess
    let socket: UDPTransport
    let port: UInt16
    var channel: UInt32 = 0xFFFF_FFFF
    /// Milliseconds from starting the process to its first INIT answer.
    var startup: Double = 0
    /// `serve --busy-poll`, and as long the client polls for an answer before it sleeps: zero, or both sides
    /// stay awake between back-to-back requests.
    let busyPoll: Duration

    init(flash: String = "memory", busyPollMicroseconds: Int = 0) throws {
        busyPoll = .microseconds(busyPollMicroseconds)
        // Pick a free port by binding one and closing it again, then let the server bind it.
        port = try { () throws -> UInt16 in try UDPTransport(host: "127.0.0.1", port: 0).port }()
        socket = try UDPTransport(host: "127.0.0.1", port: 0)
        let clock = ContinuousClock()
        let started = clock.now
        process = try ChildProcess(arguments: [
            "serve", "--transport", "udp", "--port", String(port), "--flash", flash, "--presence-delay", "0",
            "--log-level", "error", "--control", "off", "--busy-poll", String(busyPollMicroseconds),
        ])
        var ready = false
        while !ready && clock.now - started < .seconds(10) {
            ready = (try? initialize(timeoutMs: 2)) != nil
        }
        guard ready else { throw BenchError(description: "fidosim serve did not answer INIT") }
        startup = Benchmark.seconds(clock.now - started) * 1000
        // Two processes that spin must not share a CPU: the kernel wakes a server on its client's CPU when it finds
        // no idle one (say, beside a fuzzer), and the two then take turns in scheduler slices of milliseconds.
        if busyPollMicroseconds > 0, var saved = CPUAffinity.current(), case let cpus = CPUAffinity.cpus(saved),
            cpus.count >= 2, CPUAffinity.pin(0, to: cpus[0])
        {
            if CPUAffinity.pin(process.pid, to: cpus[1]) {
                pinnedCPUs = (cpus[0], cpus[1])
                savedAffinity = saved
            } else {
                _ = fidosim_set_affinity(0, &saved)  // both or neither
            }
        }
    }

    /// Where a busy-poll bench runs, for its report line.
    var placement: String {
        guard busyPoll > .zero else { return "" }
        guard let cpus = pinnedCPUs else { return "; client and server not pinned (one CPU, or affinity refused)" }
        return "; client on CPU \(cpus.client), server on CPU \(cpus.server)"
    }

    /// This process's CPUs before a busy-poll bench pinned it (nil when it pinned nothing), restored by ``stop()``.
    var savedAffinity: fidosim_cpu_mask?
    /// With busy-poll on a machine of two CPUs or more: the CPU of this process (the client) and of the server.
    var pinnedCPUs: (client: Int, server: Int)?

    /// The server's resident set size in KiB (VmRSS).
    /// A field of /proc/PID/status in KiB: VmRSS (all resident pages, shared libraries' included) or RssAnon
    /// (the process's own heap and stacks).
    func residentKiB(_ field: String = "VmRSS") -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// One report each way: CTAPHID PING, the floor of any request over UDP (two datagrams, two wake-ups).
    func ping() throws {
        _ = try exchange(command: .ping, payload: [1, 2, 3, 4], on: channel)
    }

    mutating func initialize(timeoutMs: Int = 2000) throws {
        let nonce: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let response = try exchange(command: .initialize, payload: nonce, on: 0xFFFF_FFFF, timeoutMs: timeoutMs)
        guard response.count >= 12, Array(response.prefix(8)) == nonce else {
            throw BenchError(description: "bad INIT")
        }
        channel = response[8..<12].reduce(0) { $0 << 8 | UInt32($1) }
    }

    func exchange(command: CTAPHIDCommand, payload: [UInt8], on cid: UInt32, timeoutMs: Int = 2000) throws -> [UInt8] {
        // A whole request in one send, as fidosim answers: one wake-up each way.
        socket.sendTo(port: port, batch: CTAPHIDMachine.reports(channel: cid, command: command, payload: payload))
        var assembler = HIDMessageAssembler(channel: cid)
        let clock = ContinuousClock()
        let sent = clock.now
        let deadline = sent + .milliseconds(timeoutMs)
        while clock.now < deadline {
            // Everything waiting, in one recvmmsg.
            for case .report(let datagram, _) in socket.receiveAll() {
                // Only this channel's answer to this command: a late answer to an earlier INIT (the start-up loop
                // retries every 2 ms, and a slow machine answers some of them after the next request went out)
                // must not be taken for it.
                guard case .message(let answer) = try assembler.add(datagram) else { continue }
                if answer.command & 0x7F == command.rawValue { return answer.payload }
                if answer.command & 0x7F == CTAPHIDCommand.error.rawValue {
                    throw BenchError(description: "CTAPHID error \(answer.payload.first.map { String($0) } ?? "?")")
                }
                assembler = HIDMessageAssembler(channel: cid)
            }
            // Sleep until a datagram arrives (or the deadline), unless still in the busy-poll window.
            if clock.now - sent < busyPoll { continue }
            var pfd = pollfd(fd: socket.descriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, Int32(max(1, timeoutMs / 10)))
        }
        throw BenchError(description: "no UDP response")
    }

    mutating func makeCredential(resident: Bool = false, user: Int = 1) throws -> [UInt8] {
        try BenchRequests.credentialId(
            exchange(command: .cbor, payload: BenchRequests.makeCredential(resident: resident, user: user), on: channel)
        )
    }

    func getAssertion(credential: [UInt8]) throws {
        guard
            try exchange(command: .cbor, payload: memo.request(credential), on: channel)
                .first == 0
        else { throw BenchError(description: "getAssertion failed") }
    }

    /// getAssertion with `depth` requests in flight, each on its own channel: as soon as one answer is complete the
    /// next request goes out on that channel. The key still answers one request at a time (CTAPHID has one
    /// transaction at a time per channel, and fidosim handles each whole message as it completes); what this
    /// removes is the idle time of one-at-a-time ping-pong between two processes. Returns each request's latency
    /// in milliseconds.
    mutating func pipelinedGetAssertions(
        credential: [UInt8],
        channels: [UInt32],
        seconds: Duration
    ) throws -> [Double] {
        let depth = channels.count
        let request = memo.request(credential)
        let clock = ContinuousClock()
        var assemblers = [UInt32: HIDMessageAssembler]()
        var sentAt = [UInt32: ContinuousClock.Instant]()
        var latencies: [Double] = []
        let end = clock.now + seconds
        socket.sendTo(
            port: port,
            batch: channels.flatMap { CTAPHIDMachine.reports(channel: $0, command: .cbor, payload: request) }
        )
        for cid in channels { sentAt[cid] = clock.now }
        var inFlight = depth
        var lastEvent = clock.now
        while inFlight > 0 {
            // Everything waiting in one recvmmsg; the next requests of the answers it completes in one send.
            let events = socket.receiveAll()
            if events.isEmpty && clock.now - lastEvent < busyPoll { continue }
            if events.isEmpty {
                var pfd = pollfd(fd: socket.descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 2000) > 0 else { throw BenchError(description: "no UDP response (pipelined)") }
                continue
            }
            lastEvent = clock.now
            var next: [[UInt8]] = []
            var resent: [UInt32] = []
            for case .report(let datagram, _) in events {
                guard let cid = HIDMessageAssembler.channel(of: datagram), let started = sentAt[cid],
                    case .message(let answer) = try assemblers[cid, default: HIDMessageAssembler(channel: cid)].add(
                        datagram
                    )
                else { continue }
                assemblers[cid] = HIDMessageAssembler(channel: cid)
                guard answer.payload.first == 0 else {
                    throw BenchError(description: "getAssertion failed (pipelined)")
                }
                let now = clock.now
                latencies.append(Benchmark.seconds(now - started) * 1000)
                if now < end {
                    resent.append(cid)
                    next += CTAPHIDMachine.reports(channel: cid, command: .cbor, payload: request)
                } else {
                    inFlight -= 1
                }
            }
            if !next.isEmpty { socket.sendTo(port: port, batch: next) }
            // A request's latency starts when it is sent, after the rest of the batch was handled.
            let sent = clock.now
            for cid in resent { sentAt[cid] = sent }
        }
        return latencies
    }

    /// `count` channels of their own (INIT for each), for requests in flight side by side; the last one stays the
    /// bench's channel.
    mutating func openChannels(_ count: Int) throws -> [UInt32] {
        var channels: [UInt32] = []
        for _ in 0..<count {
            try initialize()
            channels.append(channel)
        }
        return channels
    }

    /// Runs `body`; when it throws, the server process is stopped before the error goes on.
    mutating func stopping<T>(_ body: (inout UDPBench) throws -> T) throws -> T {
        do {
            return try body(&self)
        } catch {
            stop()
            throw error
        }
    }

    func stop() {
        process.stop()
        if var saved = savedAffinity { _ = fidosim_set_affinity(0, &saved) }
    }
}

/// A running key reached through its hidraw node with FIDOClient (hidapi), as a host program reaches it.
struct HIDBench {
    let client: CTAP2Client

    init(path: String) throws {
        let hid = CTAPHIDClient(channel: try HIDAPIReportChannel(path: path))
        try hid.initialize()
        client = CTAP2Client(hid: hid)
    }

    func call(_ request: [UInt8]) throws -> [UInt8] {
        let response = try client.sendRaw(request)
        guard response.ok else { throw BenchError(description: "status \(CTAPStatusCode.describe(response.status))") }
        return [0] + response.body
    }

    mutating func makeCredential(resident: Bool = false, user: Int = 1) throws -> [UInt8] {
        try BenchRequests.credentialId(try call(BenchRequests.makeCredential(resident: resident, user: user)))
    }

    func getAssertion(credential: [UInt8]) throws {
        _ = try call(BenchRequests.getAssertion(credential: credential))
    }
}
