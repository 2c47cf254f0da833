import CTAPCBOR
import Testing

/// One encoding from RFC 8949 Appendix A, within the CTAP2 subset.
struct KnownAnswer: Sendable, CustomTestStringConvertible {
    var hex: String
    var value: CBORValue

    var testDescription: String {
        "\(self.value) = \(self.hex)"
    }
}

/// RFC 8949 Appendix A examples that CTAP2 canonical CBOR can express; all of them are already canonical.
let rfc8949Vectors: [KnownAnswer] = [
    // Integers.
    KnownAnswer(hex: "00", value: 0),
    KnownAnswer(hex: "01", value: 1),
    KnownAnswer(hex: "0a", value: 10),
    KnownAnswer(hex: "17", value: 23),
    KnownAnswer(hex: "1818", value: 24),
    KnownAnswer(hex: "1819", value: 25),
    KnownAnswer(hex: "1864", value: 100),
    KnownAnswer(hex: "1903e8", value: 1000),
    KnownAnswer(hex: "1a000f4240", value: 1_000_000),
    KnownAnswer(hex: "1b000000e8d4a51000", value: 1_000_000_000_000),
    KnownAnswer(hex: "1bffffffffffffffff", value: 18_446_744_073_709_551_615),
    KnownAnswer(hex: "3bffffffffffffffff", value: .negative(UInt64.max)),
    KnownAnswer(hex: "20", value: -1),
    KnownAnswer(hex: "29", value: -10),
    KnownAnswer(hex: "3863", value: -100),
    KnownAnswer(hex: "3903e7", value: -1000),
    // Simple values.
    KnownAnswer(hex: "f4", value: false),
    KnownAnswer(hex: "f5", value: true),
    KnownAnswer(hex: "f6", value: .null),
    KnownAnswer(hex: "f7", value: .undefined),
    // Byte strings.
    KnownAnswer(hex: "40", value: .byteString([])),
    KnownAnswer(hex: "4401020304", value: .byteString([1, 2, 3, 4])),
    // Text strings.
    KnownAnswer(hex: "60", value: ""),
    KnownAnswer(hex: "6161", value: "a"),
    KnownAnswer(hex: "6449455446", value: "IETF"),
    KnownAnswer(hex: "62225c", value: "\"\\"),
    KnownAnswer(hex: "62c3bc", value: "\u{00fc}"),
    KnownAnswer(hex: "63e6b0b4", value: "\u{6c34}"),
    KnownAnswer(hex: "64f0908591", value: "\u{10151}"),
    // Arrays.
    KnownAnswer(hex: "80", value: []),
    KnownAnswer(hex: "83010203", value: [1, 2, 3]),
    KnownAnswer(hex: "8301820203820405", value: [1, [2, 3], [4, 5]]),
    KnownAnswer(
        hex: "98190102030405060708090a0b0c0d0e0f101112131415161718181819",
        value: .array((1...25).map { CBORValue($0) })
    ),
    // Maps.
    KnownAnswer(hex: "a0", value: [:]),
    KnownAnswer(hex: "a201020304", value: [1: 2, 3: 4]),
    KnownAnswer(hex: "a26161016162820203", value: ["a": 1, "b": [2, 3]]),
    KnownAnswer(hex: "826161a161626163", value: ["a", ["b": "c"]]),
    KnownAnswer(
        hex: "a56161614161626142616361436164614461656145",
        value: ["a": "A", "b": "B", "c": "C", "d": "D", "e": "E"]
    ),
]

@Suite("RFC 8949 Appendix A known answers")
struct CBORKnownAnswerTests {
    @Test("decodes", arguments: rfc8949Vectors)
    func decodes(_ vector: KnownAnswer) throws {
        #expect(try CBORDecoder.decode(hex(vector.hex)) == vector.value)
    }

    @Test("encodes", arguments: rfc8949Vectors)
    func encodes(_ vector: KnownAnswer) {
        #expect(hexString(CBOREncoder.encode(vector.value)) == vector.hex)
        #expect(vector.value.encoded() == hex(vector.hex))
    }

    @Test("is canonical", arguments: rfc8949Vectors)
    func isCanonical(_ vector: KnownAnswer) {
        #expect(CBORDecoder.isCanonical(hex(vector.hex)))
    }
}
