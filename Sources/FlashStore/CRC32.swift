/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, initial value and final XOR 0xFFFFFFFF), the
/// checksum of zlib and PNG. `CRC32.checksum("123456789".utf8) == 0xCBF43926`.
package enum CRC32 {
    package static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    /// Feeds `bytes` into a running CRC register (start with 0xFFFFFFFF, finish by inverting).
    package static func update(_ crc: UInt32, _ bytes: some Sequence<UInt8>) -> UInt32 {
        var c = crc
        for b in bytes { c = table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c
    }

    /// The CRC-32 of `bytes`.
    package static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 { ~update(0xFFFF_FFFF, bytes) }
}

extension CRC32 {
    /// Where one flipped bit explains a CRC mismatch.
    package enum BitError: Equatable, Sendable {
        /// Bit `bit` (0 = least significant) of byte `byte` of the message.
        case message(byte: Int, bit: Int)
        /// A bit of the stored checksum itself; the message is intact.
        case checksum
    }

    /// Messages up to this many bytes have Hamming distance 3 or more under CRC-32: every single flipped bit has
    /// a syndrome of its own, so it is located without ambiguity (91,607 bits, Koopman's tables).
    package static let singleBitCorrectableBytes = 11_450

    /// The one flipped bit that turns a message of `count` bytes whose CRC-32 is `computed` into one whose CRC-32
    /// is `stored`, or `nil` when no single bit does (two or more bits differ, or the message is too long for the
    /// answer to be unique). CRC-32 is linear: flipping bit `b` of byte `j` changes the checksum by the register
    /// value `1 << b` carried through the `8 (count - j)` remaining bit steps, whatever the message holds.
    package static func locateSingleBitError(count: Int, computed: UInt32, stored: UInt32) -> BitError? {
        let syndrome = computed ^ stored
        if syndrome == 0 { return nil }
        if syndrome.nonzeroBitCount == 1 { return .checksum }
        guard count > 0, count <= singleBitCorrectableBytes else { return nil }
        // carried[b]: the change a flip of bit b of byte j makes, for j walking back from the last byte.
        var carried = (0..<8).map { b in step(UInt32(1) << b) }
        var j = count - 1
        while true {
            for b in 0..<8 where carried[b] == syndrome { return .message(byte: j, bit: b) }
            if j == 0 { return nil }
            j -= 1
            for b in 0..<8 { carried[b] = step(carried[b]) }
        }
    }

    /// Eight bit steps of the CRC register with a zero input byte.
    private static func step(_ register: UInt32) -> UInt32 { table[Int(register & 0xFF)] ^ (register >> 8) }
}
