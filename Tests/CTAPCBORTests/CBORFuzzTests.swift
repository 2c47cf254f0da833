import CTAPCBOR
import FlashStore
import Testing

@Suite("Decoder fuzzing")
struct CBORFuzzTests {
    /// Decodes `input` and, if it is accepted, checks that its re-encoding is canonical and decodes to an
    /// equal value; returns a description of the first violation.
    private static func check(_ input: [UInt8]) -> String? {
        let value: CBORValue
        do {
            value = try CBORDecoder.decode(input)
        } catch {
            return (0...input.count).contains(error.offset) ? nil : "offset \(error.offset) outside \(hexString(input))"
        }
        let reencoded = value.encoded()
        guard let again = try? CBORDecoder.decode(reencoded), again == value else {
            return "re-encoding of \(hexString(input)) does not decode to the same value"
        }
        guard again.encoded() == reencoded, CBORDecoder.isCanonical(reencoded) else {
            return "re-encoding of \(hexString(input)) is not stable and canonical"
        }
        // Minimal forms are enforced, so an input can differ from its re-encoding only in map key order.
        if reencoded.count != input.count {
            return "re-encoding of \(hexString(input)) changed length"
        }
        return nil
    }

    /// Valid encodings that the mutation fuzzer starts from.
    private static let seeds: [[UInt8]] =
        rfc8949Vectors.map { hex($0.hex) } + [
            hex(
                "a401420102" + "02a262696463612e62646e616d656141"
                    + "0481a263616c67266474797065" + "6a7075626c69632d6b6579" + "07a162726bf5"
            ),
            hex("a3" + "0102" + "20" + "a1616181f6" + "6174" + "5818" + String(repeating: "ab", count: 24)),
            hex("82" + "1bffffffffffffffff" + "3a7fffffff"),
        ]

    @Test("20,000 random byte strings either fail cleanly or round-trip")
    func randomBytes() {
        var generator = SplitMix64(seed: 0x5eed_cb0e)
        var failures: [String] = []
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...24, using: &generator)
            var input = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            // Bias towards small heads so that more inputs get past the first byte.
            if let first = input.first, Bool.random(using: &generator) {
                input[0] = (first & 0xe0) | UInt8.random(in: 0...3, using: &generator)
            }
            if let failure = Self.check(input) {
                failures.append(failure)
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }

    @Test("the mutation seeds are valid canonical encodings")
    func seedsAreValid() {
        for seed in Self.seeds {
            #expect(CBORDecoder.isCanonical(seed), "\(hexString(seed))")
        }
    }

    @Test("20,000 mutations of valid encodings either fail cleanly or round-trip")
    func mutations() {
        var generator = SplitMix64(seed: 0xf1d0_2025)
        var failures: [String] = []
        var accepted = 0
        for _ in 0..<20_000 {
            var input = Self.seeds.randomElement(using: &generator) ?? []
            for _ in 0...Int.random(in: 0...2, using: &generator) {
                let position = input.isEmpty ? 0 : Int.random(in: 0..<input.count, using: &generator)
                switch Int.random(in: 0..<5, using: &generator) {
                case 0 where !input.isEmpty:
                    input[position] ^= 1 << UInt8.random(in: 0...7, using: &generator)
                case 1 where !input.isEmpty:
                    input[position] = UInt8.random(in: 0...255, using: &generator)
                case 2:
                    input.insert(UInt8.random(in: 0...255, using: &generator), at: position)
                case 3 where !input.isEmpty:
                    input.remove(at: position)
                default:
                    input.removeLast(Int.random(in: 0...input.count, using: &generator))
                }
            }
            if let failure = Self.check(input) {
                failures.append(failure)
            }
            if (try? CBORDecoder.decode(input)) != nil {
                accepted += 1
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
        // The mutations are meant to exercise the success path too, not only rejections.
        #expect(accepted > 1_000)
    }

    /// A random value whose containers nest at most `depth` deep.
    private static func randomValue(depth: Int, using generator: inout SplitMix64) -> CBORValue {
        let kind = Int.random(in: 0..<(depth > 0 ? 9 : 7), using: &generator)
        switch kind {
        case 0:
            return .unsigned(Self.randomArgument(using: &generator))
        case 1:
            return .negative(Self.randomArgument(using: &generator))
        case 2:
            let count = Int.random(in: 0...30, using: &generator)
            return .byteString((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
        case 3:
            let alphabet: [Unicode.Scalar] = ["a", "z", "\"", "\u{00fc}", "\u{6c34}", "\u{10151}", "\u{0301}"]
            let count = Int.random(in: 0...6, using: &generator)
            var text = String.UnicodeScalarView()
            for _ in 0..<count {
                text.append(alphabet.randomElement(using: &generator) ?? "a")
            }
            return .textString(String(text))
        case 4:
            return .boolean(Bool.random(using: &generator))
        case 5:
            return .null
        case 6:
            return .undefined
        case 7:
            let count = Int.random(in: 0...4, using: &generator)
            return .array((0..<count).map { _ in Self.randomValue(depth: depth - 1, using: &generator) })
        default:
            var entries: [CBORValue: CBORValue] = [:]
            for _ in 0..<Int.random(in: 0...4, using: &generator) {
                let key = Self.randomValue(depth: depth - 1, using: &generator)
                entries[key] = Self.randomValue(depth: depth - 1, using: &generator)
            }
            return .map(entries)
        }
    }

    /// An integer argument biased towards the boundaries between head widths.
    private static func randomArgument(using generator: inout SplitMix64) -> UInt64 {
        let boundaries: [UInt64] = [0, 23, 24, 0xff, 0x100, 0xffff, 0x1_0000, 0xffff_ffff, 0x1_0000_0000, .max]
        if Bool.random(using: &generator), let boundary = boundaries.randomElement(using: &generator) {
            return boundary
        }
        return UInt64.random(in: 0...UInt64.max, using: &generator) >> UInt64.random(in: 0...63, using: &generator)
    }

    @Test("2,000 random values encode canonically and decode to themselves")
    func randomValues() throws {
        var generator = SplitMix64(seed: 0xc7a9_2001)
        for _ in 0..<2_000 {
            let value = Self.randomValue(depth: 4, using: &generator)
            let encoded = value.encoded()
            let decoded = try CBORDecoder.decode(encoded)
            #expect(decoded == value)
            #expect(CBORDecoder.isCanonical(encoded))
            #expect(decoded.encoded() == encoded)
        }
    }
}
