import FlashStore

typealias ProofStore = FlashKVStore<SimulatedFlash>

/// The 12 identifying bytes that follow ``Workload/secretMagic`` in a secret value.
struct SecretTag: Hashable {
    var high: UInt64
    var low: UInt32

    init(_ bytes: [UInt8], at offset: Int) {
        var h: UInt64 = 0
        for i in 0..<8 { h = h << 8 | UInt64(bytes[offset + i]) }
        var l: UInt32 = 0
        for i in 8..<12 { l = l << 8 | UInt32(bytes[offset + i]) }
        high = h
        low = l
    }

    /// The tag of `value` when it is a secret.
    static func of(_ value: [UInt8]) -> SecretTag? {
        guard value.count >= 16, Array(value[0..<4]) == Workload.secretMagic else { return nil }
        return SecretTag(value, at: 4)
    }
}

/// A store, its model and the bookkeeping of a proof run.
struct Driver {
    struct Operation {
        var updates: [StoreUpdate]
        var clearingFirst: Bool
        var description: String
    }

    struct Step {
        var before: ProofStore
        var after: ProofStore
        var modelAfter: ReferenceModel
        var succeeded: Bool
        var mutations: Int
    }

    var store: ProofStore
    var model = ReferenceModel()
    var seed: UInt64
    var report: ProofReport
    /// Every secret ever handed to the store, acknowledged or not.
    var secrets: Set<SecretTag> = []

    init(geometry: FlashGeometry, seed: UInt64, mode: String) {
        do {
            store = try ProofStore(mounting: SimulatedFlash(geometry: geometry, policy: .record))
        } catch {
            preconditionFailure("cannot run a proof on \(geometry): \(error)")
        }
        self.seed = seed
        report = ProofReport(geometry: geometry, mode: mode)
    }

    static func counter(_ entries: [UInt16: [UInt8]]) -> UInt32 {
        guard let bytes = entries[Workload.counterKey], bytes.count == 4 else { return 0 }
        return bytes.readLE32()
    }

    /// Adds the counter increment the operation asks for.
    func materialize(_ operation: WorkloadOperation) -> Operation {
        var updates = operation.updates
        if operation.bumpsCounter {
            let next = Self.counter(model.entries) + 1
            updates.append(.insert(key: Workload.counterKey, value: next.littleEndianArray))
        }
        return Operation(
            updates: updates,
            clearingFirst: operation.clearingFirst,
            description: operation.description
        )
    }

    mutating func fail(
        _ message: String,
        _ operation: Operation,
        index: Int,
        cut: Int? = nil,
        tear: TearMode? = nil,
        nestedCut: Int? = nil,
        nestedTear: TearMode? = nil
    ) {
        guard report.violations.count < PowerCutProof.maxViolations else { return }
        report.violations.append(
            ProofViolation(
                seed: seed,
                operation: index,
                operationDescription: operation.description,
                cut: cut,
                tear: tear,
                nestedCut: nestedCut,
                nestedTear: nestedTear,
                message: message
            )
        )
    }

    /// Runs `operation` without cut on a copy of the store and checks it against the model.
    mutating func runUncut(_ operation: Operation, index: Int) -> Step? {
        for case .insert(_, let value) in operation.updates {
            if let tag = SecretTag.of(value) { secrets.insert(tag) }
        }
        var after = store
        let m0 = after.device.mutationCount
        let v0 = after.device.violations.count
        var succeeded = true
        do {
            try after.apply(operation.updates, clearingFirst: operation.clearingFirst)
        } catch {
            guard [.full, .wornOut, .transactionTooLarge, .valueTooLarge].contains(error.code) else {
                fail("unexpected error without cut: \(error)", operation, index: index)
                return nil
            }
            succeeded = false
            report.rejectedOperations += 1
        }
        let mutations = after.device.mutationCount - m0
        report.operations += 1
        report.mutations += mutations
        if !succeeded && mutations != 0 {
            fail("a refused operation made \(mutations) flash mutations", operation, index: index)
        }
        if after.device.violations.count > v0 {
            fail("NOR violation: \(after.device.violations[v0])", operation, index: index)
        }
        let modelAfter = succeeded ? model.applying(operation.updates, clearingFirst: operation.clearingFirst) : model
        if let problem = difference(after, modelAfter) {
            fail("contents after the operation differ from the model: \(problem)", operation, index: index)
            return nil
        }
        return Step(before: store, after: after, modelAfter: modelAfter, succeeded: succeeded, mutations: mutations)
    }

    mutating func advance(to step: Step) {
        store = step.after
        model = step.modelAfter
    }

