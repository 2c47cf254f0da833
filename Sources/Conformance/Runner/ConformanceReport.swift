import CTAPCBOR
package import ControlProtocol
import FIDOClient

/// Who was tested: getInfo and CTAPHID_INIT as the key answered them.
package struct DeviceIdentity: Sendable {
    package var address: String
    package var aaguid: String
    package var versions: [String]
    package var extensions: [String]
    package var options: [String: Bool]
    package var pinUvAuthProtocols: [Int]
    package var deviceVersion: String?
    package var capabilities: UInt8?

    init(address: String, info: AuthenticatorInfo, hid: HIDInitResponse?) {
        self.address = address
        let a = Hex.string(info.aaguid)
        aaguid =
            a.count == 32
            ? [
                a.prefix(8), a.dropFirst(8).prefix(4), a.dropFirst(12).prefix(4), a.dropFirst(16).prefix(4),
                a.dropFirst(20),
            ]
            .joined(separator: "-") : a
        versions = info.versions
        extensions = info.extensions
        options = info.options
        pinUvAuthProtocols = info.pinUvAuthProtocols
        deviceVersion = hid.map { "\($0.deviceVersion.major).\($0.deviceVersion.minor).\($0.deviceVersion.build)" }
        capabilities = hid?.capabilities
    }
}

/// The results of a run, as JSON and Markdown.
package struct ConformanceReport: Sendable {
    package var device: DeviceIdentity
    package var results: [CheckResult]
    package var notes: [String]
    /// The key's choices where the specification leaves one.
    package var observations: [String] = []
    package var allowDestructive: Bool
    package var seconds: Double
    /// The key stopped answering during the run: the checks after that were not run.
    package var stoppedAnswering = false
    /// The checks after which the key stopped answering (each failed); all but the last of a run that stopped were
    /// followed by a power cycle that brought the key back.
    package var hungAfter: [String] = []

    package func count(_ status: CheckStatus, in group: CheckGroup? = nil) -> Int {
        results.filter { $0.status == status && (group == nil || $0.group == group) }.count
    }

    package var failed: Int { count(.failed) }

    var groups: [CheckGroup] { CheckGroup.allCases.filter { group in results.contains { $0.group == group } } }

    package var json: JSONValue {
        var device: [String: JSONValue] = [
            "address": .string(self.device.address), "aaguid": .string(self.device.aaguid),
            "versions": .array(self.device.versions.map { .string($0) }),
            "extensions": .array(self.device.extensions.map { .string($0) }),
            "options": .object(self.device.options.mapValues { .boolean($0) }),
            "pinUvAuthProtocols": .array(self.device.pinUvAuthProtocols.map { .integer(Int64($0)) }),
        ]
        if let version = self.device.deviceVersion { device["deviceVersion"] = .string(version) }
        if let capabilities = self.device.capabilities { device["capabilities"] = .integer(Int64(capabilities)) }
        let summary = groups.map { group -> JSONValue in
            .object([
                "group": .string(group.rawValue), "title": .string(group.title),
                "passed": .integer(Int64(count(.passed, in: group))),
                "failed": .integer(Int64(count(.failed, in: group))),
                "skipped": .integer(Int64(count(.skipped, in: group))),
            ])
        }
        let checks = results.map { result -> JSONValue in
            var object: [String: JSONValue] = [
                "id": .string(result.id), "group": .string(result.group.rawValue), "section": .string(result.section),
                "title": .string(result.title), "status": .string(result.status.rawValue),
                "milliseconds": .integer(Int64(result.milliseconds.rounded())),
            ]
            if let message = result.message { object["message"] = .string(message) }
            if let expected = result.expected { object["expected"] = .string(expected) }
            if let actual = result.actual { object["actual"] = .string(actual) }
            return .object(object)
        }
        return .object([
            "tool": "fidosim conform", "device": .object(device), "allowDestructive": .boolean(allowDestructive),
            "stoppedAnswering": .boolean(stoppedAnswering),
            "hungAfter": .array(hungAfter.map { .string($0) }),
            "seconds": .integer(Int64(seconds.rounded())),
            "totals": .object([
                "passed": .integer(Int64(count(.passed))), "failed": .integer(Int64(failed)),
                "skipped": .integer(Int64(count(.skipped))),
            ]),
            "groups": .array(summary), "checks": .array(checks), "notes": .array(notes.map { .string($0) }),
            "observations": .array(observations.map { .string($0) }),
        ])
    }

    package var markdown: String {
        func cell(_ text: String) -> String {
            text.map { $0 == "|" ? "\\|" : ($0 == "\n" ? " " : String($0)) }.joined()
        }
        var lines = [
            "# CTAP conformance report", "",
            "- Device: `\(device.address)`, AAGUID `\(device.aaguid)`"
                + (device.deviceVersion.map { ", device version \($0)" } ?? ""),
            "- Versions: \(device.versions.joined(separator: ", "))",
            "- Extensions: \(device.extensions.isEmpty ? "none" : device.extensions.joined(separator: ", "))",
            "- Options: "
                + device.options.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", "),
            "- Destructive checks: \(allowDestructive ? "run" : "not run")",
            "- Result: \(count(.passed)) passed, \(failed) failed, \(count(.skipped)) skipped in \(Int(seconds.rounded())) s"
                + (stoppedAnswering ? " (the key stopped answering: the run is incomplete)" : ""),
        ]
        if !hungAfter.isEmpty {
            lines.append(
                "- The key stopped answering after: \(hungAfter.joined(separator: ", ")) (a power cycle was tried after each)"
            )
        }
        lines += ["", "| group | passed | failed | skipped |", "|---|---|---|---|"]
        for group in groups {
            lines.append(
                "| \(group.title) | \(count(.passed, in: group)) | \(count(.failed, in: group)) | \(count(.skipped, in: group)) |"
            )
        }
        let failures = results.filter { $0.status == .failed }
        if !failures.isEmpty {
            lines += ["", "## Failures", ""]
            for result in failures {
                lines.append("### \(result.id): \(result.title) (\(result.section))")
                lines.append("")
                if let message = result.message { lines.append("- \(message)") }
                if let expected = result.expected { lines.append("- expected: `\(expected)`") }
                if let actual = result.actual { lines.append("- actual: `\(actual)`") }
                lines.append("")
            }
        }
        lines += ["", "## Checks", "", "| check | section | result | note |", "|---|---|---|---|"]
        for result in results {
            lines.append(
                "| \(result.id) | \(result.section) | \(result.status.rawValue) | \(cell(result.message ?? "")) |"
            )
        }
        if !notes.isEmpty {
            lines += ["", "## Measured", ""] + notes.map { "- \($0)" }
        }
        if !observations.isEmpty {
            lines +=
                ["", "## Choices observed (where the specification leaves one)", ""] + observations.map { "- \($0)" }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
