/// Random bytes for the authenticator, injected so that tests are deterministic.
///
/// The bridge passes `SystemRandomNumberGenerator`; tests pass a seeded generator.
public struct EntropySource: Sendable {
    private var generator: any RandomNumberGenerator & Sendable

    public init(_ generator: some RandomNumberGenerator & Sendable) {
        self.generator = generator
    }

    /// The operating system's cryptographically secure generator.
    public static var system: EntropySource { EntropySource(SystemRandomNumberGenerator()) }

    /// Returns `count` random bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(count + 8)
        while out.count < count {
            var word = generator.next()
            for _ in 0..<8 where out.count < count {
                out.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return out
    }

    /// Returns a random 64-bit value.
    public mutating func next() -> UInt64 { generator.next() }
}

/// A small deterministic generator (SplitMix64) for tests and reproducible runs; not for production keys.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
