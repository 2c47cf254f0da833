import FlashStore
import FlashStoreTesting
import Testing

/// Inserts values of `length` bytes under fresh keys (plus a counter update every 10 inserts) until full.
func fillCount(_ geometry: FlashGeometry, length: Int) throws -> (count: Int, store: Store) {
    var store = try blankStore(geometry)
    try store.insert([0, 0, 0, 0], for: 0xFFF0)
    var count = 0
    while true {
        do {
            try store.insert(secret(UInt64(count), length: length), for: UInt16(count))
        } catch {
            #expect(error.code == .full)
            break
        }
        count += 1
        if count % 10 == 0 { try store.insert(UInt32(count).bytes, for: 0xFFF0) }
    }
    return (count, store)
}

@Suite("Capacity and lifetime")
struct CapacityTests {
    @Test func credentialsOnNRF52840() throws {
        let (count300, _) = try fillCount(.nrf52840, length: 300)
        let (count260, store) = try fillCount(.nrf52840, length: 260)
        print("nrf52840(20 pages): \(count300) values of 300 B, \(count260) of 260 B")
        #expect(count300 >= 150)
        #expect(count260 >= 150)
        // Still usable when full: the counter can be updated and a credential removed.
        var full = store
        try full.insert([1, 2, 3, 4], for: 0xFFF0)
        try full.remove(0)
        #expect(store.capacity.remaining(valueLength: 260) <= 2)
    }

    @Test func credentialsOnLarge() throws {
        let (count, _) = try fillCount(.large, length: 260)
        print("large (4 MiB): \(count) values of 260 B")
        #expect(count >= 10_000)
    }

    @Test func credentialsOnSTM32L4() throws {
        let (count, _) = try fillCount(.stm32l4, length: 260)
        print("stm32l4(32 pages): \(count) values of 260 B")
        #expect(count >= 150)
    }

    /// 150 credentials stored, then counter updates: measures erases per update and projects the lifetime.
    @Test func counterLifetimeProjection() throws {
        var store = try blankStore(.nrf52840)
        for i in 0..<150 { try store.insert(secret(UInt64(i), length: 260), for: UInt16(i)) }
        let updates = 20_000
        let start = (0..<20).map { store.device.eraseCount(page: $0) }.reduce(0, +)
        for i in 0..<updates { try store.insert(UInt32(i).bytes, for: 0xFFF0) }
        let erases = (0..<20).map { store.device.eraseCount(page: $0) }.reduce(0, +) - start
        let perPage = Double(erases) / 20 / Double(updates)
        let projected = Double(20 * 10_000) / Double(erases) * Double(updates)
        print(
            "nrf52840 with 150 credentials: \(erases) erases for \(updates) counter updates; "
                + "\(perPage * 2_000_000) erases/page for 2M updates; lifetime ≈ \(Int(projected)) updates"
        )
        #expect(projected >= 2_000_000)
    }
}
