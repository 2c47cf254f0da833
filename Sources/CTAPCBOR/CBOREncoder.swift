/// Encodes ``CBORValue``s in the CTAP2 canonical CBOR encoding form (CTAP 2.1 §8).
///
/// The form is:
/// - integers, lengths and counts use the shortest head that holds them;
/// - strings, arrays and maps have definite lengths;
/// - map keys are sorted by major type, then by the length of their encoding, then byte-wise by their encoding;
/// - `false`, `true`, `null` and `undefined` are 0xf4, 0xf5, 0xf6 and 0xf7.
///
/// Text strings are written as their own UTF-8 bytes, without normalization.
package enum CBOREncoder {
    /// Returns the CTAP2 canonical encoding of `value`.
    package static func encode(_ value: CBORValue) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(128)
        self.append(value, to: &output)
        return output
    }

    /// Appends the CTAP2 canonical encoding of `value` to `output` (after a status byte, say, without copying the
    /// encoding into a new array).
    package static func encode(_ value: CBORValue, appendingTo output: inout [UInt8]) {
        self.append(value, to: &output)
    }

    /// Whether the encoded key `lhs` sorts before the encoded key `rhs` in CTAP2 canonical order.
    ///
    /// Keys of a lower major type come first, then shorter encodings, then the byte-wise lower encoding.
    package static func canonicalKeyPrecedes(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        let lhsMajor = lhs.first.map { $0 >> 5 } ?? 0
        let rhsMajor = rhs.first.map { $0 >> 5 } ?? 0
        if lhsMajor != rhsMajor {
            return lhsMajor < rhsMajor
        }
        if lhs.count != rhs.count {
            return lhs.count < rhs.count
        }
        return lhs.lexicographicallyPrecedes(rhs)
    }

    static func append(_ value: CBORValue, to output: inout [UInt8]) {
        switch value {
        case .unsigned(let n):
            self.appendHead(majorType: 0, argument: n, to: &output)
        case .negative(let n):
            self.appendHead(majorType: 1, argument: n, to: &output)
        case .byteString(let bytes):
            self.appendHead(majorType: 2, argument: UInt64(bytes.count), to: &output)
            output.append(contentsOf: bytes)
        case .textString(let text):
            let utf8 = text.utf8
            self.appendHead(majorType: 3, argument: UInt64(utf8.count), to: &output)
            output.append(contentsOf: utf8)
        case .array(let elements):
            self.appendHead(majorType: 4, argument: UInt64(elements.count), to: &output)
            for element in elements {
                self.append(element, to: &output)
            }
        case .map(let entries):
            self.appendHead(majorType: 5, argument: UInt64(entries.count), to: &output)
            // CTAP's maps are keyed by integers (commands, responses, COSE keys) or by text: for both, canonical
            // order is found without encoding every key first. Integers sort by major type (unsigned before
            // negative), then by argument, since a shortest-form head grows with its argument; text sorts by
            // UTF-8 length, then bytes.
            if entries.keys.allSatisfy({ $0.integerSortKey != nil }) {
                // Unsigned n sorts as n, negative n after every unsigned: one integer to compare per key.
                let sorted = entries.map { entry in
                    let key = entry.key.integerSortKey!
                    return (order: (UInt128(key.major) << 64) | UInt128(key.argument), entry: entry)
                }.sorted { $0.order < $1.order }
                for (_, entry) in sorted {
                    self.append(entry.key, to: &output)
                    self.append(entry.value, to: &output)
                }
            } else if entries.keys.allSatisfy({ $0.textValue != nil }) {
                let sorted = entries.sorted {
                    let l = $0.key.textValue!.utf8
                    let r = $1.key.textValue!.utf8
                    return l.count != r.count ? l.count < r.count : l.lexicographicallyPrecedes(r)
                }
                for (key, value) in sorted {
                    self.append(key, to: &output)
                    self.append(value, to: &output)
                }
            } else {
                let sorted = entries.map { (key: self.encode($0.key), value: $0.value) }
                    .sorted { self.canonicalKeyPrecedes($0.key, $1.key) }
                for entry in sorted {
                    output.append(contentsOf: entry.key)
                    self.append(entry.value, to: &output)
                }
            }
        case .boolean(let flag):
            output.append(flag ? 0xf5 : 0xf4)
        case .null:
            output.append(0xf6)
        case .undefined:
            output.append(0xf7)
        }
    }

    /// Appends the shortest head for `majorType` and `argument`.
    @inline(__always)
    static func appendHead(majorType: UInt8, argument: UInt64, to output: inout [UInt8]) {
        let major = majorType << 5
        switch argument {
        case 0..<24:
            output.append(major | UInt8(argument))
        case 24...0xff:
            output.append(major | 24)
            output.append(UInt8(argument))
        case 0x100...0xffff:
            output.append(major | 25)
            self.appendBigEndian(argument, byteCount: 2, to: &output)
        case 0x1_0000...0xffff_ffff:
            output.append(major | 26)
            self.appendBigEndian(argument, byteCount: 4, to: &output)
        default:
            output.append(major | 27)
            self.appendBigEndian(argument, byteCount: 8, to: &output)
        }
    }

    private static func appendBigEndian(_ value: UInt64, byteCount: Int, to output: inout [UInt8]) {
        for index in stride(from: byteCount - 1, through: 0, by: -1) {
            output.append(UInt8(truncatingIfNeeded: value >> (index * 8)))
        }
    }
}

extension CBORValue {
    /// An integer's major type and argument, for sorting map keys; nil for anything else.
    fileprivate var integerSortKey: (major: UInt8, argument: UInt64)? {
        switch self {
        case .unsigned(let n): (0, n)
        case .negative(let n): (1, n)
        default: nil
        }
    }
}
