/// A JSON value as the control protocol exchanges it.
///
/// Numbers without a fraction or exponent that fit in 64 bits are ``integer(_:)``; every other number is
/// ``number(_:)``. Objects keep no order: the encoder writes their keys sorted, so output is deterministic.
package enum JSONValue: Sendable, Equatable, Hashable {
    case null
    case boolean(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    package subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    package var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    package var boolValue: Bool? {
        if case .boolean(let b) = self { return b }
        return nil
    }

    /// The value as an integer: an ``integer(_:)``, or a ``number(_:)`` with no fractional part.
    package var integerValue: Int64? {
        switch self {
        case .integer(let i): return i
        case .number(let d) where d.rounded() == d && abs(d) < 9.0e15: return Int64(d)
        default: return nil
        }
    }

    package var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    package var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// The JSON type's name, for error messages.
    package var typeName: String {
        switch self {
        case .null: "null"
        case .boolean: "boolean"
        case .integer, .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    package init(stringLiteral value: String) { self = .string(value) }
    package init(integerLiteral value: Int64) { self = .integer(value) }
    package init(booleanLiteral value: Bool) { self = .boolean(value) }
    package init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    package init(nilLiteral: ()) { self = .null }
}

extension JSONValue {
    /// An integer value from any binary integer (saturating at the bounds of Int64).
    package init(_ value: some BinaryInteger) { self = .integer(Int64(clamping: value)) }

    /// The compact JSON text of this value (no spaces, object keys sorted, non-ASCII kept as UTF-8).
    package var encoded: String {
        var out: [UInt8] = []
        encode(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    func encode(into out: inout [UInt8]) {
        switch self {
        // Bytes are appended straight from each string's UTF-8, without an array made for each piece: the control
        // fuzz target spent most of its time allocating them.
        case .null: out.append(contentsOf: "null".utf8)
        case .boolean(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .integer(let i): out.append(contentsOf: String(i).utf8)
        case .number(let d):
            // JSON has no NaN or infinity.
            out.append(contentsOf: (d.isFinite ? "\(d)" : "null").utf8)
        case .string(let s): Self.encode(string: s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                element.encode(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, key) in members.keys.sorted().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.encode(string: key, into: &out)
                out.append(UInt8(ascii: ":"))
                members[key]!.encode(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func encode(string: String, into out: inout [UInt8]) {
        func hexDigit(_ nibble: UInt8) -> UInt8 {
            nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
        }
        out.append(UInt8(ascii: "\""))
        // C1 controls and bidirectional overrides are escaped too (\u0085, \u202e): JSON lines end up on terminals.
        if string.utf8.contains(where: { $0 >= 0xC2 }),
            string.unicodeScalars.contains(where: { $0.value >= 0x80 && TerminalText.needsEscape($0) })
        {
            for scalar in string.unicodeScalars {
                guard scalar.value >= 0x80 else {
                    encode(string: String(scalar), unquotedInto: &out)
                    continue
                }
                if TerminalText.needsEscape(scalar) {
                    out.append(contentsOf: "\\u".utf8)
                    for shift in stride(from: 12, through: 0, by: -4) {
                        out.append(hexDigit(UInt8(truncatingIfNeeded: scalar.value >> UInt32(shift)) & 0xF))
                    }
                } else {
                    out.append(contentsOf: String(scalar).utf8)
                }
            }
            out.append(UInt8(ascii: "\""))
            return
        }
        encode(string: string, unquotedInto: &out)
        out.append(UInt8(ascii: "\""))
    }

    static func encode(string: String, unquotedInto out: inout [UInt8]) {
        func hexDigit(_ nibble: UInt8) -> UInt8 {
            nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
        }
        for byte in string.utf8 {
            let escaped: UInt8
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): escaped = byte
            case 0x0A: escaped = UInt8(ascii: "n")
            case 0x0D: escaped = UInt8(ascii: "r")
            case 0x09: escaped = UInt8(ascii: "t")
            case 0x00..<0x20, 0x7F:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hexDigit(byte >> 4))
                out.append(hexDigit(byte & 0xF))
                continue
            default:
                out.append(byte)
                continue
            }
            out.append(UInt8(ascii: "\\"))
            out.append(escaped)
        }
    }
}

extension JSONValue {
    /// JSON text indented by two spaces per level (for files people read), object keys sorted.
    package var prettyEncoded: String {
        var out: [UInt8] = []
        pretty(into: &out, indent: 0)
        out.append(0x0A)
        return String(decoding: out, as: UTF8.self)
    }

    func pretty(into out: inout [UInt8], indent: Int) {
        let pad = { (n: Int) in repeatElement(UInt8(0x20), count: n) }
        switch self {
        case .array(let elements) where !elements.isEmpty:
            out.append(contentsOf: "[\n".utf8)
            for (i, element) in elements.enumerated() {
                out.append(contentsOf: pad(indent + 2))
                element.pretty(into: &out, indent: indent + 2)
                out.append(contentsOf: (i + 1 < elements.count ? ",\n" : "\n").utf8)
            }
            out.append(contentsOf: pad(indent))
            out.append(UInt8(ascii: "]"))
        case .object(let members) where !members.isEmpty:
            out.append(contentsOf: "{\n".utf8)
            for (i, key) in members.keys.sorted().enumerated() {
                out.append(contentsOf: pad(indent + 2))
                Self.encode(string: key, into: &out)
                out.append(contentsOf: ": ".utf8)
                members[key]!.pretty(into: &out, indent: indent + 2)
                out.append(contentsOf: (i + 1 < members.count ? ",\n" : "\n").utf8)
            }
            out.append(contentsOf: pad(indent))
            out.append(UInt8(ascii: "}"))
        default:
            encode(into: &out)
        }
    }
}
