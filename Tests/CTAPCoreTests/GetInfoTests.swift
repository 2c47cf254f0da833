import CTAPCBOR
import CTAPCore
import Testing

/// authenticatorGetInfo (0x04).
@Suite struct GetInfoTests {
    private func info() throws -> CBORValue {
        var harness = try Harness()
        return try responseMap(harness.cbor(.getInfo))
    }

    @Test func responseIsCanonicalCBOR() throws {
        var harness = try Harness()
        let bytes = try #require(responseBytes(harness.cbor(.getInfo)))
        #expect(bytes.first == 0x00)
        #expect(CBORDecoder.isCanonical(Array(bytes.dropFirst())))
    }

    @Test func versionsAreU2FAndFIDO2() throws {
        #expect(try info()[1] == ["U2F_V2", "FIDO_2_0"])
    }

    @Test func aaguidIsTheConfiguredOne() throws {
        #expect(try info()[3] == .byteString(Harness.aaguid))
        var other = try Harness(configuration: AuthenticatorConfiguration())
        #expect(try responseMap(other.cbor(.getInfo))[3] == .byteString(AuthenticatorConfiguration.fidosimAAGUID))
    }

    @Test func optionsAnnounceResidentKeysAndPresenceButNoPIN() throws {
        let options = try #require(try info()[4])
        #expect(options["rk"] == true)
        #expect(options["up"] == true)
        #expect(options["clientPin"] == nil)
        #expect(options["uv"] == nil)
    }

    @Test func maxMessageSizeIsTheConfiguredOne() throws {
        #expect(try info()[5] == 3072)
    }

    @Test func transportsAreUSB() throws {
        #expect(try info()[9] == ["usb"])
    }

    @Test func onlyES256IsOffered() throws {
        let algorithms = try #require(try info()[10]?.arrayValue)
        #expect(algorithms.compactMap { $0["alg"]?.intValue } == [-7])
        #expect(algorithms.allSatisfy { $0["type"] == "public-key" })
    }

    @Test func noPINProtocolsAreAnnounced() throws {
        #expect(try info()[6] == nil)
    }

    @Test func firmwareVersionIsTheConfiguredOne() throws {
        #expect(try info()[0x0E] == 7)
    }
}
