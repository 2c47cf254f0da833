import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import CTAPHID
import CTAPNFC
import Profiles
import Testing

@testable import HIDBridge
@testable import VirtualKey

/// A key that is a card (NFC only), or a card and a HID device, driven by APDUs and time.
struct CardHarness {
    var hid: KeyHarness

    init(presence: PresenceMode, alsoUSB: Bool = false, resetTransports: [String]? = nil) throws {
        var recipe = KeyRecipe()
        recipe.resetTransports = resetTransports
        hid = try KeyHarness(presence: presence)
        hid.key = try recipe.makeKey(
            profile: try ProfileFile.load("fidosim"),
            storage: MemoryStorage(deviceSecret: Array(repeating: 7, count: 32)),
            entropy: EntropySource(SeededGenerator(seed: 42)),
            presence: presence,
            transport: alsoUSB ? .udp : .pcsc,
            card: true
        )
        hid.key.fieldOn(now: .zero)
    }

    var now: Duration {
        get { hid.now }
        set { hid.now = newValue }
    }

    /// The response APDUs among `outputs`.
    static func apdus(_ outputs: [KeyOutput]) -> [[UInt8]] {
        outputs.compactMap { if case .apdu(let bytes) = $0 { bytes } else { nil } }
    }

    mutating func send(_ apdu: [UInt8]) -> [[UInt8]] { Self.apdus(hid.key.receive(apdu: apdu, now: now)) }

    mutating func advance(by step: Duration) -> [[UInt8]] {
        now += step
        return Self.apdus(hid.key.tick(now: now))
    }

    mutating func select() -> [UInt8]? {
        send([0x00, 0xA4, 0x04, 0x00, 0x08] + NFCMachine.aid + [0x00]).first
    }

    /// NFCCTAP_MSG with the CTAP2 message (short, Le 0), asking for status updates (P1 0x80) or not.
    static func ctap(_ message: [UInt8], updates: Bool = false) -> [UInt8] {
        [0x80, 0x10, updates ? 0x80 : 0x00, 0x00, UInt8(message.count)] + message + [0x00]
    }

    /// A response APDU with what GET RESPONSE fetches after it while the key says 61XX: the whole answer and
    /// its final status word.
    mutating func whole(_ first: [UInt8]) -> [UInt8] {
        var data: [UInt8] = []
        var response = first
        while response.count >= 2 && response[response.count - 2] == 0x61 {
            data += response.dropLast(2)
            response = send([0x00, 0xC0, 0x00, 0x00, response[response.count - 1]]).first ?? []
        }
        return data + response
    }

    /// A CTAP2 request that may wait for the simulated user (a reset's long touch): its CTAP answer once given.
    mutating func callWaiting(_ message: [UInt8]) -> [UInt8]? {
        var first = send(Self.ctap(message)).first
        if first == nil { first = advance(by: hid.key.user.longTouchHold).first }
        guard let first else { return nil }
        let response = whole(first)
        guard response.suffix(2) == [0x90, 0x00] else { return nil }
        return Array(response.dropLast(2))
    }

    /// A CTAP2 request that the key answers without waiting: its CTAP answer (status byte and CBOR).
    mutating func call(_ message: [UInt8]) -> [UInt8]? {
        guard let first = send(Self.ctap(message)).first else { return nil }
        let response = whole(first)
        guard response.suffix(2) == [0x90, 0x00] else { return nil }
        return Array(response.dropLast(2))
    }
}

@Suite struct VirtualKeyNFCTests {
    @Test func aCardAnswersSelectAndGetInfoListsNFC() throws {
        var h = try CardHarness(presence: .approve(after: .zero))
        #expect(h.select() == Array("U2F_V2".utf8) + [0x90, 0x00])
        let called = h.call([0x04])
        let answer = try #require(called)
        #expect(answer.first == 0x00)
        let info = try CBORDecoder.decode(Array(answer.dropFirst()))
        #expect(info[9] == ["nfc"])
        #expect(info[0x1A] == ["nfc"])
    }

    @Test func aCardOutOfTheFieldHearsNothing() throws {
        var h = try CardHarness(presence: .approve(after: .zero))
        h.hid.key.fieldOff(now: h.now)
        #expect(h.send([0x00, 0xA4, 0x04, 0x00, 0x08] + NFCMachine.aid + [0x00]).isEmpty)
        h.hid.key.fieldOn(now: h.now)
        #expect(h.select()?.suffix(2) == [0x90, 0x00])
    }

