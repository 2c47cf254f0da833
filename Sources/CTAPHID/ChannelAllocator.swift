/// Hands out fresh channel ids for broadcast `INIT`: a keyed permutation of a counter.
///
/// The id is `permute(counter)`, where `permute` is an 8-round Feistel network over the id's two 16-bit halves whose
/// round function is SipHash-2-4 under a 128-bit key (in `serve`, drawn from the operating system's CSPRNG). Being a
/// permutation of a counter that never repeats before 2³² draws, it never gives an id twice in the machine's life
/// (power cycles included); being keyed, the ids a host has seen do not tell it the ids given to another host.
/// Candidates 0 and 0xFFFFFFFF are skipped.
struct ChannelAllocator: Sendable, Equatable {
    let key0: UInt64
    let key1: UInt64
    /// How many candidates were drawn so far.
    private(set) var counter: UInt32 = 0

    /// An allocator under a 128-bit key.
    init(key0: UInt64, key1: UInt64) {
        self.key0 = key0
        self.key1 = key1
    }

    /// An allocator whose key is made from a 32-bit seed (tests that want the same ids every run).
    init(seed: UInt32) {
        self.init(key0: UInt64(seed), key1: 0x6669_646F_7369_6D00)
    }

    /// Returns the next id, never 0 (reserved) nor 0xFFFFFFFF (broadcast).
    mutating func next() -> UInt32 {
        while true {
            let candidate = permute(counter)
            counter &+= 1
            if candidate != 0 && candidate != CTAPHIDMachine.broadcastChannel { return candidate }
        }
    }

    /// The keyed permutation of 32-bit values.
    func permute(_ value: UInt32) -> UInt32 {
        var left = UInt16(truncatingIfNeeded: value >> 16)
        var right = UInt16(truncatingIfNeeded: value)
        for round in 0..<8 {
            let f = UInt16(truncatingIfNeeded: Self.sipHash(key0, key1, UInt64(round) << 32 | UInt64(right)))
            (left, right) = (right, left ^ f)
        }
        return UInt32(left) << 16 | UInt32(right)
    }

    /// SipHash-2-4 (Aumasson and Bernstein, 2012) of one 8-byte message, its bytes `message` in little-endian order.
    static func sipHash(_ k0: UInt64, _ k1: UInt64, _ message: UInt64) -> UInt64 {
        var v0 = k0 ^ 0x736F_6D65_7073_6575
        var v1 = k1 ^ 0x646F_7261_6E64_6F6D
        var v2 = k0 ^ 0x6C79_6765_6E65_7261
        var v3 = k1 ^ 0x7465_6462_7974_6573
        func round() {
            v0 &+= v1
            v1 = v1.rotatedLeft(13) ^ v0
            v0 = v0.rotatedLeft(32)
            v2 &+= v3
            v3 = v3.rotatedLeft(16) ^ v2
            v0 &+= v3
            v3 = v3.rotatedLeft(21) ^ v0
            v2 &+= v1
            v1 = v1.rotatedLeft(17) ^ v2
            v2 = v2.rotatedLeft(32)
        }
        // The message block, then the last block: the length (8) in the top byte.
        for block in [message, UInt64(8) << 56] {
            v3 ^= block
            round()
            round()
            v0 ^= block
        }
        v2 ^= 0xFF
        for _ in 0..<4 { round() }
        return v0 ^ v1 ^ v2 ^ v3
    }
}

extension UInt64 {
    fileprivate func rotatedLeft(_ bits: UInt64) -> UInt64 { self << bits | self >> (64 - bits) }
}
