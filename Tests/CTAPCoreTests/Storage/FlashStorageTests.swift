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
            id: Array(repeating: n, count: 63),
            rpId: rp,
            rpIdHash: Array(SHA256.hash(data: Array(rp.utf8))),
            user: UserEntity(
                id: Array(repeating: n, count: 64),
                name: name ?? String(repeating: "é", count: 32),
                displayName: String(repeating: "D", count: 300),
                icon: "https://example.com/i.png"
            ),
            privateKey: Array(repeating: n &+ 1, count: 32),
            creationSerial: UInt64(n)
        )
    }

    @Test func recordsRoundTripByteExact() {
        let c = credential(7)
        let decoded = CredentialRecord.decode(CredentialRecord.encode(c))
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

    /// A credential record that does not decode (from a newer format, say) is skipped at mount, but a new credential
    /// does not overwrite it, and reset wipes it with the others: it may still hold a private key.
    @Test func aRecordThatDoesNotDecodeIsKeptUntilResetWipesIt() throws {
        var entropy = EntropySource(SeededGenerator(seed: 4))
        var storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        let secret = Array(repeating: UInt8(0x5A), count: 32)
        var store = storage.store
        try store.insert([0xFF] + secret, for: StorageKey.firstCredential)  // 0xFF: not a CBOR map head
        try store.insert([0xFF] + secret, for: StorageKey.firstCredential + 5)
        storage = try FlashStorage(device: store.device, entropy: &entropy)
        #expect(storage.residentCount == 0)
        try storage.storeResident(credential(1))
        #expect(
            storage.store.keys.filter { $0 >= StorageKey.firstCredential } == [
                StorageKey.firstCredential, StorageKey.firstCredential + 1, StorageKey.firstCredential + 5,
            ]
        )
        #expect(try storage.store.get(StorageKey.firstCredential) == [0xFF] + secret)
        #expect(storage.residentCredentials == [credential(1)])
        try storage.wipe(newDeviceSecret: Array(repeating: 9, count: 32))
        #expect(storage.store.keys.allSatisfy { $0 < StorageKey.firstCredential })
        let image = storage.store.device.image
        #expect(!(0...(image.count - secret.count)).contains { Array(image[$0..<($0 + secret.count)]) == secret })
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

    @Test func extendedCredentialRecordsRoundTrip() {
        var c = credential(9)
        c.algorithm = .edDSA
        c.credProtect = .required
        c.hmacSecret = true
        c.credBlob = [1, 2, 3]
        c.largeBlobKey = Array(repeating: 0x4B, count: 32)
        let bytes = CredentialRecord.encode(c)
        #expect(CredentialRecord.decode(bytes) == c)
        // A record of format 1 without the new members reads with their defaults.
        let plain = credential(8)
        let decoded = CredentialRecord.decode(CredentialRecord.encode(plain))
        #expect(decoded?.algorithm == .es256 && decoded?.credProtect == .optional && decoded?.hmacSecret == false)
    }

    @Test func pinAndRetriesSurviveARemountAndResetClearsThem() throws {
        var entropy = EntropySource(SeededGenerator(seed: 1))
        var storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        #expect(storage.pin == nil && storage.pinRetries == 8)
        let pin = StoredPIN(hash: Array(repeating: 0xAB, count: 16), codePoints: 6)
        try storage.setPIN(pin)
        try storage.setPinRetries(5)
        var again = try FlashStorage(device: storage.store.device, entropy: &entropy)
        #expect(again.pin == pin && again.pinRetries == 5)
        try again.setPIN(StoredPIN(hash: Array(repeating: 0xCD, count: 16), codePoints: 4))
        #expect(again.pinRetries == 8)
        try again.wipe(newDeviceSecret: Array(repeating: 3, count: 32))
        let wiped = try FlashStorage(device: again.store.device, entropy: &entropy)
        #expect(wiped.pin == nil && wiped.pinRetries == 8)
    }

    @Test func aWrongPINIsCountedInFlashBeforeTheAnswer() throws {
        var entropy = EntropySource(SeededGenerator(seed: 2))
        let storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        var harness = try Harness()
        harness.authenticator = try Authenticator(storage: storage, entropy: entropy, now: .zero)
        _ = try harness.setPIN("1234")
        #expect(status(of: try harness.requestToken("0000", permissions: 1).0) == .pinInvalid)
        guard let flash = harness.authenticator.storage as? FlashStorage<SimulatedFlash> else {
            throw HarnessFailure("not flash storage")
        }
        let remounted = try FlashStorage(device: flash.store.device, entropy: &entropy)
        #expect(remounted.pinRetries == 7)
        #expect(remounted.pin?.codePoints == 4)
    }

    @Test func corruptPINRecordsAreReportedNotTrusted() throws {
        var entropy = EntropySource(SeededGenerator(seed: 1))
        var storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        var store = storage.store
        try store.apply([.insert(key: StorageKey.pinRetries, value: [42])])
        #expect(throws: StorageError.self) { try FlashStorage(device: store.device, entropy: &entropy) }
        try storage.setPIN(StoredPIN(hash: Array(repeating: 1, count: 16), codePoints: 4))
        store = storage.store
        try store.apply([.insert(key: StorageKey.pin, value: [1, 2, 3])])
        #expect(throws: StorageError.self) { try FlashStorage(device: store.device, entropy: &entropy) }
    }

    @Test func settingsSurviveARemountAndResetClearsThem() throws {
        var entropy = EntropySource(SeededGenerator(seed: 6))
        var storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        var settings = AuthenticatorSettings()
        settings.minPINLength = 7
        settings.minPinLengthRPIDs = ["a.example", "b.example"]
        settings.forcePINChange = true
        settings.alwaysUv = true
        try storage.setSettings(settings)
        try storage.setLargeBlobArray(LargeBlobArray.initial + [])
        var again = try FlashStorage(device: storage.store.device, entropy: &entropy)
        #expect(again.settings == settings)
        try again.wipe(newDeviceSecret: Array(repeating: 4, count: 32))
        let wiped = try FlashStorage(device: again.store.device, entropy: &entropy)
        #expect(wiped.settings == AuthenticatorSettings())
        #expect(wiped.largeBlobArray == LargeBlobArray.initial)
        #expect(wiped.store.keys.allSatisfy { $0 < 0x0100 || $0 >= 0x0200 })
    }

    @Test func lookupByIdFollowsReplacementsDeletionsAndRemounts() throws {
        var entropy = EntropySource(SeededGenerator(seed: 8))
        var storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        try storage.storeResident(credential(1))
        try storage.storeResident(credential(2))
        var replacement = credential(1)
        replacement.id = Array(repeating: 0xEE, count: 63)
        try storage.storeResident(replacement)
        #expect(storage.residentCredential(id: credential(1).id) == nil)
        #expect(storage.residentCredential(id: replacement.id) == replacement)
        let again = try FlashStorage(device: storage.store.device, entropy: &entropy)
        #expect(again.residentCredential(id: replacement.id) == replacement)
        #expect(again.residentCredential(id: credential(2).id) == credential(2))
        #expect(try storage.deleteResident(id: credential(2).id))
        #expect(storage.residentCredential(id: credential(2).id) == nil)
        try storage.wipe(newDeviceSecret: Array(repeating: 1, count: 32))
        #expect(storage.residentCredential(id: replacement.id) == nil)
    }

    /// RAM keeps only a summary of each credential (the rest is decoded from flash on demand): every query of the
    /// storage gives what a plain scan of the credentials gives (MemoryStorage's), through a random sequence of
    /// stores, replacements, imports with reused ids, deletions and remounts.
    @Test func indexedQueriesAgreeWithAScanOfTheCredentials() throws {
        var random = SeededGenerator(seed: 0x1DE5)
        var entropy = EntropySource(SeededGenerator(seed: 3))
        var flash = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        var memory = MemoryStorage(deviceSecret: flash.deviceSecret, capacity: 10_000)
        let rps = ["a.example", "b.example", "c.example"]
        var serial: UInt64 = 0
        func check(_ flash: FlashStorage<SimulatedFlash>) {
            #expect(flash.residentCount == memory.residentCount)
            #expect(flash.discoverableCount == memory.discoverableCount)
            #expect(flash.newestCreationSerial == memory.newestCreationSerial)
            #expect(Set(flash.residentCredentials.map(\.id)) == Set(memory.residentCredentials.map(\.id)))
            for rp in rps {
                let hash = Array(SHA256.hash(data: Array(rp.utf8)))
                let byId = { (list: [ResidentCredential]) in list.sorted { $0.id.lexicographicallyPrecedes($1.id) } }
                #expect(
                    byId(flash.residentCredentials(rpIdHash: hash)) == byId(memory.residentCredentials(rpIdHash: hash))
                )
                for user in UInt8(0)..<4 {
                    #expect(
                        flash.discoverableCredential(rpIdHash: hash, userId: [user])
                            == memory.discoverableCredential(rpIdHash: hash, userId: [user])
                    )
                }
            }
            for id in UInt8(0)..<12 {
                #expect(flash.residentCredential(id: [id, id]) == memory.residentCredential(id: [id, id]))
            }
            // A new credential takes the lowest free record key, as a scan from the first one would find it.
            let lowestFree = (StorageKey.firstCredential...StorageKey.lastCredential).first {
                flash.residents[$0] == nil
            }
            #expect(flash.freeCredentialKey() == lowestFree)
        }
        for step in 0..<300 {
            let n = UInt8(random.next() % 12)
            switch random.next() % 5 {
            case 0, 1, 2:
                serial += 1
                let rp = rps[Int(random.next() % 3)]
                let credential = ResidentCredential(
                    id: [n, n],
                    rpId: rp,
                    rpIdHash: Array(SHA256.hash(data: Array(rp.utf8))),
                    user: UserEntity(id: [UInt8(random.next() % 4)], name: "user \(step)"),
                    privateKey: Array(repeating: n &+ 1, count: 32),
                    creationSerial: serial,
                    discoverable: random.next() % 4 != 0
                )
                try flash.storeResident(credential)
                try memory.storeResident(credential)
            case 3:
                #expect(try flash.deleteResident(id: [n, n]) == (try memory.deleteResident(id: [n, n])))
            default:
                flash = try FlashStorage(device: flash.store.device, entropy: &entropy)
            }
            check(flash)
        }
        #expect(flash.residentCount > 3)
    }
}
