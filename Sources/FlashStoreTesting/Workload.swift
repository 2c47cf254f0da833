package import FlashStore

/// One step of a workload, before the driver fills in the counter.
package struct WorkloadOperation: Hashable, Sendable, CustomStringConvertible {
    /// The updates, in order.
    package var updates: [StoreUpdate]
    /// Whether every key is removed first (authenticatorReset).
    package var clearingFirst: Bool
    /// Whether the driver adds an increment of the monotonic counter to the same transaction.
    package var bumpsCounter: Bool

    /// Creates an operation.
    package init(updates: [StoreUpdate], clearingFirst: Bool = false, bumpsCounter: Bool = true) {
        self.updates = updates
        self.clearingFirst = clearingFirst
        self.bumpsCounter = bumpsCounter
    }

    package var description: String {
        let parts = updates.map { u -> String in
            switch u {
            case .insert(let key, let value): "insert \(key) (\(value.count) B)"
            case .remove(let key): "remove \(key)"
            }
        }
        let all = (clearingFirst ? ["clear"] : []) + parts + (bumpsCounter ? ["counter+1"] : [])
        return all.isEmpty ? "nothing" : all.joined(separator: ", ")
    }
}

/// A deterministic generator of store operations: the same kind, seed and model give the same operations.
package struct Workload: Sendable {
    /// The mix of operations.
    package enum Kind: String, Hashable, Sendable, CaseIterable {
        /// Credential-sized secret values inserted until the store is full (insertions outnumber
        /// deletions), a counter updated by every operation, deletions, replacements in multi-update
        /// transactions, and a rare clear (0.2% of operations).
        case credentials
        /// A few credentials, then counter updates only (the signature-counter lifetime pattern).
        case counter
        /// Random keys from a small set, random lengths up to the maximum, random transactions.
        case random
        /// Fills the store until an insert is refused, then writes one record of every kind on the full store
        /// (replacements of the same, a larger and a smaller size, removals of one and four keys, a mixed
        /// transaction, a clear now and then) and fills it again: every kind of write, cut with the store at its
        /// last free page.
        case full
    }

    /// The mix of operations.
    package var kind: Kind
    /// Length of the credential values (clamped to what the geometry allows).
    package var valueLengths: ClosedRange<Int>
    /// Largest value the store accepts.
    package let maxValueLength: Int
    private var rng: SplitMix64
    private var generated = 0
    private var nextKey: UInt16 = 1
    /// `.full`: filling (until the model stops growing), or writing one of each kind (`phase`).
    private var filling = true
    private var lastCount = -1
    private var phase = 0

    /// The key of the monotonic counter.
    package static let counterKey: UInt16 = 0xFFF0
    /// Every secret value starts with these 4 bytes, then 12 random bytes that identify it.
    package static let secretMagic: [UInt8] = [0x53, 0x65, 0x43, 0x72]

    /// A workload of `kind` for a store on `geometry`, drawn from `seed`.
    package init(_ kind: Kind, geometry: FlashGeometry, seed: UInt64, valueLengths: ClosedRange<Int> = 200...300) {
        self.kind = kind
        maxValueLength = FlashKVStore<SimulatedFlash>.maxValueLength(for: geometry)
        let high = min(valueLengths.upperBound, maxValueLength - 40)
        let low = min(valueLengths.lowerBound, max(16, high * 2 / 3))
        self.valueLengths = max(16, low)...max(16, high)
        rng = SplitMix64(seed: seed)
    }

    /// A secret value: the magic, 12 random bytes, then random filler up to `length` (at least 16).
    package mutating func secret(length: Int) -> [UInt8] {
        var value = Self.secretMagic
        while value.count < max(16, length) { value.append(UInt8(truncatingIfNeeded: rng.next())) }
        return value
    }

    private mutating func chance(_ percent: UInt64) -> Bool { rng.next() % 100 < percent }

    private mutating func pick(_ keys: [UInt16]) -> UInt16? {
        keys.isEmpty ? nil : keys[Int(rng.next() % UInt64(keys.count))]
    }

    private mutating func length() -> Int {
        valueLengths.lowerBound + Int(rng.next() % UInt64(valueLengths.count))
    }

    private mutating func freshKey() -> UInt16 {
        defer { nextKey = nextKey % 0xFF00 + 1 }
        return nextKey
    }

    /// The next operation, given what the store holds now.
    package mutating func next(model: ReferenceModel) -> WorkloadOperation {
        generated += 1
        let present = model.entries.keys.filter { $0 != Self.counterKey }.sorted()
        switch kind {
        case .credentials:
            let roll = rng.next() % 1000
            if roll < 300 { return WorkloadOperation(updates: []) }
            if roll < 620 {
                return WorkloadOperation(updates: [.insert(key: freshKey(), value: secret(length: length()))])
            }
            if roll < 700, let key = pick(present) { return WorkloadOperation(updates: [.remove(key: key)]) }
            if roll < 800, let key = pick(present) {
                var updates: [StoreUpdate] = [.insert(key: key, value: secret(length: length()))]
                if let other = pick(present), other != key { updates.append(.remove(key: other)) }
                return WorkloadOperation(updates: updates)
            }
            if roll < 880 {
                let small = max(16, valueLengths.lowerBound / 3)
                var updates: [StoreUpdate] = [.insert(key: freshKey(), value: secret(length: small))]
                if let key = pick(present) { updates.append(.insert(key: key, value: secret(length: small))) }
                if let key = pick(present) { updates.append(.remove(key: key)) }
                return WorkloadOperation(updates: updates)
            }
            if roll < 882 { return WorkloadOperation(updates: [], clearingFirst: true) }
            if roll < 900 { return WorkloadOperation(updates: [.remove(key: 0xFEFE)]) }
            return WorkloadOperation(updates: [])
        case .counter:
            if generated <= 4 {
                return WorkloadOperation(updates: [.insert(key: freshKey(), value: secret(length: length()))])
            }
            return WorkloadOperation(updates: [])
        case .full:
            if filling {
                if present.count > lastCount {
                    lastCount = present.count
                    return WorkloadOperation(
                        updates: [.insert(key: freshKey(), value: secret(length: length()))],
                        bumpsCounter: false
                    )
                }
                filling = false  // the last insert was refused: the store is full
            }
            phase += 1
            guard let first = present.first, let last = present.last else {
                filling = true
                lastCount = -1
                return WorkloadOperation(updates: [])
            }
            let size = model.entries[first]?.count ?? 16
            switch phase % 8 {
            case 1: return WorkloadOperation(updates: [.insert(key: first, value: secret(length: size))])
            case 2: return WorkloadOperation(updates: [.insert(key: last, value: secret(length: size + 24))])
            case 3:
                return WorkloadOperation(updates: [
                    .insert(key: first, value: secret(length: max(16, size / 2))), .remove(key: last),
                ])
            case 4: return WorkloadOperation(updates: [.remove(key: first)], bumpsCounter: false)
            case 5: return WorkloadOperation(updates: present.suffix(4).map { .remove(key: $0) }, bumpsCounter: false)
            case 6:
                return WorkloadOperation(updates: [
                    .insert(key: freshKey(), value: secret(length: 16)), .remove(key: first),
                    .insert(key: last, value: secret(length: 16)),
                ])
            case 7 where phase % 24 == 23:
                filling = true
                lastCount = -1
                return WorkloadOperation(updates: [], clearingFirst: true)
            default:
                filling = true
                lastCount = present.count
                return WorkloadOperation(updates: [.insert(key: freshKey(), value: secret(length: length()))])
            }
        case .random:
            let keys: [UInt16] = Array(1...12)
            if chance(3) { return WorkloadOperation(updates: [], clearingFirst: true, bumpsCounter: chance(50)) }
            var updates: [StoreUpdate] = []
            for _ in 0..<(1 + Int(rng.next() % 3)) {
                let key = keys[Int(rng.next() % UInt64(keys.count))]
                if chance(30) {
                    updates.append(.remove(key: key))
                } else {
                    let cap = min(maxValueLength / 3, 400)
                    updates.append(.insert(key: key, value: secret(length: Int(rng.next() % UInt64(cap + 1)))))
                }
            }
            return WorkloadOperation(updates: updates, bumpsCounter: chance(60))
        }
    }
}
