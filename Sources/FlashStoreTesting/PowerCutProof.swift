package import FlashStore

/// A property the store broke under a power cut, with what it takes to replay it.
package struct ProofViolation: Hashable, Sendable, CustomStringConvertible {
    /// Seed of the workload (and of the random choices in random mode).
    package var seed: UInt64
    /// Index of the operation during which the power was cut (0-based).
    package var operation: Int
    /// The operation, described.
    package var operationDescription: String
    /// Which mutation of the operation was cut (1-based), if any.
    package var cut: Int?
    /// How it was torn.
    package var tear: TearMode?
    /// Which mutation of the recovering mount was cut (1-based), if any.
    package var nestedCut: Int?
    /// How that one was torn.
    package var nestedTear: TearMode?
    /// What went wrong.
    package var message: String

    /// Creates a violation record.
    package init(
        seed: UInt64,
        operation: Int,
        operationDescription: String,
        cut: Int?,
        tear: TearMode?,
        nestedCut: Int?,
        nestedTear: TearMode?,
        message: String
    ) {
        self.seed = seed
        self.operation = operation
        self.operationDescription = operationDescription
        self.cut = cut
        self.tear = tear
        self.nestedCut = nestedCut
        self.nestedTear = nestedTear
        self.message = message
    }

    package var description: String {
        var text = "seed \(seed), operation \(operation) [\(operationDescription)]"
        if let cut, let tear { text += ", cut at mutation \(cut) (\(tear))" }
        if let nestedCut, let nestedTear { text += ", then at mount mutation \(nestedCut) (\(nestedTear))" }
        return text + ": " + message
    }
}

/// The outcome of a power-cut proof run.
package struct ProofReport: Sendable, CustomStringConvertible {
    /// The flash geometry.
    package var geometry: FlashGeometry
    /// "exhaustive" or "random".
    package var mode: String
    /// Operations run (on the main line, without cut).
    package var operations = 0
    /// Operations the store refused (full, worn out): they must not have written anything.
    package var rejectedOperations = 0
    /// Flash mutations made by the operations of the main line.
    package var mutations = 0
    /// (operation, mutation) pairs at which the power was cut.
    package var cutPoints = 0
    /// Cut-and-recover checks: one per cut point and tear mode, plus one per nested cut.
    package var scenarios = 0
    /// Checks where the recovering mount itself was cut.
    package var nestedScenarios = 0
    /// Recoveries that showed the interrupted operation as not done.
    package var rolledBack = 0
    /// Recoveries that showed it done.
    package var rolledForward = 0
    /// Seeds run (random mode).
    package var seeds = 0
    /// Everything that went wrong (at most ``PowerCutProof/maxViolations``).
    package var violations: [ProofViolation] = []

    /// Whether no property was broken.
    package var passed: Bool { violations.isEmpty }

    package var description: String {
        var lines = [
            "power-cut proof (\(mode)) on \(geometry)",
            "  operations: \(operations) (\(rejectedOperations) refused), flash mutations: \(mutations)"
                + (seeds > 0 ? ", seeds: \(seeds)" : ""),
            "  cut points: \(cutPoints), scenarios: \(scenarios) (\(nestedScenarios) with a cut during recovery)",
            "  recovered as not done: \(rolledBack), as done: \(rolledForward)",
            "  violations: \(violations.count)",
        ]
        lines += violations.prefix(20).map { "    - \($0)" }
        return lines.joined(separator: "\n")
    }
}

