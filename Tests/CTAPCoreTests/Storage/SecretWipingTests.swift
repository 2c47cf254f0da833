import Testing

@testable import CTAPCore

@Suite struct SecretWipingTests {
    @Test func aCacheHandsBackWhatItPushesOutAndWipingZeroesIt() {
        var lru = CredentialLRU<[UInt8]>()
        for i in 0..<CredentialLRU<[UInt8]>.capacity {
            #expect(lru.insert([UInt8(i), 1, 2, 3], for: [UInt8(i)]) == nil)
        }
        var evicted = lru.insert([9, 9], for: [0xFF])
        #expect(evicted == [0, 1, 2, 3])
        evicted?.wipe()
        #expect(evicted == [0, 0, 0, 0])
        #expect(lru.removeAll().count == CredentialLRU<[UInt8]>.capacity)
    }
}
