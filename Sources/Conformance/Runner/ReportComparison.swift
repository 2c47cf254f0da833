package import ControlProtocol

/// `fidosim conform --compare A.json B.json`: where two conformance reports differ, check by check. "Does my
/// virtual key behave like my real one" is one command (firmware-spec/conformance.md, "Comparing reports").
///
/// A check differs when its status, its expected or actual answer, or its message differs; numbers in messages
/// (milliseconds, channel ids, counts) are not compared, so two runs of one key compare equal. The identity (AAGUID,
/// versions, extensions, options, PIN protocols) and the observed choices are compared too.
package struct ReportComparison: Sendable {
    package var differences: [String] = []
    /// How many checks both reports ran.
    package var common = 0

    package init(_ a: JSONValue, _ b: JSONValue) throws(ReportComparisonError) {
        for report in [a, b] {
            guard report["tool"]?.stringValue == "fidosim conform", report["checks"]?.arrayValue != nil else {
                throw ReportComparisonError("not a report.json of fidosim conform")
            }
        }
        for member in ["aaguid", "versions", "extensions", "options", "pinUvAuthProtocols"] {
            let left = a["device"]?[member]
            let right = b["device"]?[member]
            if left != right {
                differences.append("device \(member): \(Self.show(left)) | \(Self.show(right))")
            }
        }
        let left = Self.checks(a)
        let right = Self.checks(b)
        for (id, check) in left.list {
            guard let other = right.byId[id] else {
                differences.append("\(id): only in the first report (\(check["status"]?.stringValue ?? "?"))")
                continue
            }
            common += 1
            let status = check["status"]?.stringValue ?? "?"
            let otherStatus = other["status"]?.stringValue ?? "?"
            if status != otherStatus {
                differences.append("\(id): \(Self.outcome(check)) | \(Self.outcome(other))")
            } else if check["expected"] != other["expected"] || check["actual"] != other["actual"]
                || Self.masked(check["message"]?.stringValue) != Self.masked(other["message"]?.stringValue)
            {
                differences.append("\(id): \(Self.outcome(check)) | \(Self.outcome(other))")
            }
        }
        for (id, check) in right.list where left.byId[id] == nil {
            differences.append("\(id): only in the second report (\(check["status"]?.stringValue ?? "?"))")
        }
        let observedA = Set((a["observations"]?.arrayValue ?? []).compactMap(\.stringValue))
        let observedB = Set((b["observations"]?.arrayValue ?? []).compactMap(\.stringValue))
        for text in observedA.subtracting(observedB).sorted() {
            differences.append("observed only in the first: \(text)")
        }
        for text in observedB.subtracting(observedA).sorted() {
            differences.append("observed only in the second: \(text)")
        }
    }

    static func checks(_ report: JSONValue) -> (list: [(String, JSONValue)], byId: [String: JSONValue]) {
        var list: [(String, JSONValue)] = []
        var byId: [String: JSONValue] = [:]
        for check in report["checks"]?.arrayValue ?? [] {
            guard let id = check["id"]?.stringValue, byId[id] == nil else { continue }
            list.append((id, check))
            byId[id] = check
        }
        return (list, byId)
    }

    /// `failed: message [expected E, got A]`.
    static func outcome(_ check: JSONValue) -> String {
        var text = check["status"]?.stringValue ?? "?"
        if let message = check["message"]?.stringValue { text += ": \(message)" }
        if let expected = check["expected"]?.stringValue, let actual = check["actual"]?.stringValue {
            text += " [expected \(expected), got \(actual)]"
        }
        return text
    }

    /// The message with every run of digits (and of hex digits mixed with them) as `#`.
    static func masked(_ text: String?) -> String? {
        guard let text else { return nil }
        var out = ""
        var inNumber = false
        for character in text {
            let numeric = character.isNumber || (inNumber && character.isHexDigit)
            if numeric {
                if !inNumber { out.append("#") }
                inNumber = true
            } else {
                inNumber = false
                out.append(character)
            }
        }
        return out
    }

    static func show(_ value: JSONValue?) -> String { value?.encoded ?? "absent" }
}

package struct ReportComparisonError: Error, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}
