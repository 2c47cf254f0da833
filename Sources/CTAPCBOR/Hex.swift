/// Hexadecimal text for bytes and back: the one helper every module that shows or reads bytes uses.
package enum Hex {
    static let digits = Array("0123456789abcdef".utf8)
    static let upperDigits = Array("0123456789ABCDEF".utf8)

    /// Two digits per byte, lower case unless `uppercase`.
    package static func string(_ bytes: some Sequence<UInt8>, uppercase: Bool = false) -> String {
        let table = uppercase ? upperDigits : digits
        var out: [UInt8] = []
        for byte in bytes {
            out.append(table[Int(byte >> 4)])
            out.append(table[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Two digits for one byte.
    package static func string(_ byte: UInt8, uppercase: Bool = false) -> String {
        string(CollectionOfOne(byte), uppercase: uppercase)
    }

    /// The bytes of an even number of hex digits (either case), or nil.
    package static func bytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[i]), let low = value(digits[i + 1]) else { return nil }
            out.append(high << 4 | low)
        }
        return out
    }

    static func value(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
