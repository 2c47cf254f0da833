extension CBORValue: CustomStringConvertible {
    /// The value in CBOR diagnostic notation (RFC 8949 §8), with map keys in canonical order.
    ///
    /// For example `{1: h'0102', "rk": true, 3: [-7, -8]}` prints as `{1: h'0102', 3: [-7, -8], "rk": true}`.
    package var description: String {
        var output = ""
        self.writeDiagnostic(to: &output)
        return output
    }

    private func writeDiagnostic(to output: inout String) {
        switch self {
        case .unsigned(let n):
            output += String(n)
        case .negative(let n):
            // -1 - n; n + 1 overflows UInt64 only for n == UInt64.max.
            output += n == .max ? "-18446744073709551616" : "-" + String(n + 1)
        case .byteString(let bytes):
            output += "h'" + Hex.string(bytes) + "'"
        case .textString(let text):
            Self.writeQuoted(text, to: &output)
        case .array(let elements):
            output += "["
            for (index, element) in elements.enumerated() {
                output += index == 0 ? "" : ", "
                element.writeDiagnostic(to: &output)
            }
            output += "]"
        case .map(let entries):
            output += "{"
            let sorted = entries.map { (key: $0.key.encoded(), entry: $0) }
                .sorted { CBOREncoder.canonicalKeyPrecedes($0.key, $1.key) }
            for (index, item) in sorted.enumerated() {
                output += index == 0 ? "" : ", "
                item.entry.key.writeDiagnostic(to: &output)
                output += ": "
                item.entry.value.writeDiagnostic(to: &output)
            }
            output += "}"
        case .boolean(let flag):
            output += flag ? "true" : "false"
        case .null:
            output += "null"
        case .undefined:
            output += "undefined"
        }
    }

    /// Writes `text` as a JSON-style string literal.
    private static func writeQuoted(_ text: String, to output: inout String) {
        output += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"":
                output += "\\\""
            case "\\":
                output += "\\\\"
            case "\n":
                output += "\\n"
            case "\r":
                output += "\\r"
            case "\t":
                output += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7f:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
