import ArgumentParser
import CTAPCBOR
import CTAPCore
import CTAPHID
import CUHID
import Crypto
import FlashStore
#if canImport(FoundationEssentials)
import FoundationEssentials  // not Foundation: it would load ICU (about 7 MiB resident) into every fidosim process
#else
import Foundation
#endif
import FIDOClient
#if canImport(Glibc)
import Glibc
#endif
import HIDBridge

/// `fidosim bench`: throughput and latency against the P-256 signing limit of this machine.
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure signatures, getAssertion and makeCredential per second: in process, through CTAPHID, over UDP.")

    @Option(help: "Seconds per measurement.") var seconds: Double = 2

    @Option(
        help: ArgumentHelp(
            "Only the raw row and one other, to profile it: get-assertion (in process), ctaphid (in process), flash "
                + "(in process, on a flash image) or udp (perf record -g fidosim bench --only get-assertion; "
                + "perf record -p on the serve child for udp).",
            valueName: "row"))
    var only: String?

    @Option(
        help: ArgumentHelp(
            "Measure getAssertion through this running key's hidraw node (a uhid key, in the e2e VM) against the "
                + "raw rate instead of the built-in rows. The key must approve touches (--presence approve).",
            valueName: "path"))
    var hidDevice: String?

    func validate() throws {
        if let only, !["get-assertion", "ctaphid", "flash", "udp"].contains(only) {
            throw ValidationError("--only takes get-assertion, ctaphid, flash or udp")
        }
        // A row runs in slices of 25-50 ms; less than one gives no figure at all.
        guard seconds >= 0.05, seconds <= 3600 else {
            throw ValidationError("--seconds takes 0.05 to 3600")
        }
    }

    struct Row {
        var name: String
        var perSecond: Double
        var p50: Double
        var p99: Double
        /// For interleaved rows: the raw signing rate measured in slices alternating with the row's own, so that a
        /// change in the machine's speed during the run moves both alike.
        var reference: Double? = nil

        /// The row's rate in percent of the raw signing rate (0 when there is none to compare with).
        func ratio(toRaw raw: Row) -> Int {
            let base = reference ?? raw.perSecond
            return base > 0 ? Int((perSecond / base * 100).rounded()) : 0
        }
    }

    func run() throws {
        let cpuAtStart = CPUTimes.now()
        defer {
            if let start = cpuAtStart, let share = CPUTimes.now()?.stolenShare(since: start) {
                print("")
                print("CPU time the hypervisor gave to others during the run (steal): \(Int((share * 100).rounded()))%")
            }
        }
        // A signature as a key sends it: ECDSA over SHA-256, DER-encoded.
        let raw = measure(name: "raw ES256 signature, DER (swift-crypto)") { () throws -> Void in
            _ = try Self.rawKey.signature(for: Self.message).derRepresentation
        }
        var rows = [raw]
        if let hidDevice {
            var hid = try HIDBench(path: hidDevice)
            let credential = try hid.makeCredential()
            rows.append(measure(name: "getAssertion over hidraw (client process -> uhid key)") {
                try hid.getAssertion(credential: credential)
            })
            // Measured alone, not interleaved: the key runs in another process, on a VM's emulated CPU.
            rows += makeCredentialRows(path: "over hidraw", measuring: measure) { resident, user in
                _ = try hid.makeCredential(resident: resident, user: user)
            }
            print("| measurement | per second | p50 ms | p99 ms | of raw signing |")
            print("|---|---|---|---|---|")
            for row in rows {
                print("| \(row.name) | \(Int(row.perSecond)) | \(format2(row.p50)) | \(format2(row.p99)) | "
                    + "\(row.ratio(toRaw: raw))% |")
            }
            return
        }
        if only == "udp" {
            var udp = try UDPBench()
            let udpCredential = try udp.stopping { try $0.makeCredential() }
            printLine("udp server pid \(udp.process.pid)")
            rows += try udpRows(&udp, credential: udpCredential)
            udp.stop()
            var busy = try UDPBench(busyPollMicroseconds: Self.busyPollMicroseconds)
            let busyCredential = try busy.stopping { try $0.makeCredential() }
            printLine("udp server pid \(busy.process.pid) (--busy-poll)" + busy.placement)
            rows += try udpRows(&busy, credential: busyCredential, names: (Self.busyPollRow, Self.busyPollPipelinedRow))
            busy.stop()
            printBrief(rows)
            return
        }
        if only == "ctaphid" {
            var hid = try BenchVirtualKey()
            let hidCredential = try hid.makeCredential()
            rows.append(measureInterleaved(name: "getAssertion through CTAPHID in process") {
                try hid.getAssertion(credential: hidCredential)
            })
            printBrief(rows)
            return
        }
        if only == "flash" {
            let image = Self.temporaryImage()
            defer { unlink(image) }
            rows += try flashRows(image: image).rows
            printBrief(rows)
            return
        }
        var key = try BenchKey()
        let credential = try key.makeCredential(resident: false)
        rows.append(measureInterleaved(name: "getAssertion in process (allowList, up=false)") {
            try key.getAssertion(credential: credential)
        })
        if only == "get-assertion" {
            printBrief(rows)
            return
        }
        rows += makeCredentialRows(path: "in process") { resident, user in
            _ = try key.makeCredential(resident: resident, user: user)
        }
        var hid = try BenchVirtualKey()
        let hidCredential = try hid.makeCredential()
        rows.append(measureInterleaved(name: "getAssertion through CTAPHID in process") {
            try hid.getAssertion(credential: hidCredential)
        })
        rows += makeCredentialRows(path: "through CTAPHID in process") { resident, user in
            _ = try hid.makeCredential(resident: resident, user: user)
        }
        var udp = try UDPBench()
        let udpCredential = try udp.stopping { try $0.makeCredential() }
        rows += try udpRows(&udp, credential: udpCredential)
        rows += makeCredentialRows(path: "over UDP") { resident, user in
            _ = try udp.makeCredential(resident: resident, user: user)
        }
        rows.append(measure(name: "CTAPHID PING over UDP, one report each way (the transport's floor)") {
            try udp.ping()
        })
        let emptyStart = udp.startup
        let emptyRSS = udp.residentKiB()
        let emptyAnon = udp.residentKiB("RssAnon")
        udp.stop()
        var busy = try UDPBench(busyPollMicroseconds: Self.busyPollMicroseconds)
        let busyCredential = try busy.stopping { try $0.makeCredential() }
        let busyPlacement = busy.placement
        rows += try udpRows(&busy, credential: busyCredential, names: (Self.busyPollRow, Self.busyPollPipelinedRow))
        busy.stop()

        // The same key on a flash image (large geometry): empty, then with 10,000 discoverable credentials.
        let image = Self.temporaryImage()
        defer { unlink(image) }
        let flash = try flashRows(image: image)
        rows += flash.rows
        let flashResident = flash.resident
        let fullUDP = try UDPBench(flash: image)
        rows.append(measureInterleaved(name: "getAssertion over UDP, 10,000 discoverable stored (flash)") {
            try fullUDP.getAssertion(credential: flashResident)
        })
        let fullStart = fullUDP.startup
        let fullRSS = fullUDP.residentKiB()
        let fullAnon = fullUDP.residentKiB("RssAnon")
        fullUDP.stop()

        print("| measurement | per second | p50 ms | p99 ms | of raw signing |")
        print("|---|---|---|---|---|")
        for row in rows {
            print("| \(row.name) | \(Int(row.perSecond)) | \(format2(row.p50)) | \(format2(row.p99)) | "
                + "\(row.ratio(toRaw: raw))% |")
        }
        print("")
        print("Ratios are to raw signing in slices alternating with the row's own; the PING row's, to the raw row "
            + "(measured alone first).")
        print("Busy-poll rows\(busyPlacement.isEmpty ? "" : ":" + busyPlacement.dropFirst()).")
        print("")
        print("| fidosim serve | start to first INIT answered | resident memory after the run | of it, the process's own (RssAnon) |")
        print("|---|---|---|---|")
        print("| empty store (--flash memory) | \(format2(emptyStart)) ms | \(emptyRSS / 1024) MiB | \(emptyAnon / 1024) MiB |")
        print("| 10,000 discoverable credentials (flash image) | \(format2(fullStart)) ms | \(fullRSS / 1024) MiB | \(fullAnon / 1024) MiB |")
    }

    func measure(name: String, _ body: () throws -> Void) -> Row {
        let clock = ContinuousClock()
        var latencies: [Double] = []
        let start = clock.now
        let end = start + .milliseconds(Int(seconds * 1000))
        while clock.now < end {
            let t = clock.now
            do { try body() } catch {
                print("\(name): failed: \(error)")
                break
            }
            latencies.append(fidosim.seconds(clock.now - t) * 1000)
        }
        let total = fidosim.seconds(clock.now - start)
        return Row(
            name: name, perSecond: Double(latencies.count) / total, p50: percentile(latencies, 50),
            p99: percentile(latencies, 99))
    }

    /// A row measured in 25 ms slices that alternate with slices of raw signing, `seconds` of each: the row's
    /// ratio is to the raw rate of the same stretch of time.
    func measureInterleaved(name: String, _ body: () throws -> Void) -> Row {
        let clock = ContinuousClock()
        return interleaved(name: name, slice: .milliseconds(25)) { slice in
            var latencies: [Double] = []
            let start = clock.now
            while clock.now - start < slice {
                let t = clock.now
                try body()
                latencies.append(fidosim.seconds(clock.now - t) * 1000)
            }
            return latencies
        }
    }

    /// Slices of `runSlice` (given the slice's length; returns the latencies in milliseconds of what it completed)
    /// alternating with slices of raw signing of the same length, until the row has run `seconds`. The ratio is to
    /// the raw rate of the same stretch of time: a busy host or a sibling hyperthread slows both alike.
    func interleaved(name: String, slice: Duration, _ runSlice: (Duration) throws -> [Double]) -> Row {
        let clock = ContinuousClock()
        var latencies: [Double] = []
        var bodyTime = Duration.zero
        var signatures = 0
        var rawTime = Duration.zero
        while bodyTime < .milliseconds(Int(seconds * 1000)) {
            var start = clock.now
            while clock.now - start < slice {
                _ = try? Self.rawKey.signature(for: Self.message).derRepresentation
                signatures += 1
            }
            rawTime += clock.now - start
            start = clock.now
            do {
                latencies += try runSlice(slice)
            } catch {
                print("\(name): failed: \(error)")
                return Row(name: name, perSecond: 0, p50: 0, p99: 0)
            }
            bodyTime += clock.now - start
        }
        return Row(
            name: name, perSecond: Double(latencies.count) / fidosim.seconds(bodyTime), p50: percentile(latencies, 50),
            p99: percentile(latencies, 99), reference: Double(signatures) / fidosim.seconds(rawTime))
    }

    /// getAssertion in process on a flash image (large geometry) holding 1 and then 10,000 discoverable
    /// credentials, and makeCredential with 10,000 stored; also the id of a credential stored in the image at
    /// `image`, which is left holding the 10,000.
    func flashRows(image: String) throws -> (rows: [Row], resident: [UInt8]) {
        var rows: [Row] = []
        let (emptyKey, emptyResident) = try BenchKey.filled(image: image, count: 1)
        var emptyFlash = emptyKey
        rows.append(measureInterleaved(name: "getAssertion in process, 1 discoverable stored (flash)") {
            try emptyFlash.getAssertion(credential: emptyResident)
        })
        let (filled, flashResident) = try BenchKey.filled(image: image, count: 10_000)
        var full = filled
        rows.append(measureInterleaved(name: "getAssertion in process, 10,000 discoverable stored (flash)") {
            try full.getAssertion(credential: flashResident)
        })
        // Replacing users 1...9,999 of the 10,000 keeps the count and leaves the last one, which the UDP row uses.
        var replaced = 0
        rows.append(measureInterleaved(name: "makeCredential in process (discoverable), 10,000 stored (flash)") {
            replaced = replaced % 9_999 + 1
            _ = try full.makeCredential(resident: true, user: replaced)
        })
        return (rows, flashResident)
    }

    /// A path for the flash rows' image: in $TMPDIR (or /tmp), named after this process.
    static func temporaryImage() -> String {
        let temporary = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        return temporary + "/fidosim-bench-\(getpid()).img"
    }

    /// makeCredential by `path`, non-discoverable and then discoverable (each request replaces the stored credential
    /// of one of 100 users, so the store stays small): `body` makes one, given whether it is discoverable and for which
    /// user.
    /// `measuring` is how each row is measured (interleaved with raw signing unless given).
    func makeCredentialRows(
        path: String, measuring: ((String, () throws -> Void) -> Row)? = nil,
        _ body: (_ resident: Bool, _ user: Int) throws -> Void
    ) -> [Row] {
        let measure = measuring ?? measureInterleaved
        var user = 0
        return [
            measure("makeCredential \(path) (non-discoverable)") { try body(false, 1) },
            measure("makeCredential \(path) (discoverable, 100 users)") {
                user = user % 100 + 1
                try body(true, user)
            },
        ]
    }

    /// getAssertion over UDP one at a time and with 4 channels in flight, under the given row names (the plain
    /// server's by default); the server is stopped if one fails.
    func udpRows(
        _ udp: inout UDPBench, credential: [UInt8],
        names: (String, String) = (
            "getAssertion over UDP (client process -> fidosim serve)",
            "getAssertion over UDP, 4 channels in flight (throughput)"
        )
    ) throws -> [Row] {
        try udp.stopping { udp in
            let channels = try udp.openChannels(4)
            return [
                measureInterleaved(name: names.0) { try udp.getAssertion(credential: credential) },
                // Longer slices: each one fills the pipeline and drains it.
                interleaved(name: names.1, slice: .milliseconds(50)) { slice in
                    try udp.pipelinedGetAssertions(credential: credential, channels: channels, seconds: slice)
                },
            ]
        }
    }

    /// One line per row, for the --only runs.
    func printBrief(_ rows: [Row]) {
        for row in rows {
            let ratio = row.reference.map { _ in ", \(row.ratio(toRaw: row))% of raw signing interleaved" } ?? ""
            print("\(row.name): \(Int(row.perSecond))/s, p50 \(format2(row.p50)) ms, p99 \(format2(row.p99)) ms\(ratio)")
        }
    }

    /// The UDP rows again with `serve --busy-poll` (and the client polling as long).
    static let busyPollMicroseconds = 200
    static let busyPollRow = "getAssertion over UDP, serve --busy-poll \(busyPollMicroseconds)"
    static let busyPollPipelinedRow = "getAssertion over UDP, --busy-poll \(busyPollMicroseconds), 4 channels in flight"
    static let rawKey = P256.Signing.PrivateKey()
    static let message = Array(repeating: UInt8(7), count: 69)
}