    /// Cuts the power at mutation `cut` of `operation`, remounts (also with cuts during the mount) and checks
    /// everything. Returns the recovered store and the model it matches, or `nil` on a violation.
    mutating func scenario(
        _ operation: Operation,
        index: Int,
        before: ProofStore,
        modelAfter: ReferenceModel,
        cut: Int,
        tear: TearMode,
        nested: PowerCutProof.NestedCuts,
        probe: Bool,
        nestedChoice: (UInt64, TearMode)?
    ) -> (store: ProofStore, model: ReferenceModel)? {
        report.scenarios += 1
        var interrupted = before
        interrupted.withDevice { $0.armPowerCut(atMutation: cut, tear: tear) }
        do {
            try interrupted.apply(operation.updates, clearingFirst: operation.clearingFirst)
            fail("the operation completed although the power was cut", operation, index: index, cut: cut, tear: tear)
            return nil
        } catch {
            guard error.code == .powerCut else {
                fail("expected a power cut, got \(error)", operation, index: index, cut: cut, tear: tear)
                return nil
            }
        }
        var base = interrupted.device
        base.repower()
        var device = base
        let m0 = device.mutationCount
        let recovered: ProofStore
        do {
            recovered = try ProofStore.mount(&device)
        } catch {
            fail("mount after the cut failed: \(error)", operation, index: index, cut: cut, tear: tear)
            return nil
        }
        let mountMutations = device.mutationCount - m0
        let modelBefore = model
        guard let matched = check(recovered, before: modelBefore, after: modelAfter, baseline: before) else {
            fail(lastProblem, operation, index: index, cut: cut, tear: tear)
            return nil
        }
        if matched == modelAfter && modelAfter != modelBefore {
            report.rolledForward += 1
        } else {
            report.rolledBack += 1
        }

        // Cuts during the recovery itself.
        var nestedCuts: [(Int, TearMode)] = []
        if mountMutations > 0 {
            switch nested {
            case .none:
                break
            case .every:
                for j in 1...mountMutations {
                    nestedCuts += TearMode.all(seed: UInt64(j) &* 31 &+ UInt64(cut)).map { (j, $0) }
                }
            case .sample(let n):
                var positions: [Int] = []
                for i in 0..<min(n, mountMutations) {
                    let j = n == 1 ? 1 : 1 + (mountMutations - 1) * i / max(1, n - 1)
                    if !positions.contains(j) { positions.append(j) }
                }
                let modes = TearMode.all(seed: UInt64(cut) &* 131 &+ UInt64(index))
                nestedCuts = positions.enumerated().map { ($0.element, modes[($0.offset + cut + index) % 4]) }
            }
            if let (r, mode) = nestedChoice { nestedCuts.append((1 + Int(r % UInt64(mountMutations)), mode)) }
        }
        var result = (store: recovered, model: matched)
        for (j, nestedTear) in nestedCuts {
            report.scenarios += 1
            report.nestedScenarios += 1
            var again = base
            again.armPowerCut(atMutation: j, tear: nestedTear)
            do {
                _ = try ProofStore.mount(&again)
                fail(
                    "the mount completed although the power was cut",
                    operation,
                    index: index,
                    cut: cut,
                    tear: tear,
                    nestedCut: j,
                    nestedTear: nestedTear
                )
                return nil
            } catch {
                guard error.code == .powerCut else {
                    fail(
                        "expected a power cut during the mount, got \(error)",
                        operation,
                        index: index,
                        cut: cut,
                        tear: tear,
                        nestedCut: j,
                        nestedTear: nestedTear
                    )
                    return nil
                }
            }
            again.repower()
            do {
                let second = try ProofStore.mount(&again)
                guard let secondMatch = check(second, before: modelBefore, after: modelAfter, baseline: before) else {
                    fail(
                        lastProblem,
                        operation,
                        index: index,
                        cut: cut,
                        tear: tear,
                        nestedCut: j,
                        nestedTear: nestedTear
                    )
                    return nil
                }
                if secondMatch != matched {
                    fail(
                        "a cut during recovery changed the recovered contents",
                        operation,
                        index: index,
                        cut: cut,
                        tear: tear,
                        nestedCut: j,
                        nestedTear: nestedTear
                    )
                    return nil
                }
                result = (second, secondMatch)
            } catch {
                fail(
                    "mount after a cut during recovery failed: \(error)",
                    operation,
                    index: index,
                    cut: cut,
                    tear: tear,
                    nestedCut: j,
                    nestedTear: nestedTear
                )
                return nil
            }
        }

        if probe {
            var probed = recovered
            let next = Self.counter(matched.entries) + 1
            let bump: [StoreUpdate] = [.insert(key: Workload.counterKey, value: next.littleEndianArray)]
            var expected = matched
            do {
                try probed.apply(bump)
                expected.apply(bump)
            } catch {
                if error.code != .full && error.code != .wornOut {
                    fail("the recovered store failed to write: \(error)", operation, index: index, cut: cut, tear: tear)
                    return nil
                }
            }
            do {
                let remounted = try ProofStore(mounting: probed.device)
                if let problem = difference(remounted, expected) ?? norProblem(remounted, baseline: before) {
                    fail("after recovery and one more write: \(problem)", operation, index: index, cut: cut, tear: tear)
                    return nil
                }
            } catch {
                fail(
                    "remount after recovery and one more write failed: \(error)",
                    operation,
                    index: index,
                    cut: cut,
                    tear: tear
                )
                return nil
            }
        }
        return result
    }

