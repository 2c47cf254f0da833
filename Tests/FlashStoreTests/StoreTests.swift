import FlashStore
import FlashStoreTesting
import Testing

typealias Store = FlashKVStore<SimulatedFlash>

func blankStore(_ geometry: FlashGeometry = .tiny) throws -> Store {
    try Store(mounting: SimulatedFlash(geometry: geometry))
}

func secret(_ seed: UInt64, length: Int = 40) -> [UInt8] {
    var rng = SplitMix64(seed: seed)
    return (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
}

func imageContains(_ image: [UInt8], _ needle: [UInt8]) -> Bool {
    guard needle.count <= image.count else { return false }
    var i = 0
    while i + needle.count <= image.count {
        if image[i] == needle[0] && Array(image[i..<i + needle.count]) == needle { return true }
        i += 1
    }
    return false
}

@Suite("Key-value store")
struct StoreTests {
    @Test func insertGetReplaceRemove() throws {
        var store = try blankStore()
        #expect(try store.get(1) == nil)
        try store.insert([1, 2, 3], for: 1)
        try store.insert([], for: 2)
        #expect(try store.get(1) == [1, 2, 3])
        #expect(try store.get(2) == [])
        try store.insert([9], for: 1)
        #expect(try store.get(1) == [9])
        try store.remove(1)
        try store.remove(77)
        #expect(try store.get(1) == nil)
        #expect(store.keys == [2])
        #expect(store.count == 1)
        let remounted = try Store(mounting: store.device)
        #expect(try remounted.entries() == [2: []])
        #expect(remounted.recovery.isClean)
    }

    @Test func transactionAppliesInOrderAndLastUpdateWins() throws {
        var store = try blankStore()
        try store.insert([1], for: 1)
        try store.apply([
            .insert(key: 2, value: [2]), .remove(key: 1), .insert(key: 3, value: [3]), .insert(key: 2, value: [22]),
            .remove(key: 3),
        ])
        #expect(try store.entries() == [2: [22]])
        #expect(try Store(mounting: store.device).entries() == [2: [22]])
    }

    @Test func removedAndReplacedValuesAreWipedFromFlash() throws {
        var store = try blankStore()
        let a = secret(1)
        let b = secret(2)
        let c = secret(3)
        try store.insert(a, for: 1)
        try store.insert(b, for: 2)
        #expect(imageContains(store.device.image, a))
        try store.remove(1)
        try store.insert(c, for: 2)
        #expect(!imageContains(store.device.image, a))
        #expect(!imageContains(store.device.image, b))
        #expect(imageContains(store.device.image, c))
        #expect(try store.get(2) == c)
    }

    @Test func clearRemovesAndWipesEverythingAtomically() throws {
        var store = try blankStore()
        let values = (0..<4).map { secret(UInt64(10 + $0)) }
        for (i, v) in values.enumerated() { try store.insert(v, for: UInt16(i)) }
        try store.clear()
        #expect(store.count == 0)
        for v in values { #expect(!imageContains(store.device.image, v)) }
        #expect(try Store(mounting: store.device).count == 0)
        try store.apply([.insert(key: 5, value: [5])], clearingFirst: true)
        #expect(try store.entries() == [5: [5]])
    }

    @Test func compactionKeepsContentsAndLevelsWear() throws {
        var store = try blankStore()
        let keep = secret(99, length: 100)
        try store.insert(keep, for: 500)
        var model: [UInt16: [UInt8]] = [500: keep]
        for i in 0..<3000 {
            let key = UInt16(i % 5)
            let value = secret(UInt64(i), length: i % 40)
            try store.insert(value, for: key)
            model[key] = value
        }
        #expect(try store.entries() == model)
        let counts = (0..<6).map { store.device.eraseCount(page: $0) }
        #expect(counts.min()! > 20, "compaction ran: \(counts)")
        #expect(counts.max()! - counts.min()! <= 2, "wear levelled: \(counts)")
        #expect(store.lifetime.maxEraseCount == counts.max())
        let remounted = try Store(mounting: store.device)
        #expect(try remounted.entries() == model)
        #expect(remounted.recovery.isClean)
    }

    @Test func fullStoreRefusesWithoutChangingAnythingAndCanApplyIsExact() throws {
        var store = try blankStore()
        var inserted = 0
        var refused = 0
        for i in 0..<200 {
            let updates: [StoreUpdate] = [.insert(key: UInt16(i), value: secret(UInt64(i), length: 30 + i % 50))]
            let predicted = store.canApply(updates)
            let before = store.device
            do {
                try store.apply(updates)
                #expect(predicted == nil)
                inserted += 1
            } catch {
                #expect(error.code == .full)
                #expect(predicted?.code == .full)
                #expect(store.device == before)
                refused += 1
            }
        }
        #expect(inserted > 10 && refused > 0)
        // Removing still works when full, and frees room.
        let keys = store.keys
        try store.remove(keys[0])
        try store.remove(keys[1])
        try store.insert(secret(1000, length: 30), for: 1000)
        #expect(try Store(mounting: store.device).entries() == store.entries())
    }

    @Test func capacityAccounting() throws {
        var store = try blankStore(.nrf52840)
        let empty = store.capacity
        #expect(empty.usedBytes == 0)
        #expect(empty.totalBytes > 19 * 4000 - 200)
        try store.insert(secret(1, length: 300), for: 1)
        #expect(store.capacity.usedBytes == empty.footprint(ofValueLength: 300))
        #expect(store.capacity.freeBytes == empty.totalBytes - empty.footprint(ofValueLength: 300))
        // The estimate is close to what really fits (285 values of 260 bytes, see CapacityTests).
        #expect((270...290).contains(empty.remaining(valueLength: 260)))
    }

    @Test func argumentErrors() throws {
        var store = try blankStore()
        let max = store.maxValueLength
        #expect(max == Store.maxValueLength(for: .tiny))
        #expect(Store.maxValueLength(for: .nrf52840) >= 1024)
        #expect(Store.maxValueLength(for: .stm32l4) >= 1024)
        try store.insert([UInt8](repeating: 7, count: max), for: 1)
        #expect { try store.insert([UInt8](repeating: 7, count: max + 1), for: 2) } throws: {
            ($0 as? StoreError)?.code == .valueTooLarge
        }
        #expect {
            try store.apply([
                .insert(key: 2, value: [UInt8](repeating: 7, count: max / 2 + 8)),
                .insert(key: 3, value: [UInt8](repeating: 7, count: max / 2 + 8)),
            ])
        } throws: {
            ($0 as? StoreError)?.code == .transactionTooLarge
        }
        #expect(try store.get(1)?.count == max)
    }

    @Test func unsupportedGeometryIsATypedError() {
        let oneShot = FlashGeometry(
            wordSize: 4,
            pageSize: 1024,
            pageCount: 4,
            maxProgramsPerWord: 1,
            eraseEndurance: 100
        )
        #expect { _ = try Store(mounting: SimulatedFlash(geometry: oneShot)) } throws: {
            ($0 as? StoreError)?.code == .unsupportedGeometry
        }
    }

    @Test func stm32UsesZeroOverwritesOnly() throws {
        var store = try blankStore(.stm32l4(pages: 4))
        for i in 0..<400 {
            try store.apply([
                .insert(key: UInt16(i % 3), value: secret(UInt64(i), length: 50 + i % 100)), .remove(key: 9),
            ])
        }
        #expect(store.count == 3)
        #expect(try Store(mounting: store.device).entries() == store.entries())
    }

    @Test func endOfLifeIsReportedAndDataStaysReadable() throws {
        var store = try blankStore(.tiny(pages: 4, endurance: 6))
        try store.insert(secret(5, length: 50), for: 1)
        var updates = 0
        var failure: StoreError?
        while updates < 10_000 {
            do {
                try store.insert(UInt32(updates).bytes, for: 2)
                updates += 1
            } catch {
                failure = error
                break
            }
        }
        #expect(failure?.code == .wornOut)
        #expect(store.lifetime.isWornOut)
        #expect(updates > 50)
        #expect(try store.get(1) == secret(5, length: 50))
        #expect(try store.get(2) == UInt32(updates - 1).bytes)
        let remounted = try Store(mounting: store.device)
        #expect(try remounted.get(2) == UInt32(updates - 1).bytes)
        for page in 0..<4 { #expect(store.device.eraseCount(page: page) <= 6) }
    }

    @Test func formatErasesAnythingAndKeepsEraseCounts() throws {
        var store = try blankStore()
        for i in 0..<300 { try store.insert(UInt32(i).bytes, for: 1) }
        let counts = store.lifetime.maxEraseCount
        let formatted = try Store.format(store.device)
        #expect(formatted.count == 0)
        #expect(formatted.lifetime.maxEraseCount >= counts)
    }

    @Test func aCutMakesTheStoreStaleAndMountRepairsOnce() throws {
        var store = try blankStore()
        try store.insert(secret(1), for: 1)
        store.withDevice { $0.armPowerCut(atMutation: 1, tear: .prefix) }
        #expect { try store.insert(secret(2, length: 100), for: 2) } throws: {
            ($0 as? StoreError)?.code == .powerCut
        }
        #expect { _ = try store.get(1) } throws: { ($0 as? StoreError)?.code == .needsRemount }
        var device = store.device
        device.repower()
        let first = try Store(mounting: device)
        #expect(first.recovery.rolledBackRecords == 1)
        #expect(try first.entries() == [1: secret(1)])
        #expect(!imageContains(first.device.image, Array(secret(2, length: 100)[0..<16])))
        let second = try Store(mounting: first.device)
        #expect(second.recovery.isClean)
    }

    @Test func pageSummariesDescribeTheLog() throws {
        var store = try blankStore()
        try store.insert([1, 2, 3], for: 1)
        let summaries = store.pageSummaries
        #expect(summaries.count == 6)
        #expect(summaries.filter(\.isTail).count == 1)
        #expect(summaries.filter { if case .log = $0.role { true } else { false } }.count == 1)
    }
}

extension UInt32 {
    var bytes: [UInt8] {
        [
            UInt8(truncatingIfNeeded: self), UInt8(truncatingIfNeeded: self >> 8),
            UInt8(truncatingIfNeeded: self >> 16), UInt8(truncatingIfNeeded: self >> 24),
        ]
    }
}