/// The machine's CPU time counters (the first line of /proc/stat, in clock ticks).
struct CPUTimes {
    var total: Int
    var steal: Int

    static func now() -> CPUTimes? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return nil }
        let fields = line.split(separator: " ").dropFirst().compactMap { Int($0) }
        // user nice system idle iowait irq softirq steal (guest time is already counted in user and nice).
        guard fields.count >= 8 else { return nil }
        return CPUTimes(total: fields.prefix(8).reduce(0, +), steal: fields[7])
    }

    /// The share of all CPU time since `start` that was stolen: a busy host running other virtual machines
    /// on this one's CPUs, which makes wake-ups and the UDP rows slow and uneven.
    func stolenShare(since start: CPUTimes) -> Double? {
        let total = total - start.total
        return total > 0 ? Double(steal - start.steal) / Double(total) : nil
    }
}

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
            storage: MemoryStorage(deviceSecret: entropy.bytes(32), capacity: 1_000_000), entropy: entropy, now: .zero)
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
                configuration: AuthenticatorConfiguration(maxResidentCredentials: 1_000_000), storage: storage,
                entropy: entropy, now: .zero))
        var last: [UInt8] = []
        for _ in 0..<count { last = try key.makeCredential(resident: true) }
        return (key, last)
    }
}

