import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing
import _CryptoExtras

/// The CTAP 2.3 additions: getInfo 0x18, 0x1A, 0x1C, 0x1E, 0x1F, enableLongTouchForReset, transportsForReset and
/// the pinComplexityPolicy extension; and a profile without FIDO_2_3 that shows none of them.
@Suite struct CTAP23Tests {
    func config(_ subcommand: Int, _ params: [CBORValue: CBORValue]? = nil) -> [CBORValue: CBORValue] {
        var map: [CBORValue: CBORValue] = [1: CBORValue(subcommand)]
        if let params { map[2] = .map(params) }
        return map
    }

    /// encCredStoreState decrypted as CTAP 2.3 §6.4 (and python-fido2's Info.get_cred_store_state) does.
    func storeState(_ harness: inout Harness, token: [UInt8]) throws -> [UInt8] {
        let sealed = try #require(try responseMap(harness.cbor(.getInfo))[0x1E]?.bytesValue)
        #expect(sealed.count == 32)
        return try decryptForPersistentToken(sealed, token: token, info: "encCredStoreState")
    }

    @Test func getInfoHasTheMembers() throws {
        var harness = try Harness()
        let info = try responseMap(harness.cbor(.getInfo))
        #expect(info[1]?.arrayValue?.last == "FIDO_2_3")
        #expect(info[0x18] == false)
        #expect(info[0x1A] == ["usb"])
        #expect(info[0x1C] == nil)
        #expect(info[0x1E]?.bytesValue?.count == 32)  // IV and one block, for the persistent token
        #expect(info[0x1F] == [1, 2, 3, 4])
    }

    @Test func theStoreStateChangesWithTheDiscoverableCredentialsOnly() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        let persistent = try harness.token("1234", permissions: 0x40).value
        let empty = try storeState(&harness, token: persistent)
        #expect(try storeState(&harness, token: persistent) == empty)
        let mc = try harness.token("1234", permissions: 0x01)
        _ = harness.approve(
            harness.cbor(.makeCredential, authorized(Request.makeCredential(rk: true), mc, paramKey: 8))
        )
        let one = try storeState(&harness, token: persistent)
        #expect(one != empty)
        let mc2 = try harness.token("1234", permissions: 0x01)
        _ = harness.approve(
            harness.cbor(.makeCredential, authorized(Request.makeCredential(rk: false), mc2, paramKey: 8))
        )
        harness.authenticator.powerCycle(now: harness.now)
        #expect(try storeState(&harness, token: persistent) == one)
    }

    @Test func longTouchForResetAsksForALongTouch() throws {
        var harness = try Harness()
        #expect(status(of: harness.cbor(.config, config(4))) == .ok)
        #expect(try responseMap(harness.cbor(.getInfo))[0x18] == true)
        #expect(harness.cbor(.reset) == .needsUserPresence(PresencePrompt(command: "reset", gesture: .longTouch)))
        #expect(harness.resume(.approved) == .response([0x00]))
        // Reset restores the default.
        #expect(try responseMap(harness.cbor(.getInfo))[0x18] == false)
        #expect(harness.cbor(.reset) == .needsUserPresence(PresencePrompt(command: "reset")))
    }

    @Test func resetOnlyOverTheTransportsForReset() throws {
        var configuration = Harness.configuration
        configuration.transportsForReset = ["nfc"]
        var harness = try Harness(configuration: configuration)
        #expect(try responseMap(harness.cbor(.getInfo))[0x1A] == ["nfc"])
        #expect(status(of: harness.cbor(.reset)) == .operationDenied)
    }

    @Test func thePinComplexityPolicyURLIsABytestring() throws {
        var configuration = Harness.configuration
        configuration.pinComplexityPolicyURL = "https://example.com/pin"
        var harness = try Harness(configuration: configuration)
        #expect(try responseMap(harness.cbor(.getInfo))[0x1C] == .byteString(Array("https://example.com/pin".utf8)))
    }

    @Test func thePinComplexityPolicyExtensionAnswersTheAllowedRPs() throws {
        var configuration = Harness.configuration
        configuration.minPinLengthRPIDs = [Request.rpId]
        var harness = try Harness(configuration: configuration)
        let asking = Request.makeCredential().setting(6, ["pinComplexityPolicy": true])
        #expect(try harness.register(asking).authData.extensions == ["pinComplexityPolicy": false])
        #expect(status(of: harness.cbor(.config, config(3, [4: true]))) == .ok)
        #expect(try harness.register(asking).authData.extensions == ["pinComplexityPolicy": true])
        let other = asking.setting(2, ["id": "other.example"])
        #expect(try harness.register(other).authData.extensions == nil)
        let wrongType = Request.makeCredential().setting(6, ["pinComplexityPolicy": 1])
        #expect(status(of: harness.cbor(.makeCredential, wrongType)) == .cborUnexpectedType)
    }

    @Test func aCTAP21ProfileHasNoneOfIt() throws {
        var configuration = Harness.configuration
        configuration.profile = KeyProfile(name: "2.1", versions: ["U2F_V2", "FIDO_2_0", "FIDO_2_1"])
        var harness = try Harness(configuration: configuration)
        let info = try responseMap(harness.cbor(.getInfo))
        for key in [0x18, 0x1A, 0x1C, 0x1E, 0x1F] { #expect(info.mapValue?[CBORValue(key)] == nil) }
        #expect(info[2]?.arrayValue?.contains("pinComplexityPolicy") == false)
        #expect(status(of: harness.cbor(.config, config(4))) == .invalidSubcommand)
        #expect(KeyProfile(versions: ["FIDO_2_0", "FIDO_2_3"]).problem != nil)
    }
}
