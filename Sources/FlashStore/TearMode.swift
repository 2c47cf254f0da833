/// What a power cut does to the flash operation it interrupts.
package enum TearMode: Hashable, Sendable, CustomStringConvertible {
    /// Nothing of the operation reaches the flash.
    case none
    /// The operation completes but is not acknowledged (the caller sees the cut).
    case complete
    /// A random subset of the bits that should change does change (each with probability 1/2, drawn from
    /// `seed`); the torn contents then read back identically until overwritten or erased.
    case randomBits(seed: UInt64)
    /// The first half of the words (rounded down) are fully applied, the rest untouched. For an erase,
    /// the first half of the page's words become 0xFF.
    case prefix

    /// The four modes, with `seed` for the random one.
    package static func all(seed: UInt64) -> [TearMode] { [.none, .complete, .randomBits(seed: seed), .prefix] }

    package var description: String {
        switch self {
        case .none: "none"
        case .complete: "complete"
        case .randomBits(let seed): "randomBits(\(seed))"
        case .prefix: "prefix"
        }
    }
}

/// SplitMix64: a tiny, fast, seedable generator (Steele, Lea, Flood 2014). Deterministic: the same seed gives
/// the same sequence on every platform.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator from `seed`.
    package init(seed: UInt64) { state = seed }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
