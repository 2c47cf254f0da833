import Crypto
import Testing

@testable import CTAPCore

/// The RAM index of the stored credentials, driven without a store: the free-key hint and the newest serial.
@Suite struct CredentialIndexTests {
    static let first = StorageKey.firstCredential

    func credential(_ n: UInt8, user: UInt8? = nil, serial: UInt64) -> ResidentCredential {
        ResidentCredential(
            id: [n, n, n],
            rpId: "example.com",
            rpIdHash: Array(SHA256.hash(data: Array("example.com".utf8))),
            user: UserEntity(id: [user ?? n]),
            privateKey: Array(repeating: n, count: 32),
            creationSerial: serial
        )
    }

    @Test func freeKeysAreTakenInOrderAndAFreedOneComesFirst() {
        var index = CredentialIndex()
        for n in 0..<3 {
            let key = Self.first + UInt16(n)
            #expect(index.freeKeyHint == key)
            index.stored(credential(UInt8(n), serial: UInt64(n)), key: key, gone: [], replaced: nil, tookFreeKey: true)
        }
        #expect(index.freeKeyHint == Self.first + 3)
        index.deleted(key: Self.first + 1, id: [1, 1, 1])
        #expect(index.freeKeyHint == Self.first + 1)
        #expect(index.keysById[[1, 1, 1]] == nil)
        #expect(index.residents.count == 2)
    }

    @Test func aReplacedCredentialUnderAnotherKeyFreesItsKey() {
        var index = CredentialIndex()
        index.stored(credential(1, user: 9, serial: 1), key: Self.first, gone: [], replaced: nil, tookFreeKey: true)
        index.stored(credential(2, serial: 2), key: Self.first + 1, gone: [], replaced: nil, tookFreeKey: true)
        // Same RP and user as credential 1, written under the first free key; credential 1's record goes.
        index.stored(
            credential(3, user: 9, serial: 3),
            key: Self.first + 2,
            gone: [(Self.first, [1, 1, 1])],
            replaced: Self.first,
            tookFreeKey: false
        )
        #expect(index.freeKeyHint == Self.first)
        #expect(index.residents[Self.first] == nil)
        #expect(index.keysById[[3, 3, 3]] == Self.first + 2)
        #expect(index.newestSerial == 3)
    }

    @Test func theNewestSerialFallsBackWhenTheNewestGoes() {
        var index = CredentialIndex()
        index.load(credential(1, serial: 5), key: Self.first)
        index.load(credential(2, serial: 9), key: Self.first + 1)
        #expect(index.newestSerial == 9)
        index.deleted(key: Self.first + 1, id: [2, 2, 2])
        #expect(index.newestSerial == 5)
        index.deleted(key: Self.first, id: [1, 1, 1])
        #expect(index.newestSerial == 0)
    }
}
