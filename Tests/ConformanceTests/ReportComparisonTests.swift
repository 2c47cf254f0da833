import ControlProtocol
import Testing

@testable import Conformance

@Suite struct ReportComparisonTests {
    func report(_ checks: [JSONValue], aaguid: String = "f1d0", observations: [String] = []) -> JSONValue {
        [
            "tool": "fidosim conform",
            "device": ["aaguid": .string(aaguid), "versions": ["FIDO_2_1"]],
            "checks": .array(checks),
            "observations": .array(observations.map(JSONValue.string)),
        ]
    }

    func check(
        _ id: String,
        _ status: String,
        message: String? = nil,
        expected: String? = nil,
        actual: String? = nil
    )
        -> JSONValue
    {
        var object: [String: JSONValue] = ["id": .string(id), "status": .string(status)]
        if let message { object["message"] = .string(message) }
        if let expected { object["expected"] = .string(expected) }
        if let actual { object["actual"] = .string(actual) }
        return .object(object)
    }

    @Test func twoRunsOfOneKeyAgreeThoughTheirFiguresDiffer() throws {
        let a = report([check("hid.wink", "failed", message: "timed out on channel 353a53a3 after 1200 ms")])
        let b = report([check("hid.wink", "failed", message: "timed out on channel 01b2c3d4 after 987 ms")])
        let comparison = try ReportComparison(a, b)
        #expect(comparison.differences.isEmpty && comparison.common == 1)
    }

    @Test func outcomesAnswersIdentityAndChoicesAreCompared() throws {
        let a = report(
            [
                check("info.fields", "passed"), check("reset.denied", "skipped", message: "needs a refusal"),
                check("pin.wrong", "failed", expected: "0x31", actual: "0x33"), check("only.a", "passed"),
            ],
            observations: ["getPINRetries without a PIN: the count"]
        )
        let b = report(
            [
                check("info.fields", "passed"), check("reset.denied", "passed"),
                check("pin.wrong", "failed", expected: "0x31", actual: "0x34"), check("only.b", "failed"),
            ],
            aaguid: "cb69",
            observations: ["getPINRetries without a PIN: refused"]
        )
        let comparison = try ReportComparison(a, b)
        #expect(
            comparison.differences == [
                "device aaguid: \"f1d0\" | \"cb69\"",
                "reset.denied: skipped: needs a refusal | passed",
                "pin.wrong: failed [expected 0x31, got 0x33] | failed [expected 0x31, got 0x34]",
                "only.a: only in the first report (passed)",
                "only.b: only in the second report (failed)",
                "observed only in the first: getPINRetries without a PIN: the count",
                "observed only in the second: getPINRetries without a PIN: refused",
            ]
        )
        #expect(comparison.common == 3)
    }

    @Test func somethingElseIsRefused() {
        #expect(throws: ReportComparisonError.self) { try ReportComparison(["tool": "x"], report([])) }
    }
}
