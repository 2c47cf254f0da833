import CTAPCBOR

/// Parses hex digits into bytes, ignoring spaces; a malformed string is a bug in the test.
func hex(_ text: String) -> [UInt8] {
    guard let bytes = Hex.bytes(String(text.filter { !$0.isWhitespace })) else {
        preconditionFailure("bad hex digits in \(text)")
    }
    return bytes
}

/// Formats bytes as lowercase hex digits.
func hexString(_ bytes: some Sequence<UInt8>) -> String {
    Hex.string(bytes)
}
