/// base64url (RFC 4648 §5), as WebDriver and WebAuthn use it: written without padding; read with or without.
/// The `standard:` variants are RFC 4648 §4 base64 (`+` and `/`), as Chrome DevTools writes binary values.
package enum Base64URL {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// base64 or base64url of `bytes`, with `=` padding when `padded`.
    package static func encode(_ bytes: [UInt8], standard: Bool, padded: Bool) -> String {
        var text = encode(bytes)
        if standard {
            text = String(
                decoding: text.utf8.map {
                    $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : $0 == UInt8(ascii: "_") ? UInt8(ascii: "/") : $0
                },
                as: UTF8.self
            )
        }
        if padded { text += String(repeating: "=", count: (4 - text.utf8.count % 4) % 4) }
        return text
    }

    /// The bytes of a standard base64 text (with or without padding); nil as for ``decode(_:)``.
    package static func decodeStandard(_ text: String) -> [UInt8]? {
        guard !text.utf8.contains(UInt8(ascii: "-")) && !text.utf8.contains(UInt8(ascii: "_")) else { return nil }
        let url = text.utf8.map {
            $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0
        }
        return decode(String(decoding: url, as: UTF8.self))
    }

    package static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= bytes.count {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [
                alphabet[Int(v >> 18)], alphabet[Int(v >> 12 & 63)], alphabet[Int(v >> 6 & 63)], alphabet[Int(v & 63)],
            ]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let v = UInt32(bytes[i]) << 16
            out += [alphabet[Int(v >> 18)], alphabet[Int(v >> 12 & 63)]]
        } else if rest == 2 {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(v >> 18)], alphabet[Int(v >> 12 & 63)], alphabet[Int(v >> 6 & 63)]]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of a base64url text, or nil when it has characters outside the alphabet, a bad length or
    /// non-zero unused bits.
    package static func decode(_ text: String) -> [UInt8]? {
        var chars = Array(text.utf8)
        while chars.last == UInt8(ascii: "=") { chars.removeLast() }
        guard chars.count % 4 != 1, text.utf8.count - chars.count <= 2 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for c in chars {
            let v: UInt8
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = c - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = c - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): v = 62
            case UInt8(ascii: "_"): v = 63
            default: return nil
            }
            buffer = buffer << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // Unused trailing bits must be zero (one encoding per byte string).
        guard buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }
}