/// Drives the store through workloads, cuts the power at flash mutations, remounts and checks that:
/// the contents equal the reference model before or after the interrupted operation (so everything
/// acknowledged survives and transactions are all or nothing); the monotonic counter never goes down or
/// repeats; a cut during the recovery recovers to the same contents; the store works after recovery;
/// no NOR rule is broken; and no 16-byte identifying pattern of a dead secret value remains anywhere in
/// the raw image.
package enum PowerCutProof {
    /// Reports stop collecting violations after this many.
    package static let maxViolations = 50

    /// How the recovering mount is itself interrupted.
    package enum NestedCuts: Hashable, Sendable {
        /// Never.
        case none
        /// At every mutation of the mount, with every tear mode.
        case every
        /// At up to `n` mutations of the mount (first, last, and evenly between), one tear mode each.
        case sample(Int)
    }

    /// Cuts the power at every mutation of every operation of a workload, with every tear mode.
    ///
    /// - Parameters:
    ///   - limit: stop after this many cut points (the report says how many were tested).
    ///   - probe: after each recovery, also apply a counter increment and remount, to check that the
    ///     recovered store keeps working without breaking NOR rules.
    package static func exhaustive(
        geometry: FlashGeometry,
        workload: Workload.Kind,
        operations: Int = 100_000,
        seed: UInt64 = 1,
        limit: Int = 10_000,
        tears: [TearMode]? = nil,
        nested: NestedCuts = .sample(2),
        probe: Bool = true,
        progress: (Double) -> Void = { _ in }
    ) -> ProofReport {
        var driver = Driver(geometry: geometry, seed: seed, mode: "exhaustive")
        var workloadGenerator = Workload(workload, geometry: geometry, seed: seed)
        for i in 0..<operations {
            guard driver.report.cutPoints < limit, driver.report.violations.count < maxViolations else { break }
            let operation = driver.materialize(workloadGenerator.next(model: driver.model))
            guard let step = driver.runUncut(operation, index: i) else { continue }
            if step.succeeded && step.mutations > 0 {
                for k in 1...step.mutations {
                    guard driver.report.cutPoints < limit else { break }
                    driver.report.cutPoints += 1
                    progress(Double(driver.report.cutPoints) / Double(max(limit, 1)))
                    let modes = tears ?? TearMode.all(seed: seed &* 1_000_003 &+ UInt64(i) &* 7919 &+ UInt64(k))
                    for tear in modes {
                        _ = driver.scenario(
                            operation,
                            index: i,
                            before: step.before,
                            modelAfter: step.modelAfter,
                            cut: k,
                            tear: tear,
                            nested: nested,
                            probe: probe,
                            nestedChoice: nil
                        )
                    }
                }
            }
            driver.advance(to: step)
        }
        return driver.report
    }

    /// Random workloads with random cut points, tear modes and nested cuts, one run per seed. Each run
    /// starts from a snapshot of a store filled by an uncut warm-up (so full stores are covered too),
    /// then runs `operationsPerSeed` operations, cutting the power during about half of them and
    /// continuing from the recovered store. A violation names its seed; running this again with that seed
    /// alone (same geometry and parameters) replays it.
    package static func random(
        geometry: FlashGeometry,
        seeds: [UInt64],
        operationsPerSeed: Int = 40,
        kinds: [Workload.Kind] = Workload.Kind.allCases,
        warmup: Int = 600,
        progress: (Double) -> Void = { _ in }
    ) -> ProofReport {
        var report = ProofReport(geometry: geometry, mode: "random")
        // Warm snapshots, deterministic: every 50 operations of an uncut run per kind.
        var snapshots: [Workload.Kind: [Driver]] = [:]
        for kind in kinds {
            var driver = Driver(geometry: geometry, seed: 0, mode: "random")
            var generator = Workload(kind, geometry: geometry, seed: 0xC0FFEE)
            var saved = [driver]
            for i in 0..<warmup {
                let operation = driver.materialize(generator.next(model: driver.model))
                if let step = driver.runUncut(operation, index: i) { driver.advance(to: step) }
                if (i + 1) % 50 == 0 { saved.append(driver) }
            }
            report.violations += driver.report.violations
            snapshots[kind] = saved
        }
        for (done, seed) in seeds.enumerated() {
            guard report.violations.count < maxViolations else { break }
            progress(Double(done) / Double(max(seeds.count, 1)))
            var rng = SplitMix64(seed: seed)
            let kind = kinds[Int(rng.next() % UInt64(kinds.count))]
            let saved = snapshots[kind]!
            var driver = saved[Int(rng.next() % UInt64(saved.count))]
            driver.seed = seed
            driver.report = ProofReport(geometry: geometry, mode: "random")
            var generator = Workload(kind, geometry: geometry, seed: seed)
            for i in 0..<operationsPerSeed {
                let operation = driver.materialize(generator.next(model: driver.model))
                guard let step = driver.runUncut(operation, index: i) else { break }
                if step.succeeded && step.mutations > 0 && rng.next() % 2 == 0 {
                    driver.report.cutPoints += 1
                    let k = 1 + Int(rng.next() % UInt64(step.mutations))
                    let tear = TearMode.all(seed: rng.next())[Int(rng.next() % 4)]
                    let nestedChoice =
                        rng.next() % 3 == 0 ? (rng.next(), TearMode.all(seed: rng.next())[Int(rng.next() % 4)]) : nil
                    if let recovered = driver.scenario(
                        operation,
                        index: i,
                        before: step.before,
                        modelAfter: step.modelAfter,
                        cut: k,
                        tear: tear,
                        nested: .none,
                        probe: false,
                        nestedChoice: nestedChoice
                    ) {
                        driver.store = recovered.store
                        driver.model = recovered.model
                        continue
                    }
                    break
                }
                driver.advance(to: step)
            }
            report.seeds += 1
            report.operations += driver.report.operations
            report.rejectedOperations += driver.report.rejectedOperations
            report.mutations += driver.report.mutations
            report.cutPoints += driver.report.cutPoints
            report.scenarios += driver.report.scenarios
            report.nestedScenarios += driver.report.nestedScenarios
            report.rolledBack += driver.report.rolledBack
            report.rolledForward += driver.report.rolledForward
            report.violations += driver.report.violations
        }
        return report
    }
}
