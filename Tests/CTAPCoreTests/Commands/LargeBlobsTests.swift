import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import FlashStore
import Testing

/// authenticatorLargeBlobs (0x0C, CTAP 2.1 §6.10).
@Suite struct LargeBlobsTests {
    static let emptyArray: [UInt8] = [
        0x80, 0x76, 0xBE, 0x8B, 0x52, 0x8D, 0x00, 0x75, 0xF7, 0xAA, 0xE9, 0x8D, 0x6F, 0xA5, 0x7A, 0x6D, 0x3C,
    ]

    /// A serialized array of `count` bytes of CBOR array content with its checksum.
    static func array(filler count: Int) -> [UInt8] {
        let body = CBORValue.array([.byteString([UInt8](repeating: 0x5A, count: count))]).encoded()
        return body + Array(SHA256.hash(data: body).prefix(16))
    }

    /// Reads the whole array with gets of `fragment` bytes.
    func read(_ harness: inout Harness, fragment: Int = 1000) throws -> [UInt8] {
        var out: [UInt8] = []
        while true {
            let chunk = try #require(
                try responseMap(harness.cbor(.largeBlobs, [1: CBORValue(fragment), 3: CBORValue(out.count)]))[1]?
                    .bytesValue
            )
            out += chunk
            if chunk.count < fragment { return out }
        }
    }

    /// Writes `array` in fragments, signing each with `token` when given.
    func write(
        _ harness: inout Harness,
        _ array: [UInt8],
        fragment: Int = 1000,
        token: PlatformToken? = nil
    ) -> [CTAPStatus?] {
        var results: [CTAPStatus?] = []
        for offset in stride(from: 0, to: array.count, by: fragment) {
            let piece = Array(array[offset..<min(array.count, offset + fragment)])
            var params: [CBORValue: CBORValue] = [2: .byteString(piece), 3: CBORValue(offset)]
            if offset == 0 { params[4] = CBORValue(array.count) }
            if let token {
                let offsetLE = (0..<4).map { UInt8(truncatingIfNeeded: offset >> (8 * $0)) }
                let message =
                    [UInt8](repeating: 0xFF, count: 32) + [0x0C, 0x00] + offsetLE
                    + Array(SHA256.hash(data: piece))
                params[5] = .byteString(token.authenticate(message))
                params[6] = CBORValue(token.version)
            }
            results.append(status(of: harness.cbor(.largeBlobs, params)))
        }
        return results
    }

    @Test func aNewKeyHoldsTheEmptyArray() throws {
        var harness = try Harness()
        #expect(try read(&harness) == Self.emptyArray)
        #expect(try read(&harness, fragment: 17) + [] == Self.emptyArray)
        // A read at the very end is empty, not an error (python-fido2 relies on it).
        let end = try responseMap(harness.cbor(.largeBlobs, [1: 10, 3: 17]))
        #expect(end[1] == .byteString([]))
        #expect(status(of: harness.cbor(.largeBlobs, [1: 10, 3: 18])) == .invalidParameter)
    }

    @Test func aWriteWithoutAPINNeedsNoToken() throws {
        var harness = try Harness()
        let array = Self.array(filler: 2500)
        #expect(write(&harness, array).allSatisfy { $0 == .ok })
        #expect(try read(&harness) == array)
    }

    @Test func withAPINAWriteNeedsAnLbwToken() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        let array = Self.array(filler: 100)
        #expect(write(&harness, array) == [.puatRequired])
        let gaOnly = try harness.token("1234", permissions: 0x02)
        #expect(write(&harness, array, token: gaOnly) == [.pinAuthInvalid])
        let token = try harness.token("1234", permissions: 0x10)
        var forged = write(&harness, array, token: PlatformToken(version: 2, value: [UInt8](repeating: 1, count: 32)))
        #expect(forged == [.pinAuthInvalid])
        #expect(write(&harness, array, token: token) == [.ok])
        #expect(try read(&harness) == array)
        // Protocol 1 tokens sign with 16 bytes.
        let v1 = try harness.token("1234", permissions: 0x10, version: 1)
        forged = write(&harness, Self.array(filler: 3000), token: v1)
        #expect(forged.allSatisfy { $0 == .ok })
    }

    @Test func aTouchKeepsLbwOnTheToken() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        let token = try harness.token("1234", permissions: 0x12, rpId: Request.rpId)
        _ = harness.approve(harness.cbor(.makeCredential, Request.makeCredential()))
        #expect(write(&harness, Self.array(filler: 40), token: token) == [.ok])
    }

    @Test func aBadChecksumIsIntegrityFailureAndKeepsTheOldArray() throws {
        var harness = try Harness()
        let good = Self.array(filler: 300)
        _ = write(&harness, good)
        var bad = Self.array(filler: 600)
        bad[bad.count - 1] ^= 1
        #expect(write(&harness, bad, fragment: 400) == [.ok, .integrityFailure])
        #expect(try read(&harness) == good)
    }

    @Test func fragmentRules() throws {
        var harness = try Harness()  // maxMsgSize 3072: fragments of at most 3008 bytes
        let array = Self.array(filler: 100)
        #expect(status(of: harness.cbor(.largeBlobs, [1: 10])) == .invalidParameter)  // no offset
        #expect(status(of: harness.cbor(.largeBlobs, [3: 0])) == .invalidParameter)  // neither
        #expect(status(of: harness.cbor(.largeBlobs, [1: 10, 2: .byteString([1]), 3: 0])) == .invalidParameter)
        #expect(status(of: harness.cbor(.largeBlobs, [1: 3009, 3: 0])) == .invalidLength)
        #expect(status(of: harness.cbor(.largeBlobs, [1: 10, 3: 0, 4: 5])) == .invalidParameter)
        let tooBig: [CBORValue: CBORValue] = [2: .byteString([UInt8](repeating: 0, count: 3009)), 3: 0, 4: 4000]
        #expect(status(of: harness.cbor(.largeBlobs, tooBig)) == .invalidLength)
        #expect(status(of: harness.cbor(.largeBlobs, [2: .byteString([1]), 3: 0])) == .invalidParameter)
        #expect(status(of: harness.cbor(.largeBlobs, [2: .byteString([1]), 3: 0, 4: 4097])) == .largeBlobStorageFull)
        #expect(status(of: harness.cbor(.largeBlobs, [2: .byteString([1]), 3: 0, 4: 16])) == .invalidParameter)
        // Out of sequence, a length after offset 0, running past the length.
        #expect(status(of: harness.cbor(.largeBlobs, [2: .byteString([1]), 3: 5])) == .invalidSequence)
        let first = Array(array.prefix(50))
        #expect(status(of: harness.cbor(.largeBlobs, [2: .byteString(first), 3: 0, 4: CBORValue(array.count)])) == .ok)
        #expect(status(of: harness.cbor(.largeBlobs, [2: .byteString([1]), 3: 49])) == .invalidSequence)
        #expect(status(of: harness.cbor(.largeBlobs, [2: .byteString([1]), 3: 50, 4: 9])) == .invalidParameter)
        let past = [UInt8](repeating: 0, count: array.count)
        #expect(status(of: harness.cbor(.largeBlobs, [2: .byteString(past), 3: 50])) == .invalidParameter)
        #expect(status(of: harness.cbor(.largeBlobs, [2: .byteString(Array(array[50...])), 3: 50])) == .ok)
        #expect(try read(&harness) == array)
    }

    @Test func resetRestoresTheEmptyArray() throws {
        var harness = try Harness()
        _ = write(&harness, Self.array(filler: 100))
        #expect(status(of: harness.approve(harness.cbor(.reset))) == .ok)
        #expect(try read(&harness) == Self.emptyArray)
    }

    @Test func theArraySurvivesARemountAndAnInterruptedWriteLeavesTheOld() throws {
        var entropy = EntropySource(SeededGenerator(seed: 3))
        var storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        let first = Self.array(filler: 4000)
        try storage.setLargeBlobArray(first)
        var again = try FlashStorage(device: storage.store.device, entropy: &entropy)
        #expect(again.largeBlobArray == first)
        // Replace it twice (both slots are used in turn), then a write whose chunks land but whose header
        // switch never happens: simulated by writing chunks of the free slot by hand.
        let second = Self.array(filler: 1500)
        try again.setLargeBlobArray(second)
        try again.setLargeBlobArray(first)
        try again.setLargeBlobArray(second)
        var store = again.store
        #expect(store.keys.contains(StorageKey.largeBlobSlots[1]) && !store.keys.contains(StorageKey.largeBlobSlots[0]))
        try store.apply([.insert(key: StorageKey.largeBlobSlots[0], value: [UInt8](repeating: 0xEE, count: 900))])
        let remounted = try FlashStorage(device: store.device, entropy: &entropy)
        #expect(remounted.largeBlobArray == second)
        #expect(remounted.store.keys.filter { $0 >= 0x0100 && $0 < 0x0200 }.count == 2)
    }
}
