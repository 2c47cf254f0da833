import Testing

@testable import CTAPNFC

/// The NFC binding as exact APDU sequences: what python-fido2's CtapPcscDevice sends (SELECT with Le, NFCCTAP_MSG
/// with P1 0x80, chains of 250 bytes, GET RESPONSE with the Le of 61XX, NFCCTAP_GETRESPONSE polls) and what
/// malformed readers send.
@Suite struct NFCMachineTests {
    static let select: [UInt8] = [0x00, 0xA4, 0x04, 0x00, 0x08] + NFCMachine.aid + [0x00]
    static let t0: Duration = .zero

    func selected(u2f: Bool = true) -> NFCMachine {
        var machine = NFCMachine(u2f: u2f)
        #expect(machine.receive(Self.select, now: Self.t0) == [.respond(Array("U2F_V2".utf8) + [0x90, 0x00])] || !u2f)
        return machine
    }

    @Test func selectAnswersTheVersionString() {
        var machine = NFCMachine()
        #expect(machine.receive(Self.select, now: .zero) == [.respond(Array("U2F_V2".utf8) + [0x90, 0x00])])
        #expect(machine.selected)
        var ctapOnly = NFCMachine(u2f: false)
        #expect(ctapOnly.receive(Self.select, now: .zero) == [.respond(Array("FIDO_2_0".utf8) + [0x90, 0x00])])
        // Without Le, too (Case 3).
        var noLe = NFCMachine()
        #expect(
            noLe.receive(Array(Self.select.dropLast()), now: .zero) == [.respond(Array("U2F_V2".utf8) + [0x90, 0x00])]
        )
    }

    @Test func anotherAIDIsNotFoundAndDeselects() {
        var machine = selected()
        let other: [UInt8] = [0x00, 0xA4, 0x04, 0x00, 0x07, 0xA0, 0x00, 0x00, 0x05, 0x27, 0x20, 0x01, 0x00]
        #expect(machine.receive(other, now: .zero) == [.respond([0x6A, 0x82])])
        #expect(!machine.selected)
        #expect(machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x04, 0x00], now: .zero) == [.respond([0x6D, 0x00])])
    }

    @Test func beforeSelectNothingIsServed() {
        var machine = NFCMachine()
        #expect(machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x04, 0x00], now: .zero) == [.respond([0x6D, 0x00])])
        #expect(machine.receive([0x00, 0x03, 0x00, 0x00, 0x00], now: .zero) == [.respond([0x6D, 0x00])])
        #expect(machine.receive([0xA0, 0x10, 0x00, 0x00], now: .zero) == [.respond([0x6E, 0x00])])
        #expect(machine.receive([0x00, 0xA4, 0x00, 0x0C, 0x02, 0x3F, 0x00], now: .zero) == [.respond([0x6A, 0x86])])
    }

    @Test func aCTAP2RequestAndItsAnswer() {
        var machine = selected()
        #expect(machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x04, 0x00], now: .zero) == [.ctap2([0x04])])
        #expect(machine.busy)
        #expect(
            machine.complete([0x00, 0xA1, 0x01, 0x02], now: .milliseconds(5)) == [
                .respond([0x00, 0xA1, 0x01, 0x02, 0x90, 0x00])
            ]
        )
        #expect(!machine.busy && machine.nextDeadline == nil)
    }

    @Test func aLongRequestSendsStatusUpdatesUntilItsAnswer() {
        var machine = selected()
        #expect(machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x01, 0x00], now: .zero) == [.ctap2([0x01])])
        #expect(machine.nextDeadline == .milliseconds(100))
        #expect(machine.tick(now: .milliseconds(99)).isEmpty)
        machine.setStatus(.upNeeded)
        #expect(machine.tick(now: .milliseconds(100)) == [.respond([0x02, 0x91, 0x00])])
        #expect(machine.nextDeadline == nil)  // the reader has its answer; the client asks again
        #expect(machine.receive([0x80, 0x11, 0x00, 0x00, 0x00], now: .milliseconds(150)).isEmpty)
        #expect(machine.nextDeadline == .milliseconds(250))
        #expect(machine.complete([0x00], now: .milliseconds(200)) == [.respond([0x00, 0x90, 0x00])])
    }

    @Test func anAnswerBetweenPollsWaitsForTheNextPoll() {
        var machine = selected()
        _ = machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x07, 0x00], now: .zero)
        #expect(machine.tick(now: .milliseconds(100)) == [.respond([0x01, 0x91, 0x00])])
        #expect(machine.complete([0x27], now: .milliseconds(120)).isEmpty)
        #expect(
            machine.receive([0x80, 0x11, 0x00, 0x00, 0x00], now: .milliseconds(130)) == [.respond([0x27, 0x90, 0x00])]
        )
        #expect(!machine.busy)
    }

    @Test func withoutP1x80TheReaderWaitsForTheAnswer() {
        var machine = selected()
        _ = machine.receive([0x80, 0x10, 0x00, 0x00, 0x01, 0x07, 0x00], now: .zero)
        #expect(machine.nextDeadline == nil && machine.tick(now: .seconds(5)).isEmpty)
        #expect(machine.complete([0x00], now: .seconds(6)) == [.respond([0x00, 0x90, 0x00])])
    }

    @Test func getResponseWithP1x11Cancels() {
        var machine = selected()
        _ = machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x02, 0x00], now: .zero)
        _ = machine.tick(now: .milliseconds(100))
        #expect(machine.receive([0x80, 0x11, 0x11, 0x00, 0x00], now: .milliseconds(110)) == [.cancel])
        #expect(machine.complete([0x2D], now: .milliseconds(115)) == [.respond([0x2D, 0x90, 0x00])])
    }

    @Test func whileTheKeyWorksOtherCommandsAreRefused() {
        var machine = selected()
        _ = machine.receive([0x80, 0x10, 0x00, 0x00, 0x01, 0x02, 0x00], now: .zero)
        #expect(machine.receive([0x80, 0x10, 0x00, 0x00, 0x01, 0x04, 0x00], now: .zero) == [.respond([0x69, 0x85])])
        #expect(machine.receive([0x80, 0x11, 0x00, 0x00, 0x00], now: .zero) == [.respond([0x69, 0x85])])  // no P1 0x80
        var unselected = NFCMachine()
        #expect(unselected.receive([0x80, 0x11, 0x00, 0x00], now: .zero) == [.respond([0x6D, 0x00])])
        var idle = selected()
        #expect(idle.receive([0x80, 0x11, 0x00, 0x00], now: .zero) == [.respond([0x69, 0x85])])
    }

    @Test func commandChainingAssemblesTheRequest() {
        var machine = selected()
        let payload = [UInt8(0x01)] + (0..<599).map { UInt8($0 & 0xFF) }
        var parts = Array(payload.chunks(250))
        let last = parts.removeLast()
        for part in parts {
            #expect(
                machine.receive([0x90, 0x10, 0x80, 0x00, UInt8(part.count)] + part, now: .zero) == [
                    .respond([0x90, 0x00])
                ]
            )
        }
        #expect(
            machine.receive([0x80, 0x10, 0x80, 0x00, UInt8(last.count)] + last + [0x00], now: .zero) == [
                .ctap2(payload)
            ]
        )
    }

    @Test func aChainThatChangesCommandIsRefused() {
        var machine = selected()
        #expect(machine.receive([0x90, 0x10, 0x80, 0x00, 0x01, 0x01], now: .zero) == [.respond([0x90, 0x00])])
        #expect(machine.receive([0x00, 0x02, 0x00, 0x00, 0x01, 0x01], now: .zero) == [.respond([0x68, 0x83])])
        // The chain is gone: a new request starts clean.
        #expect(machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x04, 0x00], now: .zero) == [.ctap2([0x04])])
    }

    @Test func aChainLongerThanTheLargestMessageIsWrongLength() {
        var machine = NFCMachine(maxMessageSize: 1024)
        _ = machine.receive(Self.select, now: .zero)
        let part = [UInt8](repeating: 0x41, count: 250)
        for _ in 0..<4 {
            #expect(machine.receive([0x90, 0x10, 0x80, 0x00, 0xFA] + part, now: .zero) == [.respond([0x90, 0x00])])
        }
        #expect(machine.receive([0x90, 0x10, 0x80, 0x00, 0xFA] + part, now: .zero) == [.respond([0x67, 0x00])])
    }

    @Test func longAnswersChainWithGetResponse() {
        var machine = selected()
        _ = machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x04, 0x00], now: .zero)
        let answer = (0..<600).map { UInt8($0 & 0xFF) }
        #expect(machine.complete(answer, now: .zero) == [.respond(Array(answer[0..<256]) + [0x61, 0x00])])
        #expect(
            machine.receive([0x00, 0xC0, 0x00, 0x00, 0x00], now: .zero) == [
                .respond(Array(answer[256..<512]) + [0x61, 88])
            ]
        )
        #expect(
            machine.receive([0x00, 0xC0, 0x00, 0x00, 88], now: .zero) == [
                .respond(Array(answer[512...]) + [0x90, 0x00])
            ]
        )
        #expect(machine.receive([0x00, 0xC0, 0x00, 0x00, 0x00], now: .zero) == [.respond([0x69, 0x85])])
    }

    @Test func anExtendedLeTakesTheWholeAnswer() {
        var machine = selected()
        let request: [UInt8] = [0x80, 0x10, 0x80, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00]
        #expect(machine.receive(request, now: .zero) == [.ctap2([0x04])])
        let answer = [UInt8](repeating: 0x55, count: 1000)
        #expect(machine.complete(answer, now: .zero) == [.respond(answer + [0x90, 0x00])])
    }

    @Test func u2fMessagesCarryTheirOwnStatusWord() {
        var machine = selected()
        let version: [UInt8] = [0x00, 0x03, 0x00, 0x00, 0x00]
        #expect(machine.receive(version, now: .zero) == [.u2f(version)])
        #expect(
            machine.complete(Array("U2F_V2".utf8) + [0x90, 0x00], now: .zero) == [
                .respond(Array("U2F_V2".utf8) + [0x90, 0x00])
            ]
        )
        let authenticate: [UInt8] = [0x00, 0x02, 0x07, 0x00, 0x01, 0xAA, 0x00]
        #expect(machine.receive(authenticate, now: .zero) == [.u2f(authenticate)])
        #expect(machine.complete([0x69, 0x85], now: .zero) == [.respond([0x69, 0x85])])
        var ctapOnly = selected(u2f: false)
        _ = ctapOnly.receive(Self.select, now: .zero)
        #expect(ctapOnly.receive(version, now: .zero) == [.respond([0x6D, 0x00])])
        // U2F's instructions under class 0x80: the class the U2F layer refuses over CTAPHID_MSG too.
        #expect(machine.receive([0x80, 0x03, 0x00, 0x00, 0x00], now: .zero) == [.respond([0x6E, 0x00])])
        #expect(ctapOnly.receive([0x80, 0x03, 0x00, 0x00, 0x00], now: .zero) == [.respond([0x6D, 0x00])])
    }

    @Test(
        arguments: [
            [0x80, 0x10, 0x80],  // shorter than a header
            [0x80, 0x10, 0x80, 0x00, 0x05, 0x01],  // Lc says 5, one byte follows
            [0x80, 0x10, 0x80, 0x00, 0x01, 0x01, 0x00, 0x00],  // one byte too many
            [0x80, 0x10, 0x80, 0x00, 0x00, 0x01],  // extended, cut short
            [0x80, 0x10, 0x80, 0x00, 0x00, 0x00, 0x00, 0x01],  // extended Lc of 0 with data
            [0x80, 0x10, 0x80, 0x00, 0x00, 0x00, 0x02, 0x01],  // extended Lc says 2, one byte follows
        ] as [[UInt8]]
    )
    func malformedAPDUsAreWrongLength(apdu: [UInt8]) {
        var machine = selected()
        #expect(machine.receive(apdu, now: .zero) == [.respond([0x67, 0x00])])
        #expect(machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x04, 0x00], now: .zero) == [.ctap2([0x04])])
    }

    @Test func otherInstructionsAndParameters() {
        var machine = selected()
        #expect(machine.receive([0x00, 0xB0, 0x00, 0x00, 0x00], now: .zero) == [.respond([0x6D, 0x00])])
        #expect(machine.receive([0x80, 0x10, 0x01, 0x00, 0x01, 0x04], now: .zero) == [.respond([0x6A, 0x86])])
        #expect(machine.receive([0x80, 0x10, 0x80, 0x00, 0x00], now: .zero) == [.respond([0x67, 0x00])])  // no request
    }

    @Test func powerOffForgetsEverything() {
        var machine = selected()
        _ = machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x04, 0x00], now: .zero)
        machine.powerOff()
        #expect(!machine.selected && !machine.busy)
        #expect(machine.complete([0x00], now: .zero).isEmpty)
        #expect(machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x04, 0x00], now: .zero) == [.respond([0x6D, 0x00])])
    }

    @Test(
        arguments: [
            [0x00, 0xA4, 0x04, 0x00] as [UInt8],
            [0x00, 0xA4, 0x04, 0x00, 0x00],
            [0x80, 0x10, 0x80, 0x00, 0x01, 0x04, 0x00],
            [0x80, 0x10, 0x80, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00],
            [0x80, 0x10, 0x80, 0x00, 0x00, 0x01, 0x00],
        ]
    )
    func parsedAPDUsWriteBackTheirBytes(bytes: [UInt8]) throws {
        #expect(try CommandAPDU.parse(bytes).bytes == bytes)
    }
}

extension Array {
    fileprivate func chunks(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