    @Test func aDualKeyListsBothTransportsAndResetsOverEither() throws {
        var h = try CardHarness(presence: .approve(after: .zero), alsoUSB: true)
        _ = h.select()
        let called = h.call([0x04])
        let info = try CBORDecoder.decode(Array(try #require(called).dropFirst()))
        #expect(info[9] == ["nfc", "usb"])
        #expect(info[0x1A] == ["nfc", "usb"])
    }

    @Test func promptModeAsksThePersonOverNFCToo() throws {
        // The tap that brought the card into the field is not consent to the request: the person is asked, as on USB.
        var h = try CardHarness(presence: .prompt)
        _ = h.select()
        let outputs = h.hid.key.receive(apdu: CardHarness.ctap(makeCredentialRequest()), now: h.now)
        #expect(CardHarness.apdus(outputs).isEmpty)
        #expect(outputs.contains { if case .prompt = $0 { true } else { false } })
        #expect(h.hid.key.pendingPrompt != nil)
        #expect(h.advance(by: .seconds(5)).isEmpty)
        h.now += .milliseconds(1)
        let touched = CardHarness.apdus(h.hid.key.touch(now: h.now))
        let answer = h.whole(try #require(touched.first))
        #expect(answer.first == 0x00)
        #expect(answer.suffix(2) == [0x90, 0x00])
    }

    @Test func aResetOverNFCInPromptModeWaitsForThePerson() throws {
        var h = try CardHarness(presence: .prompt)
        _ = h.select()
        #expect(h.send(CardHarness.ctap([0x07])).isEmpty)
        let refused = CardHarness.apdus(h.hid.key.refuse(now: h.now))
        #expect(refused == [[CTAPStatus.operationDenied.rawValue, 0x90, 0x00]])
    }

    @Test func u2fRegisterOverNFCInPromptModeWantsATouchAsOverUSB() throws {
        var h = try CardHarness(presence: .prompt)
        _ = h.select()
        let register: [UInt8] = [0x00, 0x01, 0x03, 0x00, 0x40] + Array(repeating: 0x11, count: 64) + [0x00]
        #expect(h.send(register) == [[0x69, 0x85]])  // conditions not satisfied: touch, then ask again
        _ = h.hid.key.touch(now: h.now)
        let registered = h.send(register).first
        let answer = try #require(registered)
        #expect(answer.first == 0x05)  // the reserved byte of a registration
        // 0x40 + 65-byte key + handle + certificate + signature: more than Ne 256, so 61XX and GET RESPONSE.
        #expect(answer.count == 258 && answer[256] == 0x61)
        let whole = h.whole(answer)
        #expect(whole.suffix(2) == [0x90, 0x00])
        #expect(whole.count > 0x40 + 65 + 1 + 64)
    }

    @Test func denyModeRefusesOverNFC() throws {
        var h = try CardHarness(presence: .deny(after: .zero))
        _ = h.select()
        var answers = h.send(CardHarness.ctap(makeCredentialRequest()))
        if answers.isEmpty { answers = h.advance(by: .milliseconds(1)) }
        #expect(answers == [[CTAPStatus.operationDenied.rawValue, 0x90, 0x00]])
    }

    @Test func aWaitingRequestSendsUpNeededUpdatesUntilItsAnswer() throws {
        var h = try CardHarness(presence: .approve(after: .milliseconds(250)))
        _ = h.select()
        #expect(h.send(CardHarness.ctap(makeCredentialRequest(), updates: true)).isEmpty)
        #expect(h.advance(by: .milliseconds(99)).isEmpty)
        #expect(h.advance(by: .milliseconds(1)) == [[NFCStatus.upNeeded.rawValue, 0x91, 0x00]])
        // The reader polls NFCCTAP_GETRESPONSE; the next update comes 100 ms later.
        #expect(h.send([0x80, 0x11, 0x00, 0x00, 0x00]).isEmpty)
        #expect(h.advance(by: .milliseconds(100)) == [[NFCStatus.upNeeded.rawValue, 0x91, 0x00]])
        // The touch comes at 250 ms, while no poll is pending: the answer waits for the next poll.
        #expect(h.advance(by: .milliseconds(60)).isEmpty)
        let polled = h.send([0x80, 0x11, 0x00, 0x00, 0x00]).first
        let answer = h.whole(try #require(polled))
        #expect(answer.first == 0x00)
        #expect(answer.suffix(2) == [0x90, 0x00])
    }

    @Test func cancelOverNFCAnswersKeepaliveCancel() throws {
        var h = try CardHarness(presence: .approve(after: .seconds(10)))
        _ = h.select()
        #expect(h.send(CardHarness.ctap(makeCredentialRequest(), updates: true)).isEmpty)
        #expect(h.advance(by: .milliseconds(100)).count == 1)
        #expect(h.send([0x80, 0x11, 0x11, 0x00, 0x00]) == [[CTAPStatus.keepaliveCancel.rawValue, 0x90, 0x00]])
        // The key is free again.
        #expect(h.call([0x04])?.first == 0x00)
    }

    @Test func resetOverNFCNeedsNFCInTransportsForReset() throws {
        var allowed = try CardHarness(presence: .approve(after: .zero))
        _ = allowed.select()
        #expect(allowed.callWaiting([0x07]) == [0x00])
        var refused = try CardHarness(presence: .approve(after: .zero), resetTransports: ["usb"])
        _ = refused.select()
        #expect(refused.call([0x07]) == [CTAPStatus.operationDenied.rawValue])
    }

    @Test func aTapStartsTheResetWindowOfACardOnlyKey() throws {
        var h = try CardHarness(presence: .approve(after: .zero))
        h.now = .seconds(11)
        _ = h.select()
        #expect(h.call([0x07]) == [CTAPStatus.notAllowed.rawValue])
        // Out of the field and back: the card's power-up.
        h.hid.key.fieldOff(now: h.now)
        h.hid.key.fieldOn(now: h.now)
        _ = h.select()
        #expect(h.callWaiting([0x07]) == [0x00])
    }

    @Test func oneRequestAtATimeAcrossUSBAndNFC() throws {
        var h = try CardHarness(presence: .prompt, alsoUSB: true)
        _ = h.select()
        // A USB request waits for the person; the card hears busy.
        let waiting = messages(h.hid.send(command: cbor, payload: makeCredentialRequest()))
        #expect(waiting.allSatisfy { $0.command == keepalive })
        #expect(h.call([0x04]) == [CTAPStatus.channelBusy.rawValue])
        // The person touches; USB gets its answer, and the card is served again.
        let answered = messages(h.hid.key.touch(now: h.now)).filter { $0.command != keepalive }
        #expect(answered.last?.payload.first == 0x00)
        #expect(h.call([0x04])?.first == 0x00)
    }

    @Test func theFieldGoingAwayDropsTheRequestInFlight() throws {
        var h = try CardHarness(presence: .approve(after: .seconds(5)), alsoUSB: true)
        _ = h.select()
        #expect(h.send(CardHarness.ctap(makeCredentialRequest(), updates: true)).isEmpty)
        h.hid.key.fieldOff(now: h.now)
        // USB is served at once: nothing waits any more.
        let info = messages(h.hid.send(command: cbor, payload: [0x04]))
        #expect(info.last?.payload.first == 0x00)
        #expect(h.advance(by: .seconds(6)).isEmpty)
    }
}

@Suite struct VPCDFramerTests {
    @Test func messagesSplitAnywhereAreReassembled() throws {
        var framer = VPCDFramer()
        let stream: [UInt8] = [0x00, 0x01, 0x01, 0x00, 0x01, 0x04, 0x00, 0x05, 0x00, 0xA4, 0x04, 0x00, 0x00]
        var messages: [VPCDMessage] = []
        for byte in stream { messages += try framer.feed([byte]) }
        #expect(messages == [.powerOn, .getATR, .apdu([0x00, 0xA4, 0x04, 0x00, 0x00])])
        #expect(framer.pending == 0)
        #expect(
            try framer.feed([0x00, 0x01, 0x00, 0x00, 0x01, 0x02, 0x00, 0x01, 0x09]) == [
                .powerOff, .reset, .unknownControl(9),
            ]
        )
    }

    @Test func aZeroLengthIsMalformed() {
        var framer = VPCDFramer()
        #expect(throws: VPCDFramer.Malformed.self) { try framer.feed([0x00, 0x00]) }
        #expect(framer.pending == 0)
    }

    @Test func framesAndTheATR() {
        #expect(VPCDFramer.frame([0x90, 0x00]) == [0x00, 0x02, 0x90, 0x00])
        let atr = VPCDFramer.atr
        #expect(Array(atr.prefix(4)) == [0x3B, 0x8C, 0x80, 0x01])
        #expect(atr.count == 4 + 12 + 1)
        #expect(atr.dropFirst().dropLast().reduce(0, ^) == atr.last)
    }
}
