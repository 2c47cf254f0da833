import CTAPCBOR

/// Parses hex digits into bytes, ignoring spaces; a malformed string is a bug in the test.
func hex(_ text: String) -> [UInt8] {
    let digits = text.filter { !$0.isWhitespace }
    precondition(digits.count.isMultiple(of: 2), "odd number of hex digits in \(text)")
    var bytes: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        guard let byte = UInt8(digits[index..<next], radix: 16) else {
            preconditionFailure("bad hex digits in \(text)")
        }
        bytes.append(byte)
        index = next
    }
    return bytes
}

/// Formats bytes as lowercase hex digits.
func hexString(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { $0 < 0x10 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}

/// A small deterministic generator (SplitMix64) so fuzz runs are reproducible.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        self.state = seed
    }

    mutating func next() -> UInt64 {
        self.state &+= 0x9e37_79b9_7f4a_7c15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