    var lastProblem = ""

    /// Checks a recovered store; returns the model it matches.
    mutating func check(
        _ recovered: ProofStore,
        before: ReferenceModel,
        after: ReferenceModel,
        baseline: ProofStore
    ) -> ReferenceModel? {
        let contents: [UInt16: [UInt8]]
        do {
            contents = try recovered.entries()
        } catch {
            lastProblem = "reading the recovered store failed: \(error)"
            return nil
        }
        let matched: ReferenceModel
        if contents == after.entries {
            matched = after
        } else if contents == before.entries {
            matched = before
        } else {
            lastProblem =
                "recovered contents match neither before nor after: "
                + (describeDifference(contents, before.entries) ?? "")
            return nil
        }
        let counter = Self.counter(contents)
        let acknowledged = Self.counter(before.entries)
        let cleared = after.entries[Workload.counterKey] == nil && before.entries[Workload.counterKey] != nil
        if counter < acknowledged && !cleared {
            lastProblem = "counter went down from \(acknowledged) to \(counter)"
            return nil
        }
        if let problem = norProblem(recovered, baseline: baseline) {
            lastProblem = problem
            return nil
        }
        // The reserve: recovery leaves the free page that finishing a compaction needs, and any removal of up to
        // 4 keys fits (what the authenticator's own clean-up at mount writes).
        if recovered.retiredPageCount == 0 {
            if recovered.freePageCount < 1 {
                lastProblem = "recovery left no free page:\n" + recovered.layoutDescription
                return nil
            }
            let removal = contents.keys.sorted().suffix(4).map { StoreUpdate.remove(key: $0) }
            if let refusal = recovered.canApply(removal) {
                lastProblem =
                    "a removal of \(removal.count) keys does not fit after recovery: \(refusal)\n"
                    + recovered.layoutDescription
                return nil
            }
        }
        var live: Set<SecretTag> = []
        for value in contents.values { if let tag = SecretTag.of(value) { live.insert(tag) } }
        let image = recovered.device.image
        var offset = 0
        while offset + 16 <= image.count {
            if image[offset] == 0x53 && image[offset + 1] == 0x65 && image[offset + 2] == 0x43
                && image[offset + 3] == 0x72
            {
                let tag = SecretTag(image, at: offset + 4)
                if secrets.contains(tag) && !live.contains(tag) {
                    lastProblem = "a dead secret is still in the raw image at offset \(offset)"
                    return nil
                }
            }
            offset += 4
        }
        return matched
    }

    func norProblem(_ store: ProofStore, baseline: ProofStore) -> String? {
        let v0 = baseline.device.violations.count
        guard store.device.violations.count > v0 else { return nil }
        return "NOR violation: \(store.device.violations[v0])"
    }

    func difference(_ store: ProofStore, _ model: ReferenceModel) -> String? {
        do {
            return describeDifference(try store.entries(), model.entries)
        } catch {
            return "reading failed: \(error)"
        }
    }

    func describeDifference(_ found: [UInt16: [UInt8]], _ expected: [UInt16: [UInt8]]) -> String? {
        guard found != expected else { return nil }
        let missing = expected.keys.filter { found[$0] == nil }.sorted()
        let extra = found.keys.filter { expected[$0] == nil }.sorted()
        let changed = expected.keys.filter { found[$0] != nil && found[$0] != expected[$0] }.sorted()
        return
            "missing keys \(missing.prefix(8)), unexpected keys \(extra.prefix(8)), different values \(changed.prefix(8))"
    }
}

extension [UInt8] {
    func readLE32() -> UInt32 {
        UInt32(self[0]) | UInt32(self[1]) << 8 | UInt32(self[2]) << 16 | UInt32(self[3]) << 24
    }
}

extension UInt32 {
    var littleEndianArray: [UInt8] {
        [
            UInt8(truncatingIfNeeded: self), UInt8(truncatingIfNeeded: self >> 8),
            UInt8(truncatingIfNeeded: self >> 16), UInt8(truncatingIfNeeded: self >> 24),
        ]
    }
}
