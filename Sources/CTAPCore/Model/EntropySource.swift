import FlashStore

/// Random bytes for the authenticator, injected so that tests are deterministic.
///
/// The bridge passes `SystemRandomNumberGenerator`; tests pass a seeded generator.
package struct EntropySource: Sendable {
    private var generator: any RandomNumberGenerator & Sendable

    package init(_ generator: some RandomNumberGenerator & Sendable) {
        self.generator = generator
    }

    /// The operating system's cryptographically secure generator.
    package static var system: EntropySource { EntropySource(SystemRandomNumberGenerator()) }

    /// Returns `count` random bytes.
    package mutating func bytes(_ count: Int) -> [UInt8] {
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
    package mutating func next() -> UInt64 { generator.next() }
}

/// A small deterministic generator for tests and reproducible runs: FlashStore's SplitMix64 under the name the
/// authenticator's users know. Not for production keys.
package struct SeededGenerator: RandomNumberGenerator, Sendable {
    var splitMix: SplitMix64

    package init(seed: UInt64) { splitMix = SplitMix64(seed: seed) }

    package mutating func next() -> UInt64 { splitMix.next() }
}
