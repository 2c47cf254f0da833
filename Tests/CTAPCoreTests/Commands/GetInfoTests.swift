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

    @Test func versionsAreU2FAndFIDO2UpTo23() throws {
        #expect(try info()[1] == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1", "FIDO_2_3"])
    }

    @Test func extensionsAreTheImplementedOnes() throws {
        #expect(
            try info()[2] == [
                "credBlob", "credProtect", "hmac-secret", "hmac-secret-mc", "largeBlobKey", "minPinLength",
                "pinComplexityPolicy", "thirdPartyPayment",
            ]
        )
        #expect(try info()[0x0F] == 32)  // maxCredBlobLength
    }

    @Test func aaguidIsTheConfiguredOne() throws {
        #expect(try info()[3] == .byteString(Harness.aaguid))
        var other = try Harness(configuration: AuthenticatorConfiguration())
        #expect(try responseMap(other.cbor(.getInfo))[3] == .byteString(AuthenticatorConfiguration.fidosimAAGUID))
    }

    @Test func optionsOfAPINKeyWithoutBuiltInUV() throws {
        let options = try #require(try info()[4]?.mapValue)
        #expect(
            options == [
                "rk": true, "up": true, "plat": false, "clientPin": false, "pinUvAuthToken": true, "credMgmt": true,
                "credentialMgmtPreview": true, "makeCredUvNotRqd": true, "largeBlobs": true, "authnrCfg": true,
                "alwaysUv": false, "setMinPINLength": true, "perCredMgmtRO": true,
            ]
        )
    }

    @Test func maxMessageSizeIsTheConfiguredOne() throws {
        #expect(try info()[5] == 3072)
    }

    @Test func transportsAreUSB() throws {
        #expect(try info()[9] == ["usb"])
    }

    @Test func everyAlgorithmIsOfferedES256First() throws {
        let algorithms = try #require(try info()[10]?.arrayValue)
        let expected = [-7, -8, -35, -36, -9, -51, -52, -19, -49, -50, -257, -37, -47]
        #expect(algorithms.compactMap { $0["alg"]?.intValue } == expected)
        #expect(algorithms.allSatisfy { $0["type"] == "public-key" })
    }

    @Test func pinProtocolsTwoThenOne() throws {
        #expect(try info()[6] == [2, 1])
    }

    @Test func pinLengthAndForceChange() throws {
        #expect(try info()[0x0C] == false)
        #expect(try info()[0x0D] == 4)
        #expect(try info()[0x10] == 8)  // maxRPIDsForSetMinPINLength
    }

    @Test func largeBlobArraySize() throws {
        #expect(try info()[0x0B] == 4096)
    }

    @Test func firmwareVersionIsTheConfiguredOne() throws {
        #expect(try info()[0x0E] == 7)
    }
}
