// libFuzzer target: the flash store mounting an arbitrary image of the tiny geometry, then running fuzzed
// operations with fuzzed power cuts and remounts. Compiled together with Sources/FlashStore. Mounting must
// never trap or hang; the store must never break a NOR rule (strict mode traps); what a completed operation
// wrote must read back.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFlashStore(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let geometry = FlashGeometry.tiny
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var image = Array(bytes.prefix(geometry.totalSize))
    image += Array(repeating: 0xFF, count: geometry.totalSize - image.count)
    var ops = bytes.dropFirst(geometry.totalSize)[...]
    var device = SimulatedFlash(
        geometry: geometry,
        image: image,
        eraseCounts: Array(repeating: 0, count: geometry.pageCount)
    )
    guard var store = try? FlashKVStore.mount(&device) else { return 0 }
    var expected: [UInt16: [UInt8]] = [:]
    for (key, value) in (try? store.entries()) ?? [:] { expected[key] = value }
    // Each cut remounts the whole image: an input of thousands of cuts took 0.6 s and, on a loaded machine, hit
    // libFuzzer's 10 s timeout. Past 64 cuts an input's cut operations are skipped (coverage does not grow with more).
    var cutsLeft = 64
    while let op = ops.first {
        ops = ops.dropFirst()
        let key = UInt16(op & 0x0F)
        switch op >> 4 {
        case 0..<8:
            let value = Array(repeating: op, count: Int(op) % 150)
            if (try? store.insert(value, for: key)) != nil { expected[key] = value }
        case 8..<11:
            if (try? store.remove(key)) != nil { expected[key] = nil }
        case 11:
            if (try? store.clear()) != nil { expected = [:] }
        case 12..<15 where cutsLeft == 0:
            continue
        case 12..<15:
            cutsLeft -= 1
            // Cut the power at the next few mutations, then remount: the result is checked loosely (before or
            // after the interrupted operation), so only the keys not touched must be intact.
            var cutDevice = store.device
            cutDevice.armPowerCut(atMutation: Int(op & 0x07) + 1, tear: .randomBits(seed: UInt64(op)))
            var cutStore = store
            cutStore.device = cutDevice
            let attempted = (try? cutStore.insert([op], for: key)) != nil
            var recovered = cutStore.device
            recovered.repower()
            guard let mounted = try? FlashKVStore.mount(&recovered) else { return 0 }
            store = mounted
            for (k, v) in expected where k != key {
                precondition((try? store.get(k)) == v, "key \(k) changed after a cut of another key's write")
            }
            let now = try? store.get(key)
            if attempted { precondition(now == [op], "an acknowledged write was lost") }
            expected[key] = now ?? nil
        default:
            for (k, v) in expected {
                precondition((try? store.get(k)) == v, "key \(k) does not read back")
            }
        }
    }
    return 0
}
