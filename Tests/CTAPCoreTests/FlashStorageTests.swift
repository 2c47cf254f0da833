import CTAPCBOR
import Crypto
import FlashStore
import Testing

@testable import CTAPCore

/// The authenticator's state in the flash store: byte-exact records, persistence across mounts, a full
/// store that loses nothing, and reset.
@Suite struct FlashStorageTests {
    func credential(_ n: UInt8, rp: String = "example.com", name: String? = nil) -> ResidentCredential {
        ResidentCredential(
            id: Array(repeating: n, count: 63), rpId: rp, rpIdHash: Array(SHA256.hash(data: Array(rp.utf8))),
            user: UserEntity(
                id: Array(repeating: n, count: 64), name: name ?? String(repeating: "é", count: 32),
                displayName: String(repeating: "D", count: 300), icon: "https://example.com/i.png"),
            privateKey: Array(repeating: n &+ 1, count: 32), creationSerial: UInt64(n))
    }

    @Test func recordsRoundTripByteExact() {
        let c = credential(7)
        let decoded = FlashStorage<SimulatedFlash>.decodeCredential(FlashStorage<SimulatedFlash>.encodeCredential(c))
        #expect(decoded == c)
    }

    @Test func stateSurvivesARemount() throws {
        var entropy = EntropySource(SeededGenerator(seed: 1))
        var storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        try storage.storeResident(credential(1))
        try storage.storeResident(credential(2))
        _ = try storage.incrementSignCounter()
        _ = try storage.incrementSignCounter()
        let secret = storage.deviceSecret
        let serial = storage.serial
        var other = EntropySource(SeededGenerator(seed: 99))
        let again = try FlashStorage(device: storage.store.device, entropy: &other)
        #expect(again.deviceSecret == secret)
        #expect(again.serial == serial)
        #expect(again.signCounter == 2)
        #expect(Set(again.residentCredentials.map(\.id)) == [credential(1).id, credential(2).id])
        #expect(again.residentCredentials.first { $0.id == credential(1).id } == credential(1))
    }

    @Test func sameUserReplacesInPlace() throws {
        var entropy = EntropySource(SeededGenerator(seed: 1))
        var storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        try storage.storeResident(credential(1))
        var replacement = credential(1)
        replacement.id = Array(repeating: 0xEE, count: 63)
        try storage.storeResident(replacement)
        #expect(storage.residentCredentials == [replacement])
        #expect(storage.store.keys.filter { $0 >= StorageKey.firstCredential }.count == 1)
    }

    @Test func aFullStoreRefusesWithKeyStoreFullAndLosesNothing() throws {
        var entropy = EntropySource(SeededGenerator(seed: 1))
        var storage = try FlashStorage(device: SimulatedFlash(geometry: .tiny(pages: 6)), entropy: &entropy)
        var stored: [ResidentCredential] = []
        var refused: CTAPError?
        for n in 0..<UInt8(200) {
            let c = credential(n, name: "u\(n)")
            do {
                // Small records so that several fit on the tiny geometry.
                var small = c
                small.user = UserEntity(id: [n], name: "u")
                try storage.storeResident(small)
                stored.append(small)
            } catch {
                refused = error
                break
            }
        }
        #expect(refused?.status == .keyStoreFull)
        #expect(stored.count > 2)
        let again = try FlashStorage(device: storage.store.device, entropy: &entropy)
        #expect(Set(again.residentCredentials.map(\.id)) == Set(stored.map(\.id)))
    }

    @Test func wipeDeletesCredentialsAndReplacesTheSecret() throws {
        var entropy = EntropySource(SeededGenerator(seed: 1))
        var storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        try storage.storeResident(credential(1))
        let key = credential(1).privateKey
        try storage.wipe(newDeviceSecret: Array(repeating: 9, count: 32))
        #expect(storage.residentCredentials.isEmpty)
        #expect(storage.deviceSecret == Array(repeating: 9, count: 32))
        // The deleted private key is not left anywhere in the raw flash.
        let image = storage.store.device.image
        let found = (0...(image.count - key.count)).contains { Array(image[$0..<($0 + key.count)]) == key }
        #expect(!found)
    }

    @Test func authenticatorReportsRemainingCapacityInGetInfo() throws {
        var entropy = EntropySource(SeededGenerator(seed: 1))
        let storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        var authenticator = try Authenticator(storage: storage, entropy: entropy, now: .zero)
        guard case .response(let bytes) = authenticator.handleCBOR([0x04], now: .zero) else {
            Issue.record("getInfo did not answer")
            return
        }
        let info = try CBORDecoder.decode(Array(bytes.dropFirst()))
        let remaining = try #require(info[0x14]?.intValue)
        #expect(remaining >= 150)
    }
}
