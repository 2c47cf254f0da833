import ArgumentParser
import Benchmark
import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Console
import FlashImage
import FlashStore
import FlashStoreTesting
import HIDBridge

#if canImport(Glibc)
import Glibc
#endif

/// Geometries the proof and the benchmark can use.
enum TestGeometry: String, ExpressibleByArgument, CaseIterable {
    case nrf52840, stm32l4, tiny, large

    var geometry: FlashGeometry {
        switch self {
        case .nrf52840: .nrf52840
        case .stm32l4: .stm32l4(pages: 8)
        case .tiny:
            FlashGeometry(wordSize: 4, pageSize: 1024, pageCount: 8, maxProgramsPerWord: 2, eraseEndurance: 10_000)
        case .large: .large
        }
    }
}

/// The flash store's power-cut proof and its measurements: a tool of this repository (`make flash-proof`,
/// `make flash-bench`), apart from the fidosim binary so that it does not link the proofs' test support.
@main
struct FidosimProof: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fidosim-proof",
        abstract: "Prove and measure fidosim's flash store (a tool of the repository; not part of the fidosim binary).",
        subcommands: [Proof.self, Bench.self]
    )
}

extension FidosimProof {
    struct Proof: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Cut the power at every flash write of a workload, with every tear mode, and check nothing is lost.",
            discussion: """
                Exhaustive mode cuts at every mutation of every operation (4 tear modes each, and nested cuts \
                during the recovering mount); random mode runs seeded random workloads with random cuts. Every \
                violation prints its seed and cut point so it replays. Build with -c release for full runs.
                """
        )

        @Option(help: "Geometry.") var geometry: TestGeometry = .nrf52840
        @Option(help: "Exhaustive cut points to test (0 skips the exhaustive run).") var cutPoints: Int = 10_000
        @Option(help: "Random seeds to run (0 skips the random run).") var seeds: Int = 3_500
        @Option(help: "Operations per random seed.") var operationsPerSeed: Int = 60
        @Option(help: "First seed.") var firstSeed: UInt64 = 0
        @Option(help: "Cut points of the CTAP-level proof (the authenticator over the store; 0 skips it).")
        var ctapCutPoints: Int = 10_000

        @Option(help: "Trials of the damage proof, one flipped bit and one damaged byte each (0 skips it).")
        var bitFlipTrials: Int = 2_000

        func run() throws {
            let clock = ContinuousClock()
            let meter = ProgressMeter()
            var violations = 0
            if cutPoints > 0 {
                let start = clock.now
                let report = PowerCutProof.exhaustive(
                    geometry: geometry.geometry,
                    workload: .credentials,
                    operations: 1_000_000,
                    seed: firstSeed &+ 1,
                    limit: cutPoints,
                    progress: meter.phase("exhaustive \(geometry.rawValue)")
                )
                meter.done()
                let wall = seconds(clock.now - start)
                print(
                    "exhaustive \(geometry.rawValue): \(report.cutPoints) cut points x 4 tear modes, "
                        + "\(report.scenarios) scenarios (\(report.nestedScenarios) with a cut during recovery), "
                        + "\(report.violations.count) violations, \(format1(wall)) s"
                )
                for v in report.violations { print("  violation: \(v)") }
                violations += report.violations.count
            }
            if seeds > 0 {
                let start = clock.now
                let report = PowerCutProof.random(
                    geometry: geometry.geometry,
                    seeds: Array(firstSeed..<(firstSeed + UInt64(seeds))),
                    operationsPerSeed: operationsPerSeed,
                    progress: meter.phase("random \(geometry.rawValue)")
                )
                meter.done()
                let wall = seconds(clock.now - start)
                print(
                    "random \(geometry.rawValue): \(report.seeds) seeds, \(report.scenarios) cut scenarios "
                        + "(\(report.nestedScenarios) with a cut during recovery), \(report.violations.count) violations, "
                        + "\(format1(wall)) s"
                )
                for v in report.violations { print("  violation: \(v)") }
                violations += report.violations.count
            }
            if ctapCutPoints > 0 {
                let start = clock.now
                let report = CTAPPowerCutProof.run(
                    geometry: geometry.geometry,
                    operations: 1_000_000,
                    seed: firstSeed &+ 11,
                    cutLimit: ctapCutPoints,
                    progress: meter.phase("ctap \(geometry.rawValue)")
                )
                meter.done()
                let wall = seconds(clock.now - start)
                print("ctap \(geometry.rawValue): \(report), \(format1(wall)) s")
                for v in report.violations { print("  violation: \(v)") }
                violations += report.violations.count
            }
            if bitFlipTrials > 0 {
                for damage in [CTAPBitFlipProof.Damage.bit, .byte] {
                    let start = clock.now
                    let report = CTAPBitFlipProof.run(
                        geometry: geometry.geometry,
                        trials: bitFlipTrials,
                        seed: firstSeed &+ 1,
                        damage: damage,
                        progress: meter.phase("bit flips \(damage.rawValue)")
                    )
                    meter.done()
                    let wall = seconds(clock.now - start)
                    print("bit flips \(damage.rawValue): \(report), \(format1(wall)) s")
                    for v in report.violations { print("  violation: \(v)") }
                    violations += report.violations.count
                }
            }
            print("flash-proof: \(violations) violations")
            if violations > 0 { throw ExitCode(1) }
        }
    }

    struct Bench: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Measure capacity, lifetime, mount time, getAssertion latency and write amplification."
        )

        @Option(help: "Counter increments for the lifetime run (nrf52840 with 150 credentials).")
        var increments: Int = 2_000_000

        @Option(help: "Discoverable credentials for the mount and latency runs (large geometry).")
        var credentials: Int = 10_000

        func run() throws {
            let nrf = try fill(geometry: .nrf52840, limit: 100_000)
            print(
                "capacity nrf52840 (20 pages of 4 KiB): \(nrf.count) discoverable credentials "
                    + "(64-byte user id and name); getInfo said \(nrf.advertised) remaining when empty"
            )
            print("write amplification (credentials): \(format1(nrf.amplification)) bytes programmed per byte stored")
            let large = try fill(geometry: .large, limit: 100_000)
            print(
                "capacity large (\(FlashGeometry.large.totalSize / 1024) KiB): \(large.count) discoverable credentials; "
                    + "getInfo said \(large.advertised) remaining when empty"
            )
            try lifetime()
            try mountAndLatency()
            try durability()
        }

        /// getAssertion per second on an nRF52840 image file, with each `serve --durability`: process (pwrite before
        /// the answer) and host (also fdatasync). Each assertion commits the signature counter: one flash write.
        func durability() throws {
            let path = "/tmp/fidosim-flash-bench-\(getpid()).img"
            defer {
                unlink(path)
                unlink(path + ".lock")
            }
            let request: CBORValue = [
                1: "example.com", 2: .byteString(Array(repeating: 2, count: 32)), 5: ["up": false],
            ]
            let message = [0x02] + request.encoded()
            var rates: [Durability: Double] = [:]
            for setting in Durability.allCases {
                unlink(path)
                var entropy = EntropySource(SeededGenerator(seed: 3))
                let device = try FileFlash.open(path: path, geometry: .nrf52840, sync: setting == .host)
                var key = Key(
                    authenticator: try Authenticator(
                        storage: try FlashStorage(device: device, entropy: &entropy),
                        entropy: entropy,
                        now: .zero
                    )
                )
                guard Self.makeCredential(&key, index: 1, rp: "example.com") == 0 else {
                    throw ValidationError("could not store a credential on \(path)")
                }
                let clock = ContinuousClock()
                let start = clock.now
                var count = 0
                while clock.now - start < .seconds(2) {
                    guard case .response(let bytes) = key.authenticator.handleCBOR(message, now: key.now),
                        bytes.first == 0
                    else { throw ValidationError("getAssertion failed on \(path)") }
                    count += 1
                }
                rates[setting] = Double(count) / seconds(clock.now - start)
            }
            print(
                "getAssertion on an nrf52840 image file in /tmp: durability process \(Int(rates[.process] ?? 0))/s, "
                    + "host \(Int(rates[.host] ?? 0))/s (an fdatasync before each answer)"
            )
        }

        struct Key {
            var authenticator: Authenticator
            var now: Duration = .zero
        }

        static func makeKey(geometry: FlashGeometry) throws -> Key {
            var entropy = EntropySource(SeededGenerator(seed: 7))
            let storage = try FlashStorage(device: CountingFlash(SimulatedFlash(geometry: geometry)), entropy: &entropy)
            return Key(
                authenticator: try Authenticator(
                    configuration: AuthenticatorConfiguration(maxResidentCredentials: 1_000_000),
                    storage: storage,
                    entropy: entropy,
                    now: .zero
                )
            )
        }

        static func makeCredential(_ key: inout Key, index: Int, rp: String) -> UInt8 {
            var userId = Array(repeating: UInt8(0x55), count: 64)
            for b in 0..<8 { userId[b] = UInt8(truncatingIfNeeded: index >> (8 * b)) }
            let params: CBORValue = [
                1: .byteString(Array(repeating: 1, count: 32)),
                2: ["id": .textString(rp)],
                3: [
                    "id": .byteString(userId),
                    "name": .textString(String(repeating: "n", count: 56) + "\(100_000_000 + index)"),
                ],
                4: [["alg": -7, "type": "public-key"]],
                7: ["rk": true],
            ]
            var outcome = key.authenticator.handleCBOR([0x01] + params.encoded(), now: key.now)
            if case .needsUserPresence = outcome { outcome = key.authenticator.resume(.approved, now: key.now) }
            guard case .response(let bytes) = outcome else { return 0xFF }
            return bytes.first ?? 0xFF
        }

        static func remaining(_ key: inout Key) -> Int {
            guard case .response(let bytes) = key.authenticator.handleCBOR([0x04], now: key.now),
                let info = try? CBORDecoder.decode(Array(bytes.dropFirst()))
            else { return -1 }
            return info[0x14]?.intValue ?? -1
        }

        func fill(geometry: FlashGeometry, limit: Int) throws -> (count: Int, advertised: Int, amplification: Double) {
            var key = try Self.makeKey(geometry: geometry)
            let advertised = Self.remaining(&key)
            let before = (key.authenticator.storage as? FlashStorage<CountingFlash<SimulatedFlash>>)?.store.device
            var count = 0
            while count < limit {
                let status = Self.makeCredential(&key, index: count, rp: "rp\(count % 100).example.com")
                if status == CTAPStatus.keyStoreFull.rawValue { break }
                guard status == 0 else { throw ValidationError("makeCredential failed with status \(status)") }
                count += 1
            }
            let storage = key.authenticator.storage as? FlashStorage<CountingFlash<SimulatedFlash>>
            let stored =
                storage?.residentCredentials.reduce(0) {
                    $0 + CredentialRecord.encode($1).count
                } ?? 1
            let programmed = (storage?.store.device.programmedBytes ?? 0) - (before?.programmedBytes ?? 0)
            return (count, advertised, Double(programmed) / Double(max(1, stored)))
        }

        func lifetime() throws {
            var key = try Self.makeKey(geometry: .nrf52840)
            for i in 0..<150 {
                guard Self.makeCredential(&key, index: i, rp: "rp\(i % 10).example.com") == 0 else {
                    throw ValidationError("could not store 150 credentials")
                }
            }
            guard var storage = key.authenticator.storage as? FlashStorage<CountingFlash<SimulatedFlash>> else {
                return
            }
            let clock = ContinuousClock()
            let start = clock.now
            let programmedBefore = storage.store.device.programmedBytes
            var done = 0
            var wornOut = false
            while done < increments {
                do {
                    _ = try storage.incrementSignCounter()
                } catch {
                    wornOut = true
                    break
                }
                done += 1
            }
            let wall = seconds(clock.now - start)
            let life = storage.store.lifetime
            let perIncrement = Double(storage.store.device.programmedBytes - programmedBefore) / Double(max(1, done))
            let projected =
                life.maxEraseCount == 0 ? 0 : Double(done) * Double(life.endurance) / Double(life.maxEraseCount)
            print(
                "lifetime nrf52840 with 150 credentials: \(done) counter increments\(wornOut ? " (worn out)" : ""), "
                    + "page erases min \(life.minEraseCount) max \(life.maxEraseCount) (spread \(life.maxEraseCount - life.minEraseCount)) "
                    + "of \(life.endurance); projected end of life after \(Int(projected)) increments; "
                    + "\(format1(perIncrement)) bytes programmed per increment (4-byte value); \(format1(wall)) s"
            )
        }

        func mountAndLatency() throws {
            var key = try Self.makeKey(geometry: .large)
            for i in 0..<credentials {
                guard Self.makeCredential(&key, index: i, rp: "rp\(i % 100).example.com") == 0 else {
                    throw ValidationError("could not store \(credentials) credentials on the large geometry")
                }
            }
            guard let storage = key.authenticator.storage as? FlashStorage<CountingFlash<SimulatedFlash>> else {
                return
            }
            let clock = ContinuousClock()
            var mounts: [Double] = []
            for _ in 0..<21 {
                var entropy = EntropySource(SeededGenerator(seed: 1))
                let start = clock.now
                let mounted = try FlashStorage(device: storage.store.device, entropy: &entropy)
                mounts.append(seconds(clock.now - start) * 1000)
                guard mounted.residentCredentials.count == credentials else {
                    throw ValidationError("mount found \(mounted.residentCredentials.count) credentials")
                }
            }
            print(
                "mount with \(credentials) credentials (large): median \(format1(percentile(mounts, 50))) ms, "
                    + "p99 \(format1(percentile(mounts, 99))) ms"
            )
            var latencies: [Double] = []
            let request: CBORValue = [
                1: "rp7.example.com", 2: .byteString(Array(repeating: 2, count: 32)), 5: ["up": false],
            ]
            let message = [0x02] + request.encoded()
            for _ in 0..<1_000 {
                let start = clock.now
                let outcome = key.authenticator.handleCBOR(message, now: key.now)
                latencies.append(seconds(clock.now - start) * 1000)
                guard case .response(let bytes) = outcome, bytes.first == 0 else {
                    throw ValidationError("getAssertion failed")
                }
            }
            print(
                "getAssertion with \(credentials) credentials stored (\(credentials / 100) for the rp, counter "
                    + "committed to flash): median \(format2(percentile(latencies, 50))) ms, "
                    + "p99 \(format2(percentile(latencies, 99))) ms"
            )
        }
    }
}
