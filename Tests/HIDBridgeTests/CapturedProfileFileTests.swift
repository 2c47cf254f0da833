import CTAPCBOR
import CTAPCore
import ControlProtocol
import Testing

@testable import HIDBridge

@Suite struct CapturedProfileFileTests {
    /// A capture as `fidosim profile capture` writes it, of an imagined key.
    static var capture: JSONValue {
        let info: CBORValue = [
            0x01: ["U2F_V2", "FIDO_2_0", "FIDO_2_1", "FIDO_2_9"], 0x02: ["hmac-secret", "vendorExtension"],
            0x03: .byteString(Array(repeating: 0xAB, count: 16)), 0x04: ["clientPin": false, "alwaysUv": true],
            0x05: 20000, 0x06: [1], 0x07: 100, 0x0A: [["alg": -8, "type": "public-key"], ["alg": -999]], 0x14: 31,
        ]
        return [
            "version": 1,
            "getInfo": .string("00" + Hex.string(CBOREncoder.encode(info))),
            "ctaphid": ["protocolVersion": 2, "deviceVersion": [5, 7, 1], "capabilities": 0x05],
            "usb": [
                "vendorId": 0x1050, "productId": 0x0407, "manufacturer": "Yubico", "product": "YubiKey OTP+FIDO+CCID",
                "serial": ["length": 10, "alphabet": "digits"],
            ],
            "probes": [
                ["name": "unknown command 0x3f", "request": "3f", "response": "01", "replay": true],
                ["name": "clientPIN getPINRetries", "request": "06a201010201", "response": "35", "replay": false],
                ["name": "getAssertion: an allow list of 65", "request": "02", "response": "15", "replay": false],
            ],
            "u2f": [["name": "VERSION", "request": "0003000000", "response": "5532465f56329000", "replay": true]],
            "timing": ["initMs": .number(1.2), "getInfoMs": .number(4.5)],
        ]
    }

    @Test func theProfileMembersAreReadFromTheCaptureAndTheCaptureIsServed() throws {
        let document = try ProfileFile.document(capture: Self.capture, name: "my-key")
        #expect(document["versions"] == ["U2F_V2", "FIDO_2_0", "FIDO_2_1"])  // FIDO_2_9 is unknown to fidosim
        #expect(document["extensions"] == ["hmac-secret"])
        #expect(document["pinUvAuthProtocols"] == [1])
        #expect(document["algorithms"] == ["EdDSA"])
        #expect(document["maxCredentialCountInList"] == 64 && document["maxMsgSize"] == 7609)
        #expect(document["maxResidentCredentials"] == 31 && document["alwaysUv"] == true)
        #expect(document["aaguid"] == .string(String(repeating: "ab", count: 16)))
        #expect(document["behaviour"] == ["pinRetriesWithoutPin": "pinNotSet"])
        #expect(document["quirks"] == ["rejectsLargeLists": true])
        let file = try ProfileFile.parse(document)
        #expect(file.profile.name == "my-key")
        #expect(file.profile.cannedAnswers == [[0x3F]: [0x01]])
        #expect(
            file.profile.cannedU2FAnswers == [[0x00, 0x03, 0x00, 0x00, 0x00]: Array("U2F_V2".utf8) + [0x90, 0x00]]
        )
        #expect(file.profile.capturedInfo?[0x07] == 100)
        #expect(file.identity.capabilities == 0x05 && file.identity.vendorID == 0x1050)
        #expect(file.identity.deviceVersion.map { [$0.0, $0.1, $0.2] } == [5, 7, 1])
        let serial = try #require(file.identity.serial(random: Array("some image serial".utf8)))
        #expect(serial.count == 10 && serial.allSatisfy(\.isNumber))
        #expect(file.identity.serial(random: Array("some image serial".utf8)) == serial, "stable per image")
    }

    @Test func theTimingIsReadAndAnImpossibleKeepaliveIsRefused() throws {
        func parse(_ timing: JSONValue) throws -> CapturedIdentity {
            guard case .object(var capture) = Self.capture else { throw KeySetupError("no capture") }
            capture["timing"] = timing
            return try ProfileFile.parse(try ProfileFile.document(capture: .object(capture), name: "t")).identity
        }
        let identity = try parse(["initMs": .number(1.5), "getInfoMs": 4, "keepaliveMs": .number(150)])
        #expect(identity.initMs == 1.5 && identity.getInfoMs == 4 && identity.keepaliveMs == 150)
        #expect(try parse(["keepaliveMs": .null]).keepaliveMs == nil)
        #expect(throws: KeySetupError.self) { try parse(["keepaliveMs": 5]) }
        #expect(throws: KeySetupError.self) { try parse(["initMs": -1]) }
    }

    @Test func aU2FOnlyCaptureIsAU2FOnlyProfile() throws {
        var capture = Self.capture
        if case .object(var fields) = capture {
            fields["getInfo"] = nil
            capture = .object(fields)
        }
        let document = try ProfileFile.document(capture: capture, name: "u2f")
        #expect(document["versions"] == ["U2F_V2"])
        #expect(try ProfileFile.parse(document).profile.capturedInfo == nil)
    }
}

@Suite struct CapturedTimingTests {
    @Test func aCapturedKeyAnswersINITAndGetInfoNoFasterThanItDid() throws {
        var h = try KeyHarness(presence: .approve(after: .zero))
        h.key.initLatency = .milliseconds(20)
        h.key.getInfoLatency = .milliseconds(30)
        // INIT: nothing at once, the answer at 20 ms.
        #expect(messages(h.send(command: 0x06, payload: Array(repeating: 1, count: 8))).isEmpty)
        #expect(h.key.nextDeadline == .milliseconds(20))
        #expect(messages(h.advance(to: .milliseconds(19))).isEmpty)
        #expect(messages(h.advance(to: .milliseconds(20))).map(\.command) == [0x86])
        // getInfo: every report of the answer at 30 ms after the request, in order.
        h.now = .milliseconds(100)
        #expect(messages(h.send(command: 0x10, payload: [0x04])).isEmpty)
        let answer = messages(h.advance(to: .milliseconds(130)))
        #expect(answer.count == 1 && answer[0].payload.first == 0x00 && answer[0].payload.count > 100)
        // Other answers are not held.
        h.now = .milliseconds(200)
        #expect(messages(h.send(command: 0x01, payload: [9])).map(\.payload) == [[9]])
    }

    @Test func theDelayIsWhatTheCapturedKeyTookBeyondFidosimsOwn() {
        #expect(CapturedIdentity.extra(nil) == .zero)
        #expect(CapturedIdentity.extra(0.3) == .zero)
        #expect(CapturedIdentity.extra(4.5) == .milliseconds(4))
    }
}
