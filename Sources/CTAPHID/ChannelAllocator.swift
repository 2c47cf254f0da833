/// Hands out fresh channel ids for broadcast `INIT`, deterministically from a seed.
///
/// The id is `mix(seed &+ counter)` where `mix` is a bijection of `UInt32` (the MurmurHash3 finalizer) and the counter
/// counts every candidate; candidates 0 and 0xFFFFFFFF are skipped. Because the counter never repeats before 2³²
/// candidates, neither does an id, so ids stay distinct for the life of the machine (power cycles included).
struct ChannelAllocator: Sendable, Equatable {
    /// The seed injected by the bridge.
    let seed: UInt32
    /// How many candidates were drawn so far.
    private(set) var counter: UInt32 = 0

    /// Creates an allocator that mixes `seed` into every id.
    init(seed: UInt32) {
        self.seed = seed
    }

    /// Returns the next id, never 0 (reserved) nor 0xFFFFFFFF (broadcast).
    mutating func next() -> UInt32 {
        while true {
            let candidate = Self.mix(self.seed &+ self.counter)
            self.counter &+= 1
            if candidate != 0 && candidate != CTAPHIDMachine.broadcastChannel {
                return candidate
            }
        }
    }

    /// The MurmurHash3 32-bit finalizer: an invertible mix, so distinct inputs give distinct outputs.
    static func mix(_ value: UInt32) -> UInt32 {
        var x = value
        x ^= x >> 16
        x &*= 0x85EB_CA6B
        x ^= x >> 13
        x &*= 0xC2B2_AE35
        x ^= x >> 16
        return x
    }
}