/// Reassembles one response message from reports; returns nil until complete. KEEPALIVEs are skipped.
struct HIDAssembler {
    var command: UInt8 = 0
    var length = 0
    var data: [UInt8] = []

    /// The channel a report is on; nil for one too short to have a command byte.
    static func channel(of report: [UInt8]) -> UInt32? {
        report.count >= 5 ? report.prefix(4).reduce(0) { $0 << 8 | UInt32($1) } : nil
    }

    mutating func add(_ report: [UInt8]) -> (command: UInt8, payload: [UInt8])? {
        guard report.count == 64 else { return nil }
        if report[4] & 0x80 != 0 {
            if report[4] == 0xBB { return nil }  // keepalive
            command = report[4]
            length = Int(report[5]) << 8 | Int(report[6])
            data = Array(report[7..<min(64, 7 + length)])
        } else {
            data += report[5..<min(64, 5 + length - data.count)]
        }
        return data.count >= length ? (command, data) : nil
    }
}

/// The whole key (CTAPHID + authenticator) in process.
struct BenchVirtualKey {
    var key: VirtualKey
    let memo = GetAssertionMemo()
    let channel: UInt32 = 0x1234_5678

    init() throws {
        var entropy = EntropySource.system
        let authenticator = try Authenticator(
            storage: MemoryStorage(deviceSecret: entropy.bytes(32), capacity: 1_000_000), entropy: entropy, now: .zero)
        key = VirtualKey(
            hid: CTAPHIDMachine(channelSeed: 1), authenticator: authenticator, presence: .approve(after: .zero))
    }

