import FlashStore
import Testing

@Suite("Garbage images")
struct GarbageImageTests {
    func random(_ count: Int, seed: UInt64) -> [UInt8] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    }

    /// Mounting never traps; a mounted store keeps working and remounts to the same contents.
    func mountAndExercise(_ image: [UInt8], _ geometry: FlashGeometry) -> StoreError.Code? {
        let flash = SimulatedFlash(geometry: geometry, image: image, policy: .record)
        do {
            var store = try Store(mounting: flash)
            _ = try readable(store)
            do {
                try store.insert([1, 2, 3, 4, 5], for: 4242)
                #expect(try store.get(4242) == [1, 2, 3, 4, 5])
            } catch {
                #expect(error.code == .full || error.code == .wornOut)
            }
            let again = try Store(mounting: store.device)
            #expect(try readable(again) == readable(store))
            #expect(
                store.device.violations.isEmpty,
                "\(store.device.violations.first.map(String.init(describing:)) ?? "")"
            )
            return nil
        } catch {
            return error.code
        }
    }

    /// Every value that can be read; a value that fails its check must be one the mount reported.
    func readable(_ store: Store) throws(StoreError) -> [UInt16: [UInt8]] {
        var values: [UInt16: [UInt8]] = [:]
        for key in store.keys {
            do throws(StoreError) {
                values[key] = try store.get(key)
            } catch {
                guard error.code == .damaged else { throw error }
                #expect(store.recovery.damagedKeys.contains(key), "key \(key) refused but not reported")
            }
        }
        return values
    }

    @Test(arguments: 0..<40 as Range<UInt64>)
    func randomBytesAreRefusedOrRecovered(seed: UInt64) {
        let geometry = seed % 2 == 0 ? FlashGeometry.tiny : .stm32l4(pages: 3)
        let code = mountAndExercise(random(geometry.totalSize, seed: seed), geometry)
        #expect(code == nil || code == .unrecognizedImage)
    }

    @Test func zerosAreRefused() {
        #expect(mountAndExercise([UInt8](repeating: 0, count: 1536), .tiny) == .unrecognizedImage)
    }

    @Test func partlyWrittenImages() {
        // Random bytes in the first pages only, the rest blank (like a truncated copy padded with 0xFF).
        for pages in 1...5 {
            let image = random(256 * pages, seed: UInt64(pages)) + [UInt8](repeating: 0xFF, count: 256 * (6 - pages))
            let code = mountAndExercise(image, .tiny)
            #expect(code == nil || code == .unrecognizedImage)
        }
    }

    @Test(arguments: 0..<30 as Range<UInt64>)
    func validHeadersWithRandomPages(seed: UInt64) throws {
        var store = try blankStore()
        for i in 0..<40 { try store.insert(secret(UInt64(i), length: 20 + i), for: UInt16(i % 7)) }
        var image = store.device.image
        var rng = SplitMix64(seed: seed)
        // Randomize the body of some pages, keeping their headers.
        for page in 0..<6 where rng.next() % 2 == 0 {
            for i in page * 256 + 16..<(page + 1) * 256 { image[i] = UInt8(truncatingIfNeeded: rng.next()) }
        }
        // And flip a few random bytes anywhere.
        for _ in 0..<8 { image[Int(rng.next() % UInt64(image.count))] = UInt8(truncatingIfNeeded: rng.next()) }
        #expect(mountAndExercise(image, .tiny) == nil)
    }

    @Test(arguments: 0..<30 as Range<UInt64>)
    func bitFlipsInAValidImage(seed: UInt64) throws {
        var store = try blankStore()
        for i in 0..<60 {
            try store.apply([
                .insert(key: UInt16(i % 9), value: secret(UInt64(i), length: i % 60)),
                .remove(key: UInt16((i + 3) % 9)),
            ])
        }
        var image = store.device.image
        var rng = SplitMix64(seed: seed)
        for _ in 0..<(1 + seed % 20) {
            let bit = Int(rng.next() % UInt64(image.count * 8))
            image[bit / 8] ^= 1 << UInt8(bit % 8)
        }
        #expect(mountAndExercise(image, .tiny) == nil)
    }

    @Test func formatTurnsGarbageIntoAnEmptyStore() throws {
        let flash = SimulatedFlash(geometry: .tiny, image: random(1536, seed: 5))
        var store = try Store.format(flash)
        #expect(store.count == 0)
        try store.insert([1], for: 1)
        #expect(try Store(mounting: store.device).entries() == [1: [1]])
    }
}
