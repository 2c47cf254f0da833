import CTAPCore
import Testing

@testable import HIDBridge
@testable import VirtualKey

@Suite struct PromptQueueTests {
    let makeCredential = PresencePrompt(command: "makeCredential", rpId: "example.com", userName: "bob")
    let u2f = PresencePrompt(command: "U2F authenticate", rpId: nil, protocolKind: .u2f)

    @Test func theOldestRequestIsAnsweredFirstWhicheverKeyAsks() throws {
        var queue = PromptQueue()
        let secondEntry = queue.ask(slot: 1, prompt: makeCredential, now: .seconds(1))
        let second = try #require(secondEntry)
        let firstEntry = queue.ask(slot: 0, prompt: makeCredential, now: .seconds(2))
        let first = try #require(firstEntry)
        #expect(queue.first == second)
        let removed = queue.remove(serial: second.serial)
        #expect(removed?.slot == 1)
        #expect(queue.first == first)
        #expect(second.serial != first.serial)
    }

    @Test func aU2FHostAskingAgainKeepsOneEntryUntilItStops() throws {
        var queue = PromptQueue()
        let entryEntry = queue.ask(slot: 0, prompt: u2f, now: .zero)
        let entry = try #require(entryEntry)
        let again = queue.ask(slot: 0, prompt: u2f, now: .seconds(5))
        #expect(again == nil)
        let early = queue.sweep(now: .seconds(14), waits: { _ in false })
        #expect(early.isEmpty)  // asked 9 s ago
        let late = queue.sweep(now: .seconds(16), waits: { _ in false })
        #expect(late.map(\.serial) == [entry.serial])
        #expect(queue.first == nil)
    }

    @Test func aCTAP2RequestAnsweredElsewhereIsForgotten() throws {
        var queue = PromptQueue()
        let entryEntry = queue.ask(slot: 0, prompt: makeCredential, now: .zero)
        let entry = try #require(entryEntry)
        let waiting = queue.sweep(now: .seconds(1), waits: { _ in true })
        #expect(waiting.isEmpty)
        let answered = queue.sweep(now: .seconds(2), waits: { _ in false })
        #expect(answered == [entry])
    }

    @Test func aNewRequestOfTheSameKeyReplacesItsOldOne() throws {
        var queue = PromptQueue()
        let oldEntry = queue.ask(slot: 0, prompt: makeCredential, now: .zero)
        let old = try #require(oldEntry)
        let newEntry = queue.ask(slot: 0, prompt: makeCredential, now: .seconds(1))
        let new = try #require(newEntry)
        #expect(queue.entries.map(\.serial) == [new.serial])
        #expect(old.serial != new.serial)
    }

    @Test(arguments: [
        ("", TerminalAnswer.touch), ("y", .touch), (" Yes\r", .touch), ("n", .refuse), ("NO", .refuse),
        ("maybe", .unclear), ("yy", .unclear),
    ])
    func terminalAnswers(line: String, answer: TerminalAnswer) {
        #expect(TerminalAnswer(line: Array(line.utf8)) == answer)
    }

    @Test func theQuestionNamesTheKeyAndEscapesTheRelyingParty() {
        let prompt = PresencePrompt(command: "getAssertion", rpId: "a.example\u{1B}[2J", userName: "\u{202E}x")
        #expect(
            prompt.terminalQuestion(key: "desk-2")
                == "fidosim: key desk-2: touch requested: getAssertion for a.example\\x1b[2J (user \\u{202e}x). "
                + "Touch the key? [Y/n]"
        )
    }
}
