/// Text from outside (relying-party ids, user names, display names, file contents) made safe to print on a
/// terminal: a relying party must not be able to move the cursor, repaint the owner's prompt to show another site,
/// or set the window title.
package enum TerminalText {
    /// Replaces every control character (C0, DEL, C1) and every bidirectional override or isolate with a visible
    /// escape (`\x1b`, `\u{202e}`), and a backslash with two, so that the printed text is unambiguous.
    package static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            if scalar == "\\" {
                out += "\\\\"
            } else if scalar.value < 0x80 && needsEscape(scalar) {
                out += "\\x" + hex(scalar.value, digits: 2)
            } else if needsEscape(scalar) {
                out += "\\u{" + hex(scalar.value, digits: 4) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true  // C0, DEL, C1 (0x9B is a one-byte CSI)
        case 0x5C: true  // backslash, so that an escape in the output always means one in the input
        case 0x200E, 0x200F, 0x061C: true  // directional marks
        case 0x202A...0x202E, 0x2066...0x2069: true  // bidirectional embeddings, overrides, isolates
        default: false
        }
    }

    static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}

extension StringProtocol {
    /// The text without the spaces, tabs and carriage returns at either end (typed answers, comma-separated
    /// lists, PEM lines).
    package func trimmingBlanks() -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        return String(drop(while: blank).reversed().drop(while: blank).reversed())
    }
}
