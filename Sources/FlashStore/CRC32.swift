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
