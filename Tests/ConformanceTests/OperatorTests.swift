import ControlProtocol
import Testing

@testable import Conformance

#if canImport(Glibc)
import Glibc
#endif

/// A person who must not be asked: every call is recorded.
final class RecordingPerson: DeviceOperator {
    var calls: [String] = []
    var isAutomatic: Bool { false }
    func touchNeeded(_ what: String) throws { calls.append("touch \(what)") }
    func refuseNextTouch() throws { calls.append("refuse") }
    func holdTouch() throws { calls.append("hold") }
    func restore() throws {}
    func powerCycle() throws { calls.append("replug") }
}

/// A scratch directory for the commands' traces.
func scratch() -> String {
    var template = Array("/tmp/fidosim-operator-XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    return path
}

func contents(_ path: String) -> String? {
    guard let file = fopen(path, "r") else { return nil }
    defer { fclose(file) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = fread(&buffer, 1, buffer.count, file)
        if n == 0 { break }
        out += buffer[0..<n]
    }
    return String(decoding: out, as: UTF8.self)
}

/// Waits up to 5 s for a file to have `expected` in it.
func waitFor(_ path: String, _ expected: String) -> Bool {
    for _ in 0..<100 {
        if contents(path)?.contains(expected) == true { return true }
        usleep(50_000)
    }
    return false
}

@Suite struct CommandOperatorTests {
    @Test func hubPortsAreCheckedAndReplugCommandsExcludeEachOther() throws {
        let commands = try CommandOperator.Commands(uhubctl: "1-1.4:2")
        #expect(commands.uhubctl?.location == "1-1.4" && commands.uhubctl?.port == "2")
        for bad in ["1-1", ":2", "1-1:0", "1-1:x", "1-1:2:3", "a;b:1", "1-1:256"] {
            #expect(throws: OperatorChoiceError.self, "\(bad)") { try CommandOperator.Commands(uhubctl: bad) }
        }
        #expect(throws: OperatorChoiceError.self) { try CommandOperator.Commands(replug: "x", uhubctl: "1-1:2") }
        #expect(throws: OperatorChoiceError.self) { try CommandOperator.Commands(touch: "  ") }
        #expect(try !CommandOperator.Commands().any)
    }

    @Test func aTouchRunsItsCommandWithWhatQuotedForTheShell() throws {
        let dir = scratch()
        let person = RecordingPerson()
        let rig = CommandOperator(
            try CommandOperator.Commands(touch: "printf '%s|%s' {what} \"$FIDOSIM_WHAT\" > \(dir)/touched"),
            person: person
        )
        try rig.touchNeeded("it's; rm -rf $HOME `x`")
        #expect(waitFor("\(dir)/touched", "it's; rm -rf $HOME `x`|it's; rm -rf $HOME `x`"))
        // Without a replug command the person replugs; without a refusal command a refusal is skipped.
        try rig.powerCycle()
        #expect(person.calls == ["replug"])
        #expect(throws: CheckSkip.self) { try rig.refuseNextTouch() }
        #expect(!rig.isAutomatic)
    }

    @Test func aRefusalStandsForTheNextTouchAndEndsWithItsCheck() throws {
        let dir = scratch()
        let rig = CommandOperator(
            try CommandOperator.Commands(
                touch: "echo touch >> \(dir)/log",
                refuse: "echo refuse >> \(dir)/log; sleep 30",
                replug: "true"
            ),
            person: RecordingPerson()
        )
        #expect(rig.isAutomatic)
        try rig.refuseNextTouch()
        try rig.touchNeeded("makeCredential")  // the refusal answers this request: no touch command
        #expect(waitFor("\(dir)/log", "refuse"))
        let refusal = try #require(rig.running.first)
        try rig.restore()  // the check ended: the command still running is stopped
        #expect(rig.running.isEmpty && kill(refusal.pid, 0) != 0)
        try rig.touchNeeded("getAssertion")
        #expect(waitFor("\(dir)/log", "refuse\ntouch\n"))
    }

    @Test func aReplugWaitsForItsCommandAndAFailureSaysSo() throws {
        let dir = scratch()
        let ok = CommandOperator(
            try CommandOperator.Commands(replug: "sleep 0.2; touch \(dir)/replugged"),
            person: RecordingPerson()
        )
        try ok.powerCycle()
        #expect(contents("\(dir)/replugged") != nil)
        let failing = CommandOperator(try CommandOperator.Commands(replug: "exit 3"), person: RecordingPerson())
        #expect {
            try failing.powerCycle()
        } throws: { error in
            (error as? CheckFailure)?.message == "the replug command (exit 3) failed with exit status 3"
        }
    }
}

@Suite struct JSONLinesOperatorTests {
    @Test func replugAndRefusalWaitForTheirOwnAnswer() throws {
        var answers = [
            "not json", "{\"id\": 7, \"done\": true}", "{\"id\": 1, \"done\": true}",
            "{\"id\": 2, \"done\": false, \"reason\": \"no deny button\"}", "{\"id\": 3}",
        ]
        let harness = JSONLinesOperator { answers.isEmpty ? nil : answers.removeFirst() }
        try harness.powerCycle()  // id 1: the lines before its answer are passed over
        #expect {
            try harness.refuseNextTouch()
        } throws: { error in
            (error as? CheckSkip)?.reason == "the operator cannot refuse a touch: no deny button"
        }
        #expect(throws: CheckFailure.self) { try harness.powerCycle() }  // id 3: no "done"
        #expect(throws: CheckFailure.self) { try harness.powerCycle() }  // stdin closed
        try harness.touchNeeded("makeCredential")  // told, not answered
        #expect(harness.next == 5)
        answers = ["{\"id\": 6, \"done\": true}"]
        try harness.refuseNextTouch()
        try harness.touchNeeded("makeCredential")  // the refusal stands for this one
        #expect(harness.next == 6)
        try harness.restore()
        try harness.touchNeeded("getAssertion")
        #expect(harness.next == 7)
    }
}
