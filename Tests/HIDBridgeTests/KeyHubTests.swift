import CTAPCBOR
import CTAPCore
import ControlProtocol
import Testing

@testable import HIDBridge
@testable import VirtualKey

/// The hub's half that needs no socket: WebDriver's options as a request carries them, the key they make (what its
/// getInfo and makeCredential say), and the prompts of a removed key.
@Suite struct KeyHubTests {
    func options(_ params: String) throws -> VirtualAuthenticatorOptions {
        let line = #"{"id":1,"command":"addVirtualAuthenticator","params":"# + params + "}"
        guard case .addVirtualAuthenticator(let options) = try ControlRequest.parse(Array(line.utf8)).get().command
        else {
            Issue.record("not an addVirtualAuthenticator request")
            return VirtualAuthenticatorOptions()
        }
        return options
    }

    func refusal(_ params: String) -> ControlError? {
        let line = #"{"id":1,"command":"addVirtualAuthenticator","params":"# + params + "}"
        guard case .failure(let failure) = ControlRequest.parse(Array(line.utf8)) else { return nil }
        return failure.error
    }

    /// The key the hub would make for `params`, and its getInfo.
    func key(_ params: String) throws -> (KeyHarness, [CBORValue: CBORValue]) {
        let spec = KeyHub.spec(for: try options(params), name: "a", directory: "/run/x")
        var harness = try KeyHarness(presence: .approve(after: .zero), spec: spec)
        let out = messages(harness.send(command: cbor, payload: [0x04]))
        let info = try CBORDecoder.decode(Array(try #require(out.first).payload.dropFirst()))
        guard case .map(let map) = info else { throw ControlError(.failed, "getInfo is not a map") }
        return (harness, map)
    }

    @Test func webDriversDefaultsAreAConsentingUserAndNothingElse() throws {
        let defaults = try options("{}")
        #expect(defaults == VirtualAuthenticatorOptions())
        let spec = KeyHub.spec(for: defaults, name: "authenticator-1", directory: "/run/x")
        #expect(spec.control == "/run/x/authenticator-1.sock")
        #expect(spec.flash == "memory" && spec.presence == "approve" && spec.uv == "none")
        #expect(!spec.residentKeys && spec.profile == "fidosim")
        #expect(spec.withoutExtensions == VirtualAuthenticatorOptions.switchedExtensions)
    }

    @Test func aKeyWithoutResidentKeysSaysSoAndRefusesOne() throws {
        var (harness, info) = try key("{}")
        guard case .map(let options)? = info[0x04] else { throw ControlError(.failed, "no options") }
        #expect(options["rk"] == false)
        #expect(options["uv"] == nil)
        guard case .array(let extensions)? = info[0x02] else { throw ControlError(.failed, "no extensions") }
        #expect(extensions.contains("credProtect"))
        #expect(!extensions.contains("hmac-secret") && !extensions.contains("hmac-secret-mc"))
        #expect(!extensions.contains("largeBlobKey") && !extensions.contains("credBlob"))
        let out = messages(harness.send(command: cbor, payload: makeCredentialRequest(rk: true)))
        #expect(out.last?.payload == [CTAPStatus.unsupportedOption.rawValue])
    }

    @Test func optionsSwitchOnWhatTheyName() throws {
        let (_, info) = try key(
            #"{"hasResidentKey":true,"hasUserVerification":true,"extensions":["largeBlob","credProps"],"hasPrf":true}"#
        )
        guard case .map(let options)? = info[0x04], case .array(let extensions)? = info[0x02] else {
            throw ControlError(.failed, "no options")
        }
        #expect(options["rk"] == true && options["uv"] == true)
        #expect(extensions.contains("largeBlobKey") && extensions.contains("hmac-secret"))
        #expect(!extensions.contains("credBlob") && !extensions.contains("minPinLength"))
    }

    @Test func protocolsChooseAProfileAndFidosimsOwnOptionsPass() throws {
        #expect(try options(#"{"protocol":"ctap1/u2f"}"#).protocolProfile == "u2f-only")
        #expect(try options(#"{"ctap2Version":"ctap2_0"}"#).protocolProfile == "ctap20")
        #expect(try options(#"{"protocol":"ctap2_1"}"#).protocolProfile == "fidosim")
        let own = try options(#"{"name":"k.1","flash":"/tmp/k.img","profile":"yubikey5","serial":"S1"}"#)
        let spec = KeyHub.spec(for: own, name: "k.1", directory: "")
        #expect(spec.control == "k.1.sock" && spec.flash == "/tmp/k.img" && spec.profile == "yubikey5")
        #expect(spec.serial == "S1")
        let denying = KeyHub.spec(for: try options(#"{"isUserConsenting":false}"#), name: "d", directory: "/r")
        #expect(denying.presence == "deny")
    }

    @Test func badOptionsAreRefused() {
        #expect(refusal(#"{"transport":"ble"}"#)?.code == .invalidParams)
        #expect(refusal(#"{"transport":"hybrid"}"#)?.code == .invalidParams)
        #expect(refusal(#"{"extensions":["devicePubKey"]}"#)?.message.contains("unknown extension") == true)
        #expect(refusal(#"{"extensions":"largeBlob"}"#)?.code == .invalidParams)
        #expect(refusal(#"{"protocol":"ctap3"}"#)?.code == .invalidParams)
        #expect(refusal(#"{"ctap2Version":"ctap2_2"}"#)?.code == .invalidParams)
        #expect(refusal(#"{"name":".hidden"}"#)?.code == .invalidParams)
        #expect(refusal(#"{"name":"a/b"}"#)?.code == .invalidParams)
        #expect(refusal(#"{"defaultBackupState":true}"#)?.code == .invalidParams)
        #expect(refusal(#"{"isUserVerified":1}"#)?.code == .invalidParams)
        #expect(refusal(#"{"colour":"red"}"#)?.message.contains("unknown parameter") == true)
        #expect(refusal(#"{"serial":""}"#)?.code == .invalidParams)
    }

    @Test func aRemovedKeysPromptsGoAndTheLaterKeysMoveUp() throws {
        var queue = PromptQueue()
        let prompt = PresencePrompt(command: "makeCredential", rpId: "example.com", userName: "bob")
        _ = queue.ask(slot: 0, prompt: prompt, now: .zero)
        _ = queue.ask(slot: 1, prompt: prompt, now: .zero)
        _ = queue.ask(slot: 2, prompt: prompt, now: .zero)
        let gone = queue.forget(slot: 1)
        #expect(gone.map(\.slot) == [1])
        #expect(queue.entries.map(\.slot) == [0, 1])
    }
}
