import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// A profile captured from a key (`fidosim profile capture`): getInfo answers the captured map with the members
/// that follow the key's state answered live, and the replayed probes answer the captured bytes.
@Suite struct CapturedProfileTests {
    /// What an imagined real key answered: its own firmwareVersion, certifications, an option fidosim lacks, a PIN
    /// already set, 17 credentials left, and no encIdentifier.
    static let captured: [CBORValue: CBORValue] = [
        0x01: ["U2F_V2", "FIDO_2_0", "FIDO_2_1"], 0x02: ["hmac-secret"],
        0x03: .byteString(Array(repeating: 7, count: 16)),
        0x04: ["rk": true, "up": true, "clientPin": true, "vendorThing": true, "alwaysUv": false],
        0x05: 1200, 0x06: [2, 1], 0x0D: 6, 0x0E: 0x0005_0702, 0x13: ["FIDO": 2], 0x14: 17, 0x19: .byteString([1, 2]),
    ]

    func harness() throws -> Harness {
        var configuration = Harness.configuration
        var profile = KeyProfile(name: "captured", versions: ["U2F_V2", "FIDO_2_0", "FIDO_2_1"])
        profile.capturedInfo = Self.captured
        profile.cannedAnswers = [[0x3F]: [0x7F], [0x01, 0xFF]: [0x12]]
        profile.cannedU2FAnswers = [[0x00, 0x99, 0x00, 0x00, 0x00]: [0x6E, 0x00]]
        configuration.profile = profile
        return try Harness(configuration: configuration)
    }

    @Test func getInfoIsTheCapturedMapWithTheLiveStateMembers() throws {
        var h = try harness()
        let info = try responseMap(h.cbor(.getInfo))
        // The captured members, as captured: firmwareVersion, certifications, the option fidosim lacks.
        #expect(info[0x0E] == 0x0005_0702)
        #expect(info[0x13] == ["FIDO": 2])
        #expect(info[0x04]?["vendorThing"] == true)
        #expect(info[0x05] == 1200)
        // The state members are this key's: no PIN, its own remaining count, minPINLength and encIdentifier (new at
        // each request, never the captured bytes).
        #expect(info[0x04]?["clientPin"] == false)
        #expect(info[0x14] != 17 && info[0x14] != nil)
        #expect(info[0x0D] == 4)
        #expect(info[0x19]?.bytesValue?.count == 32)
        // Members fidosim has and the captured key lacks stay out.
        #expect(info[0x0A] == nil && info[0x1D] == nil)
        #expect(info[0x04]?["credMgmt"] == nil)
    }

    @Test func replayedProbesAnswerTheCapturedBytesAndOthersAreAnsweredByTheKey() throws {
        var h = try harness()
        #expect(responseBytes(h.cbor(raw: [0x3F])) == [0x7F])
        #expect(responseBytes(h.cbor(raw: [0x01, 0xFF])) == [0x12])
        #expect(responseBytes(h.cbor(raw: [0x3E])) == [CTAPStatus.invalidCommand.rawValue])
        #expect(responseBytes(h.u2f([0x00, 0x99, 0x00, 0x00, 0x00])) == [0x6E, 0x00])
        #expect(responseBytes(h.u2f([0x00, 0x98, 0x00, 0x00, 0x00])) == [0x6D, 0x00])
    }
}
