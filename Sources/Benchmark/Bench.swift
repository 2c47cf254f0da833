import CTAPCore
import Console
import ControlProtocol
import Crypto
import FlashStore
import HIDBridge

#if canImport(Glibc)
import Glibc
#endif

/// `fidosim bench`: throughput and latency against the P-256 signing limit of this machine, in process, through
/// CTAPHID, over UDP, on a flash image, or through a running key's hidraw node.
package struct Bench {
    /// Seconds per measurement.
    package var seconds: Double
    /// Only the raw row and one other: get-assertion, ctaphid, flash or udp.
    package var only: String?
    /// A running key's hidraw node, measured instead of the built-in rows.
    package var hidDevice: String?
    /// The row being measured and how far, on a terminal.
    let meter = ProgressMeter()
    /// Print one JSON object (`bench --json`) instead of tables; notes go to standard error.
    package var json = false

    package init(seconds: Double, only: String? = nil, hidDevice: String? = nil) {
        self.seconds = seconds
        self.only = only
        self.hidDevice = hidDevice
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

    package func run() throws {
        let cpuAtStart = CPUTimes.now()
        defer {
            if let start = cpuAtStart, let share = CPUTimes.now()?.stolenShare(since: start) {
                let line =
                    "CPU time the hypervisor gave to others during the run (steal): \(Int((share * 100).rounded()))%"
                if json {
                    printError(line)
                } else {
                    print("")
                    print(line)
                }
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
            rows.append(
                measure(name: "getAssertion over hidraw (client process -> \(Self.hidrawKeyKind) key)") {
                    try hid.getAssertion(credential: credential)
                }
            )
            // Measured alone, not interleaved: the key runs in another process, on a VM's emulated CPU.
            rows += makeCredentialRows(path: "over hidraw", measuring: measure) { resident, user in
                _ = try hid.makeCredential(resident: resident, user: user)
            }
            if json {
                emitJSON(rows, raw: raw)
                return
            }
            print("| measurement | per second | p50 ms | p99 ms | of raw signing |")
            print("|---|---|---|---|---|")
            for row in rows {
                print(
                    "| \(row.name) | \(Int(row.perSecond)) | \(format2(row.p50)) | \(format2(row.p99)) | "
                        + "\(row.ratio(toRaw: raw))% |"
                )
            }
            return
        }
        if only == "udp" {
            var udp = try UDPBench()
            let udpCredential = try udp.stopping { try $0.makeCredential() }
            note("udp server pid \(udp.process.pid)")
            rows += try udpRows(&udp, credential: udpCredential)
            udp.stop()
            var busy = try UDPBench(busyPollMicroseconds: Self.busyPollMicroseconds)
            let busyCredential = try busy.stopping { try $0.makeCredential() }
            note("udp server pid \(busy.process.pid) (--busy-poll)" + busy.placement)
            rows += try udpRows(&busy, credential: busyCredential, names: (Self.busyPollRow, Self.busyPollPipelinedRow))
            busy.stop()
            printBrief(rows)
            return
        }
        if only == "private" {
            rows.append(try privateRow())
            printBrief(rows)
            return
        }
        if only == "ctaphid" {
            var hid = try BenchVirtualKey()
            let hidCredential = try hid.makeCredential()
            rows.append(
                measureInterleaved(name: "getAssertion through CTAPHID in process") {
                    try hid.getAssertion(credential: hidCredential)
                }
            )
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
        rows.append(
            measureInterleaved(name: "getAssertion in process (allowList, up=false)") {
                try key.getAssertion(credential: credential)
            }
        )
        if only == "get-assertion" {
            printBrief(rows)
            return
        }
        rows += makeCredentialRows(path: "in process") { resident, user in
            _ = try key.makeCredential(resident: resident, user: user)
        }
        var hid = try BenchVirtualKey()
        let hidCredential = try hid.makeCredential()
        rows.append(
            measureInterleaved(name: "getAssertion through CTAPHID in process") {
                try hid.getAssertion(credential: hidCredential)
            }
        )
        rows += makeCredentialRows(path: "through CTAPHID in process") { resident, user in
            _ = try hid.makeCredential(resident: resident, user: user)
        }
        var udp = try UDPBench()
        let udpCredential = try udp.stopping { try $0.makeCredential() }
        rows += try udpRows(&udp, credential: udpCredential)
        rows += makeCredentialRows(path: "over UDP") { resident, user in
            _ = try udp.makeCredential(resident: resident, user: user)
        }
        rows.append(try privateRow())
        rows.append(
            measure(name: "CTAPHID PING over UDP, one report each way (the transport's floor)") {
                try udp.ping()
            }
        )
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
        rows.append(
            measureInterleaved(name: "getAssertion over UDP, 10,000 discoverable stored (flash)") {
                try fullUDP.getAssertion(credential: flashResident)
            }
        )
        let fullStart = fullUDP.startup
        let fullRSS = fullUDP.residentKiB()
        let fullAnon = fullUDP.residentKiB("RssAnon")
        fullUDP.stop()

        if json {
            func startup(_ ms: Double, _ rss: Int, _ anon: Int) -> JSONValue {
                [
                    "startMs": .number((ms * 100).rounded() / 100), "residentKiB": .integer(Int64(rss)),
                    "anonymousKiB": .integer(Int64(anon)),
                ]
            }
            emitJSON(
                rows,
                raw: raw,
                extra: [
                    "serveEmpty": startup(emptyStart, emptyRSS, emptyAnon),
                    "serveFull": startup(fullStart, fullRSS, fullAnon),
                ]
            )
            return
        }
        print("| measurement | per second | p50 ms | p99 ms | of raw signing |")
        print("|---|---|---|---|---|")
        for row in rows {
            print(
                "| \(row.name) | \(Int(row.perSecond)) | \(format2(row.p50)) | \(format2(row.p99)) | "
                    + "\(row.ratio(toRaw: raw))% |"
            )
        }
        print("")
        print(
            "Ratios are to raw signing in slices alternating with the row's own; the PING row's, to the raw row "
                + "(measured alone first)."
        )
        print("Busy-poll rows\(busyPlacement.isEmpty ? "" : ":" + busyPlacement.dropFirst()).")
        print("")
        print(
            "| fidosim serve | start to first INIT answered | resident memory after the run | of it, the process's own (RssAnon) |"
        )
        print("|---|---|---|---|")
        print(
            "| empty store (--flash memory) | \(format2(emptyStart)) ms | \(emptyRSS / 1024) MiB | \(emptyAnon / 1024) MiB |"
        )
        print(
            "| 10,000 discoverable credentials (flash image) | \(format2(fullStart)) ms | \(fullRSS / 1024) MiB | \(fullAnon / 1024) MiB |"
        )
    }

    func measure(name: String, _ body: () throws -> Void) -> Row {
        let clock = ContinuousClock()
        var latencies: [Double] = []
        let start = clock.now
        let end = start + .milliseconds(Int(seconds * 1000))
        let tick = meter.phase(name)
        defer { meter.done() }
        while clock.now < end {
            tick(Benchmark.seconds(clock.now - start) / seconds)
            let t = clock.now
            do { try body() } catch {
                note("\(name): failed: \(error)")
                break
            }
            latencies.append(Benchmark.seconds(clock.now - t) * 1000)
        }
        let total = Benchmark.seconds(clock.now - start)
        return Row(
            name: name,
            perSecond: Double(latencies.count) / total,
            p50: percentile(latencies, 50),
            p99: percentile(latencies, 99)
        )
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
                latencies.append(Benchmark.seconds(clock.now - t) * 1000)
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
        let tick = meter.phase(name)
        defer { meter.done() }
        while bodyTime < .milliseconds(Int(seconds * 1000)) {
            tick(Benchmark.seconds(bodyTime) / seconds)
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
                note("\(name): failed: \(error)")
                return Row(name: name, perSecond: 0, p50: 0, p99: 0)
            }
            bodyTime += clock.now - start
        }
        return Row(
            name: name,
            perSecond: Double(latencies.count) / Benchmark.seconds(bodyTime),
            p50: percentile(latencies, 50),
            p99: percentile(latencies, 99),
            reference: Double(signatures) / Benchmark.seconds(rawTime)
        )
    }

    /// getAssertion in process on a flash image (large geometry) holding 1 and then 10,000 discoverable
    /// credentials, and makeCredential with 10,000 stored; also the id of a credential stored in the image at
    /// `image`, which is left holding the 10,000.
    func flashRows(image: String) throws -> (rows: [Row], resident: [UInt8]) {
        var rows: [Row] = []
        let (emptyKey, emptyResident) = try BenchKey.filled(image: image, count: 1)
        var emptyFlash = emptyKey
        rows.append(
            measureInterleaved(name: "getAssertion in process, 1 discoverable stored (flash)") {
                try emptyFlash.getAssertion(credential: emptyResident)
            }
        )
        let (filled, flashResident) = try BenchKey.filled(image: image, count: 10_000)
        var full = filled
        rows.append(
            measureInterleaved(name: "getAssertion in process, 10,000 discoverable stored (flash)") {
                try full.getAssertion(credential: flashResident)
            }
        )
        // Replacing users 1...9,999 of the 10,000 keeps the count and leaves the last one, which the UDP row uses.
        var replaced = 0
        rows.append(
            measureInterleaved(name: "makeCredential in process (discoverable), 10,000 stored (flash)") {
                replaced = replaced % 9_999 + 1
                _ = try full.makeCredential(resident: true, user: replaced)
            }
        )
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
        path: String,
        measuring: ((String, () throws -> Void) -> Row)? = nil,
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
        _ udp: inout UDPBench,
        credential: [UInt8],
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

    /// A line for people: standard output, or standard error under --json.
    func note(_ line: String) {
        if json { printError(line) } else { printLine(line) }
    }

    /// `bench --json`: `{rows: [{name, perSecond, p50Ms, p99Ms, percentOfRaw}], ...extra}` on one line.
    /// What the hidraw node this bench measures belongs to: a private key when this process runs in a private key's
    /// tree (fidosim run), else a uhid key.
    static var hidrawKeyKind: String { getenv("UMOCKDEV_DIR") != nil ? "private" : "uhid" }

    /// getAssertion through a private hidraw node: this bench's own hidraw row, measured by a `fidosim bench
    /// --hid-device /dev/hidraw0` that `fidosim run` starts in its key's tree (client process -> private key).
    func privateRow() throws -> Row {
        let name = "getAssertion over a private hidraw node (fidosim run: client process -> key)"
        let (status, output) = try ChildProcess.output(arguments: [
            "run", "--flash", "memory", "--control", "off", "--presence-delay", "0", "--log-level", "error", "--",
            ChildProcess.executablePath(), "bench", "--seconds", String(seconds), "--hid-device", "/dev/hidraw0",
            "--json",
        ])
        let prefix = "getAssertion over hidraw"
        guard status == 0, let line = output.split(separator: "\n").last,
            let rows = (try? JSONParser.parse(String(line)))?["rows"]?.arrayValue,
            let row = rows.first(where: { $0["name"]?.stringValue?.hasPrefix(prefix) == true }),
            let perSecond = row["perSecond"]?.integerValue, let p50 = Self.double(row["p50Ms"]),
            let p99 = Self.double(row["p99Ms"])
        else {
            throw BenchError(description: "the private hidraw row failed (fidosim run exited \(status)): \(output)")
        }
        return Row(name: name, perSecond: Double(perSecond), p50: p50, p99: p99)
    }

    static func double(_ value: JSONValue?) -> Double? {
        switch value {
        case .number(let number): return number
        case .integer(let integer): return Double(integer)
        default: return nil
        }
    }

    func emitJSON(_ rows: [Row], raw: Row, extra: [String: JSONValue] = [:]) {
        func rounded(_ x: Double) -> JSONValue { .number((x * 1000).rounded() / 1000) }
        var object = extra
        object["rows"] = .array(
            rows.map { row in
                [
                    "name": .string(row.name), "perSecond": .integer(Int64(row.perSecond)), "p50Ms": rounded(row.p50),
                    "p99Ms": rounded(row.p99), "percentOfRaw": .integer(Int64(row.ratio(toRaw: raw))),
                ]
            }
        )
        print(JSONValue.object(object).encoded)
    }

    /// One line per row, for the --only runs.
    func printBrief(_ rows: [Row]) {
        if json, let raw = rows.first {
            emitJSON(rows, raw: raw)
            return
        }
        for row in rows {
            let ratio = row.reference.map { _ in ", \(row.ratio(toRaw: row))% of raw signing interleaved" } ?? ""
            print(
                "\(row.name): \(Int(row.perSecond))/s, p50 \(format2(row.p50)) ms, p99 \(format2(row.p99)) ms\(ratio)"
            )
        }
    }

    /// The UDP rows again with `serve --busy-poll` (and the client polling as long).
    static let busyPollMicroseconds = 200
    static let busyPollRow = "getAssertion over UDP, serve --busy-poll \(busyPollMicroseconds)"
    static let busyPollPipelinedRow = "getAssertion over UDP, --busy-poll \(busyPollMicroseconds), 4 channels in flight"
    static let rawKey = P256.Signing.PrivateKey()
    static let message = Array(repeating: UInt8(7), count: 69)
}
