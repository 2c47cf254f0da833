import CTAPCBOR
import CTAPCore
import ControlProtocol
import Profiles
import Testing

@testable import HIDBridge
@testable import VirtualKey

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
        let document = try ProfileFile.document(json: Self.capture, name: "my-key")
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

    @Test func aCaptureReadsBackAsItWasWritten() throws {
        let record = try CaptureRecord(json: Self.capture)
        #expect(record.json == Self.capture)
        #expect(try CaptureRecord(json: record.json) == record)
        var unmeasured = record
        unmeasured.timing.keepaliveUnmeasured = true  // timed, but too few keepalives came
        #expect(unmeasured.json["timing"]?["keepaliveMs"] == .null)
        #expect(try CaptureRecord(json: unmeasured.json) == unmeasured)
        #expect(record.ctaphid?.protocolVersion == 2 && record.usb?.serial?.length == 10)
        #expect(record.probeAnswers["clientPIN getPINRetries"] == [0x35])
        let shapes = ["": "none", "0123": "digits", "09AF": "upper-hex", "09af": "lower-hex", "AZ09": "upper-alnum"]
        for (serial, alphabet) in shapes {
            #expect(CaptureRecord.SerialShape(of: serial).alphabet == alphabet, "\(serial)")
        }
        #expect(CaptureRecord.SerialShape(of: "Az-9") == CaptureRecord.SerialShape(length: 4, alphabet: "alnum"))
        var bad = record.json
        if case .object(var fields) = bad {
            fields["probes"] = [["name": "x", "request": "zz", "response": "00", "replay": true]]
            bad = .object(fields)
        }
        #expect(throws: KeySetupError("each capture probe needs \"request\" and \"response\" in hex and \"replay\"")) {
            try CaptureRecord(json: bad)
        }
    }

    @Test func theTimingIsReadAndAnImpossibleKeepaliveIsRefused() throws {
        func parse(_ timing: JSONValue) throws -> CapturedIdentity {
            guard case .object(var capture) = Self.capture else { throw KeySetupError("no capture") }
            capture["timing"] = timing
            return try ProfileFile.parse(try ProfileFile.document(json: .object(capture), name: "t")).identity
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
        let document = try ProfileFile.document(json: capture, name: "u2f")
        #expect(document["versions"] == ["U2F_V2"])
        #expect(try ProfileFile.parse(document).profile.capturedInfo == nil)
    }

    /// A capture of a FIDO_2_1 key with `--allow-destructive`'s record (`destructive`) replaced by `record`.
    static func destructiveCapture(
        _ record: JSONValue,
        versions: CBORValue = ["FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1"]
    )
        -> JSONValue
    {
        let info: CBORValue = [
            0x01: versions, 0x03: .byteString(Array(repeating: 0xCD, count: 16)), 0x04: ["clientPin": false],
            0x06: [2, 1], 0x14: 40,
        ]
        return [
            "version": 1, "getInfo": .string("00" + Hex.string(CBOREncoder.encode(info))), "probes": [], "u2f": [],
            "destructive": record,
        ]
    }

    /// What fidosim itself answers (a capture of fidosim with the fidosim profile, make profile-roundtrip).
    static let fidosimPIN: JSONValue = [
        "setShort": "37", "setLong": "37", "set": "00", "setAgain": "33", "retries": 8, "wrong": ["31", "31", "34"],
        "retriesAfterWrong": 5, "rightWhileBlocked": "34", "rightAfterPowerCycle": "00", "retriesAfterRight": 8,
        "changeShort": "37", "changeWrongOld": "31", "retriesAfterChange": 7,
    ]

    @Test func whatTheDestructiveCaptureRecordedBecomesTheProfilesBehaviour() throws {
        guard case .object(var pin) = Self.fidosimPIN else { return }
        pin["setAgain"] = "30"
        let record: JSONValue = [
            "reset": "00", "pinUvAuthProtocol": 2, "pin": .object(pin),
            "token": [
                "unknownSubcommand": "3e", "subcommands": ["6": "3e", "7": "3e", "9": "3e"],
                "getPinTokenTwice": "different", "makeCredentialWithoutToken": "36", "sameTokenTwice": ["00", "00"],
                "previewWithPinToken": "00",
            ],
            "user": ["getAssertion": "00", "numberOfCredentials": 2, "user": ["id": true, "name": 80]],
            "capacity": ["limit": 256, "existing": 2, "made": 23, "refused": "28"],
        ]
        let document = try ProfileFile.document(json: Self.destructiveCapture(record), name: "real")
        #expect(
            document["behaviour"] == [
                "setPinWhenSet": "notAllowed", "pinToken": "withoutPermissions", "makeCredUvNotRqd": false,
                "clientPinSubcommands": [1, 2, 3, 4, 5, 6, 7],
            ]
        )
        #expect(document["quirks"] == ["dropsDisplayName": true])
        #expect(document["maxResidentCredentials"] == 25, "what the capacity probe found, not getInfo's 40")
        let profile = try ProfileFile.parse(document).profile
        #expect(profile.behaviour.setPINWhenSet == .notAllowed && profile.behaviour.pinToken == .withoutPermissions)
        #expect(profile.behaviour.clientPINSubcommands == [1, 2, 3, 4, 5, 6, 7] && profile.dropsDisplayName)
        #expect(try ProfileFile.unreproduced(json: Self.destructiveCapture(record)).isEmpty)
    }

    @Test func aKeyOfFidosimsOwnChoicesAddsNoBehaviourAndAPreviewTokenRuleIsRead() throws {
        let record: JSONValue = [
            "pin": Self.fidosimPIN,
            "token": [
                "unknownSubcommand": "3e", "subcommands": ["6": "3e", "7": "3e", "9": "14"],
                "getPinTokenTwice": "different", "makeCredentialWithoutToken": "00", "sameTokenTwice": ["00", "33"],
                "previewWithPinToken": "00",
            ],
            "user": ["user": ["id": true, "name": 80, "displayName": 80]],
            "capacity": ["limit": 30, "existing": 2, "made": 30],
        ]
        let document = try ProfileFile.document(json: Self.destructiveCapture(record), name: "k")
        #expect(document["behaviour"] == ["previewAcceptsPinToken": true])
        #expect(document["quirks"] == nil)
        #expect(document["maxResidentCredentials"] == 40, "the limit was reached: getInfo's count stands")
    }

    @Test func whatFidosimCannotCopyIsNamed() throws {
        guard case .object(var pin) = Self.fidosimPIN else { return }
        pin["retries"] = 6
        pin["setShort"] = "00"
        let record: JSONValue = [
            "reset": "00", "pin": .object(pin),
            "token": ["getPinTokenTwice": "different", "sameTokenTwice": ["00", "00"]],
            "user": ["user": ["id": true, "name": 64, "displayName": 64]],
        ]
        let lines = try ProfileFile.unreproduced(json: Self.destructiveCapture(record, versions: ["FIDO_2_0"]))
        #expect(
            lines == [
                #"pin.setShort: "00" (fidosim: "37")"#, "pin.retries: 6 (fidosim: 8)", "user.name: 64 (fidosim: 80)",
                "user.displayName: 64 (fidosim: 80)",
                "token: withoutPermissions tokens (fidosim: a key without FIDO_2_1 has powerUp)",
            ]
        )
        // The profile is still made: the members it can express.
        let document = try ProfileFile.document(
            json: Self.destructiveCapture(record, versions: ["FIDO_2_0"]),
            name: "o"
        )
        #expect(document["behaviour"] == nil)
        #expect(try ProfileFile.unreproduced(json: Self.capture).isEmpty, "nothing destructive recorded")
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

extension ProfileFile {
    /// The tests write their captures as a profile file holds them (JSON): read as `serve` reads them first.
    static func document(json capture: JSONValue, name: String) throws -> JSONValue {
        try document(capture: CaptureRecord(json: capture), name: name)
    }

    static func unreproduced(json capture: JSONValue) throws -> [String] {
        unreproduced(try CaptureRecord(json: capture))
    }
}