    mutating func call(_ message: [UInt8]) throws -> [UInt8] {
        var assembler = HIDAssembler()
        var outputs: [KeyOutput] = []
        for report in CTAPHIDMachine.reports(channel: channel, command: .cbor, payload: message) {
            outputs += key.receive(report: report, now: .zero)
        }
        outputs += key.tick(now: .zero)
        for case .report(let r) in outputs {
            if let (_, payload) = assembler.add(r) { return payload }
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
        startup = fidosim.seconds(clock.now - started) * 1000
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

    mutating func initialize(timeoutMs: Int = 50) throws {
        let nonce: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let response = try exchange(command: .initialize, payload: nonce, on: 0xFFFF_FFFF, timeoutMs: timeoutMs)
        guard response.count >= 12, Array(response.prefix(8)) == nonce else { throw BenchError(description: "bad INIT") }
        channel = response[8..<12].reduce(0) { $0 << 8 | UInt32($1) }
    }

    func exchange(command: CTAPHIDCommand, payload: [UInt8], on cid: UInt32, timeoutMs: Int = 2000) throws -> [UInt8] {
        // A whole request in one send, as fidosim answers: one wake-up each way.
        socket.sendTo(port: port, batch: CTAPHIDMachine.reports(channel: cid, command: command, payload: payload))
        var assembler = HIDAssembler()
        let clock = ContinuousClock()
        let sent = clock.now
        let deadline = sent + .milliseconds(timeoutMs)
        while clock.now < deadline {
            // Everything waiting, in one recvmmsg.
            for case .report(let datagram) in socket.receiveAll() {
                // Only this channel's answer to this command: a late answer to an earlier INIT (the start-up loop
                // retries every 2 ms, and a slow machine answers some of them after the next request went out)
                // must not be taken for it.
                guard HIDAssembler.channel(of: datagram) == cid,
                    let (answered, message) = assembler.add(datagram)
                else { continue }
                if answered & 0x7F == command.rawValue { return message }
                if answered & 0x7F == CTAPHIDCommand.error.rawValue {
                    throw BenchError(description: "CTAPHID error \(message.first.map { String($0) } ?? "?")")
                }
                assembler = HIDAssembler()
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
            exchange(command: .cbor, payload: BenchRequests.makeCredential(resident: resident, user: user), on: channel))
    }

    func getAssertion(credential: [UInt8]) throws {
        guard try exchange(command: .cbor, payload: memo.request(credential), on: channel)
            .first == 0
        else { throw BenchError(description: "getAssertion failed") }
    }

    /// getAssertion with `depth` requests in flight, each on its own channel: as soon as one answer is complete the
    /// next request goes out on that channel. The key still answers one request at a time (CTAPHID has one
    /// transaction at a time per channel, and fidosim handles each whole message as it completes); what this
    /// removes is the idle time of one-at-a-time ping-pong between two processes. Returns each request's latency
    /// in milliseconds.
    mutating func pipelinedGetAssertions(
        credential: [UInt8], channels: [UInt32], seconds: Duration
    ) throws -> [Double] {
        let depth = channels.count
        let request = memo.request(credential)
        let clock = ContinuousClock()
        var assemblers = [UInt32: HIDAssembler]()
        var sentAt = [UInt32: ContinuousClock.Instant]()
        var latencies: [Double] = []
        let end = clock.now + seconds
        socket.sendTo(
            port: port, batch: channels.flatMap { CTAPHIDMachine.reports(channel: $0, command: .cbor, payload: request) })
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
            for case .report(let datagram) in events {
                guard let cid = HIDAssembler.channel(of: datagram), let started = sentAt[cid],
                    let (_, message) = assemblers[cid, default: HIDAssembler()].add(datagram)
                else { continue }
                assemblers[cid] = HIDAssembler()
                guard message.first == 0 else { throw BenchError(description: "getAssertion failed (pipelined)") }
                let now = clock.now
                latencies.append(fidosim.seconds(now - started) * 1000)
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

/// CPU affinity of processes (Linux).
enum CPUAffinity {
    /// The CPUs the calling process may run on now; nil when the kernel does not say.
    static func current() -> fidosim_cpu_mask? {
        var mask = fidosim_cpu_mask()
        return fidosim_get_affinity(0, &mask) == 0 ? mask : nil
    }

    /// The CPU numbers in `mask`, ascending.
    static func cpus(_ mask: fidosim_cpu_mask) -> [Int] {
        withUnsafeBytes(of: mask.bits) { raw in
            let words = raw.bindMemory(to: UInt.self)
            return words.indices.flatMap { w in
                (0..<UInt.bitWidth).filter { words[w] & (1 << $0) != 0 }.map { w * UInt.bitWidth + $0 }
            }
        }
    }

    /// Lets process `pid` (0: this one) run on `cpu` only.
    static func pin(_ pid: Int32, to cpu: Int) -> Bool {
        var mask = fidosim_cpu_mask()
        withUnsafeMutableBytes(of: &mask.bits) { raw in
            raw.bindMemory(to: UInt.self)[cpu / UInt.bitWidth] |= 1 << (cpu % UInt.bitWidth)
        }
        return fidosim_set_affinity(pid, &mask) == 0
    }
}

/// This executable run again as a child (`fidosim serve`), its standard output to /dev/null.
struct ChildProcess {
    let pid: pid_t

    init(arguments: [String]) throws {
        let path = Self.executablePath()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for arg in argv { free(arg) } }
        var child = pid_t()
        let status = posix_spawn(&child, path, &actions, nil, argv, environ)
        guard status == 0 else {
            throw BenchError(description: "cannot start \(path): \(String(cString: strerror(status)))")
        }
        pid = child
    }

    /// The running executable, through /proc (argv[0] may be a bare name found on PATH).
    static func executablePath() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        return n > 0 ? String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
    }

    /// SIGTERM, then waits for the child to end.
    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
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
