/// A CBOR data item in the subset that CTAP2 uses.
///
/// CTAP2 messages use integers, byte and text strings, arrays, maps, booleans, `null` and `undefined`.
/// Tags, floating-point numbers and other simple values are not representable, and ``CBORDecoder``
/// rejects them.
///
/// Two values are equal when they have the same case and equal payloads. Text strings compare with Swift
/// `String` semantics (Unicode canonical equivalence), while ``CBOREncoder`` always emits a string's own
/// UTF-8 bytes, so a value decoded from the wire re-encodes to the same bytes.
package enum CBORValue: Sendable, Hashable {
    /// An unsigned integer (major type 0).
    case unsigned(UInt64)
    /// A negative integer (major type 1) whose value is `-1 - n`.
    case negative(UInt64)
    /// A byte string (major type 2).
    case byteString([UInt8])
    /// A UTF-8 text string (major type 3).
    case textString(String)
    /// An array of data items (major type 4).
    case array([CBORValue])
    /// A map of data items (major type 5); the encoder writes the keys in CTAP2 canonical order.
    case map([CBORValue: CBORValue])
    /// The simple values `false` (0xf4) and `true` (0xf5).
    case boolean(Bool)
    /// The simple value `null` (0xf6).
    case null
    /// The simple value `undefined` (0xf7).
    case undefined
}

extension CBORValue {
    /// Creates an integer value: ``unsigned(_:)`` for zero and above, ``negative(_:)`` below zero.
    package init(_ value: Int) {
        if value >= 0 {
            self = .unsigned(UInt64(value))
        } else {
            // -1 - value is in 0...Int.max for every negative Int, so this cannot overflow.
            self = .negative(UInt64(-1 - value))
        }
    }

    /// Creates a byte string value from a sequence of bytes.
    package init(bytes: some Sequence<UInt8>) {
        self = .byteString(Array(bytes))
    }

    /// The integer this value holds, or `nil` if it is not an integer or does not fit in `Int`.
    package var intValue: Int? {
        switch self {
        case .unsigned(let n):
            return n <= UInt64(Int.max) ? Int(n) : nil
        case .negative(let n):
            return n <= UInt64(Int.max) ? -1 - Int(n) : nil
        default:
            return nil
        }
    }

    /// The bytes of a byte string, or `nil` for any other kind of value.
    package var bytesValue: [UInt8]? {
        if case .byteString(let bytes) = self { bytes } else { nil }
    }

    /// The string of a text string, or `nil` for any other kind of value.
    package var textValue: String? {
        if case .textString(let text) = self { text } else { nil }
    }

    /// The elements of an array, or `nil` for any other kind of value.
    package var arrayValue: [CBORValue]? {
        if case .array(let elements) = self { elements } else { nil }
    }

    /// The entries of a map, or `nil` for any other kind of value.
    package var mapValue: [CBORValue: CBORValue]? {
        if case .map(let entries) = self { entries } else { nil }
    }

    /// The Boolean of `true` or `false`, or `nil` for any other kind of value.
    package var boolValue: Bool? {
        if case .boolean(let flag) = self { flag } else { nil }
    }

    /// Whether this value is `null`.
    package var isNull: Bool {
        if case .null = self { true } else { false }
    }

    /// Looks up an integer key in a map; `nil` if this is not a map or the key is absent.
    package subscript(key: Int) -> CBORValue? {
        self.mapValue?[CBORValue(key)]
    }

    /// Looks up a text key in a map; `nil` if this is not a map or the key is absent.
    package subscript(key: String) -> CBORValue? {
        self.mapValue?[.textString(key)]
    }

    /// The CBOR major type (0...7) that this value encodes with.
    package var majorType: UInt8 {
        switch self {
        case .unsigned: 0
        case .negative: 1
        case .byteString: 2
        case .textString: 3
        case .array: 4
        case .map: 5
        case .boolean, .null, .undefined: 7
        }
    }

    /// The CTAP2 canonical encoding of this value; the same as `CBOREncoder.encode(self)`.
    package func encoded() -> [UInt8] {
        CBOREncoder.encode(self)
    }
}
