import CTAPCBOR
import CTAPCore
import CTAPHID
import ControlProtocol
import Crypto
import Testing

@testable import HIDBridge
@testable import VirtualKey

extension KeyHarness {
    /// Runs a control command and returns its result (the test fails on an error).
    mutating func control(_ command: ControlCommand) -> JSONValue? {
        let (result, outputs) = key.execute(command, now: now)
        #expect(outputs.isEmpty || command == .touch || command == .refuse)
        switch result {
        case .success(let value): return value
        case .failure(let error):
            Issue.record("control command failed: \(error)")
            return nil
        }
    }

    mutating func controlError(_ command: ControlCommand) -> ControlError? {
        if case .failure(let error) = key.execute(command, now: now).result { return error }
        return nil
    }

    /// Sends a CTAP2 request and lets the automatic presence answer; returns the final response payload.
    mutating func ctap(_ request: [UInt8]) -> [UInt8]? {
        var out = messages(send(command: cbor, payload: request)).filter { $0.command != keepalive }
        var t = now
        while out.isEmpty && t < now + .seconds(2) {
            t += .milliseconds(50)
            out = messages(advance(to: t)).filter { $0.command != keepalive }
        }
        return out.last?.payload
    }
}

func getAssertionRequest(rpId: String = "example.com", allow: [[UInt8]] = [], up: Bool = true) -> [UInt8] {
    var params: [CBORValue: CBORValue] = [
        1: .textString(rpId), 2: .byteString(Array(repeating: 0xCD, count: 32)), 5: ["up": .boolean(up)],
    ]
    if !allow.isEmpty { params[3] = .array(allow.map { ["id": .byteString($0), "type": "public-key"] }) }
    return [0x02] + CBORValue.map(params).encoded()
}

/// Verifies an assertion's ES256 signature with the given public key.
func verifyAssertion(_ payload: [UInt8], publicKey: P256.Signing.PublicKey) throws -> Bool {
    let map = try CBORDecoder.decode(Array(payload.dropFirst()))
    guard let authData = map[2]?.bytesValue, let sig = map[3]?.bytesValue else { return false }
    let signature = try P256.Signing.ECDSASignature(derRepresentation: sig)
    return publicKey.isValidSignature(signature, for: authData + Array(repeating: 0xCD, count: 32))
}

@Suite struct KeyControlTests {
    @Test func anImportedCredentialSignsUnderItsOwnId() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(10)))
        let key = P256.Signing.PrivateKey()
        let id: [UInt8] = Array("webdriver-credential-1".utf8)
        let added = h.control(
            .addCredential(
                CredentialParameters(
                    credentialId: id,
                    isResidentCredential: false,
                    rpId: "example.com",
                    privateKey: Array(key.derRepresentation),
                    signCount: 41
                )
            )
        )
        #expect(added?["credentialId"] == .string(Base64URL.encode(id)))
        let responseValue = h.ctap(getAssertionRequest(allow: [id]))
        let response = try #require(responseValue)
        #expect(response.first == 0x00)
        #expect(try verifyAssertion(response, publicKey: key.publicKey))
        let authData = try #require(try CBORDecoder.decode(Array(response.dropFirst()))[2]?.bytesValue)
        #expect(Array(authData[33..<37]) == [0, 0, 0, 42])  // the counter went past the imported signCount
        // Non-discoverable: a discovery request does not find it.
        #expect(h.ctap(getAssertionRequest()) == [CTAPStatus.noCredentials.rawValue])
        // Another RP does not get it either.
        #expect(h.ctap(getAssertionRequest(rpId: "other.example", allow: [id])) == [CTAPStatus.noCredentials.rawValue])
    }

    @Test func anImportedResidentCredentialIsDiscoverableAndListed() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(10)))
        let key = Curve25519.Signing.PrivateKey()
        let pkcs8: [UInt8] =
            [0x30, 0x2E, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]
            + Array(key.rawRepresentation)
        _ = h.control(
            .addCredential(
                CredentialParameters(
                    credentialId: [9, 9, 9],
                    isResidentCredential: true,
                    rpId: "example.com",
                    privateKey: pkcs8,
                    userHandle: [0x75],
                    userName: "bob",
                    userDisplayName: "Bob"
                )
            )
        )
        let responseValue = h.ctap(getAssertionRequest())
        let response = try #require(responseValue)
        #expect(response.first == 0x00)
        let map = try CBORDecoder.decode(Array(response.dropFirst()))
        #expect(map[1]?["id"] == .byteString([9, 9, 9]))
        #expect(map[4]?["id"] == .byteString([0x75]))
        let authData = try #require(map[2]?.bytesValue)
        let sig = try #require(map[3]?.bytesValue)
        #expect(key.publicKey.isValidSignature(sig, for: authData + Array(repeating: 0xCD, count: 32)))

        let listedValue = h.control(.getCredentials)?["credentials"]?.arrayValue
        let listed = try #require(listedValue)
        #expect(listed.count == 1)
        #expect(listed[0]["privateKey"] == .string(Base64URL.encode(pkcs8)))
        #expect(listed[0]["algorithm"] == "EdDSA")
        #expect(listed[0]["userName"] == "bob")
        #expect(listed[0]["isResidentCredential"] == true)

        _ = h.control(.removeCredential(id: [9, 9, 9]))
        #expect(h.ctap(getAssertionRequest()) == [CTAPStatus.noCredentials.rawValue])
        #expect(h.controlError(.removeCredential(id: [9, 9, 9]))?.code == .notFound)
    }

    @Test func credentialsMadeOverCTAPAreListedWithTheirPrivateKeys() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(10)))
        for rk in [false, true] {
            let responseValue = h.ctap(makeCredentialRequest(rk: rk))
            let response = try #require(responseValue)
            #expect(response.first == 0x00)
        }
        let listedValue = h.control(.getCredentials)?["credentials"]?.arrayValue
        let listed = try #require(listedValue)
        #expect(listed.map { $0["isResidentCredential"] } == [true, false])
        for credential in listed {
            let pkcs8 = try #require(credential["privateKey"]?.stringValue.flatMap(Base64URL.decode))
            let key = try P256.Signing.PrivateKey(derRepresentation: pkcs8)
            let id = try #require(credential["credentialId"]?.stringValue.flatMap(Base64URL.decode))
            let assertionValue = h.ctap(getAssertionRequest(allow: [id]))
            let assertion = try #require(assertionValue)
            #expect(try verifyAssertion(assertion, publicKey: key.publicKey))
        }
        #expect(h.control(.removeAllCredentials)?["removed"] == 2)
        #expect(h.control(.getCredentials)?["credentials"] == [])
        // Removed is revoked: the non-discoverable credential's id, which holds its key, no longer signs.
        let ids = listed.compactMap { $0["credentialId"]?.stringValue.flatMap(Base64URL.decode) }
        for id in ids { #expect(h.ctap(getAssertionRequest(allow: [id])) == [CTAPStatus.noCredentials.rawValue]) }
    }

    @Test func removingOneNonDiscoverableCredentialRevokesItAndNoOther() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(10)))
        for _ in 0..<2 { #expect(h.ctap(makeCredentialRequest(rk: false))?.first == 0x00) }
        let listed = try #require(h.control(.getCredentials)?["credentials"]?.arrayValue)
        let ids = listed.compactMap { $0["credentialId"]?.stringValue.flatMap(Base64URL.decode) }
        try #require(ids.count == 2)
        _ = h.control(.removeCredential(id: ids[0]))
        #expect(h.ctap(getAssertionRequest(allow: [ids[0]])) == [CTAPStatus.noCredentials.rawValue])
        #expect(h.ctap(getAssertionRequest(allow: [ids[1]]))?.first == 0x00)
        #expect(h.controlError(.removeCredential(id: ids[0]))?.code == .notFound)
    }

    @Test func rejectsAKeyThatIsNotPKCS8() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(10)))
        let error = h.controlError(
            .addCredential(
                CredentialParameters(
                    credentialId: [1],
                    isResidentCredential: false,
                    rpId: "example.com",
                    privateKey: [1, 2, 3]
                )
            )
        )
        #expect(error?.code == .invalidParams)
        #expect(h.control(.getCredentials)?["credentials"] == [])
    }

    @Test func anInjectedStatusAnswersTheNextRequestsOfThatCommand() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(10)))
        _ = h.control(.injectFault(.status(target: .makeCredential, status: 0x31, count: 2)))
        #expect(h.ctap([0x04])?.first == 0x00)  // another command is untouched
        let injected = h.send(command: cbor, payload: makeCredentialRequest())
        #expect(messages(injected).last?.payload == [0x31])
        #expect(
            injected.contains {
                if case .processed(let r) = $0 { r.injected && r.status == "pinInvalid" } else { false }
            }
        )
        #expect(h.ctap(makeCredentialRequest()) == [0x31])
        #expect(h.ctap(makeCredentialRequest())?.first == 0x00)
    }

    @Test func keyStoreFullAfterNCredentials() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(10)))
        _ = h.control(.injectFault(.keyStoreFull(afterCredentials: 1)))
        var request = makeCredentialRequest(rk: true)
        #expect(h.ctap(request)?.first == 0x00)
        request =
            [0x01]
            + CBORValue.map([
                1: .byteString(Array(repeating: 0xAB, count: 32)), 2: ["id": "example.com"],
                3: ["id": .byteString([4, 5, 6]), "name": "carol"], 4: [["alg": -7, "type": "public-key"]],
                7: ["rk": true],
            ]).encoded()
        #expect(h.ctap(request) == [CTAPStatus.keyStoreFull.rawValue])
        _ = h.control(.clearFaults)
        #expect(h.ctap(request)?.first == 0x00)
    }

    /// A key whose storage takes injected flash write failures, and that storage.
    func keyWithFaultingStorage() throws -> (KeyHarness, FaultInjectingStorage) {
        let storage = FaultInjectingStorage(MemoryStorage(deviceSecret: Array(repeating: 7, count: 32)))
        let authenticator = try Authenticator(
            storage: storage,
            entropy: EntropySource(SeededGenerator(seed: 1)),
            now: .zero
        )
        var h = try KeyHarness(presence: .approve(after: .milliseconds(10)))
        h.key = VirtualKey(hid: CTAPHIDMachine(channelSeed: 3), authenticator: authenticator, presence: h.key.presence)
        return (h, storage)
    }

    @Test func aFailedFlashWriteStoresNothing() throws {
        var (h, _) = try keyWithFaultingStorage()
        _ = h.control(.injectFault(.flashWriteFailure(count: 1)))
        #expect(h.ctap(makeCredentialRequest(rk: true)) == [CTAPStatus.other.rawValue])
        #expect(h.key.authenticator.storage.residentCredentials.isEmpty)
        #expect(h.ctap(makeCredentialRequest(rk: true))?.first == 0x00)
        #expect(h.key.authenticator.storage.residentCredentials.count == 1)
    }

    @Test func droppedReportsAreLost() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(10)))
        _ = h.control(.injectFault(.dropReports(inbound: true, count: 1)))
        #expect(messages(h.send(command: cbor, payload: [0x04])).isEmpty)
        #expect(messages(h.send(command: cbor, payload: [0x04])).count == 1)
        _ = h.control(.injectFault(.dropReports(inbound: false, count: 1)))
        #expect(messages(h.send(command: 0x01, payload: Array(repeating: 1, count: 8))).isEmpty)  // the PING echo
        #expect(messages(h.send(command: 0x01, payload: Array(repeating: 1, count: 8))).count == 1)
    }

    @Test func everyArmedFaultIsOneValueAndClearFaultsEmptiesIt() throws {
        var (h, storage) = try keyWithFaultingStorage()
        let faults: [Fault] = [
            .status(target: .makeCredential, status: 0x31, count: 2),
            .status(target: .makeCredential, status: 0x27, count: 1),
            .keyStoreFull(afterCredentials: 3), .flashWriteFailure(count: 2), .dropReports(inbound: false, count: 4),
            .responseOverride(bogusSignature: true, badUP: false, badUV: true, count: nil),
        ]
        var reported: JSONValue?
        for fault in faults { reported = h.control(.injectFault(fault))?["faults"] }
        let armed = h.key.faults
        #expect(armed.transport.status.map(\.status) == [0x27], "a second fault for a command replaces the first")
        #expect(armed.transport.dropOutbound == 4 && armed.flashWriteFailures == 2)
        #expect(armed.authenticator.keyStoreFullAfter == 3 && h.key.authenticator.faults == armed.authenticator)
        #expect(reported == armed.json && reported?["flashWriteFailures"] == 2 && reported?["keyStoreFullAfter"] == 3)
        #expect(h.control(.clearFaults)?["faults"] == ArmedFaults().json)
        #expect(h.key.faults == ArmedFaults() && storage.faults.pendingFailures == 0)
    }

    @Test func approveNextThenBackToPrompt() throws {
        var h = try KeyHarness(presence: .prompt)
        _ = h.control(.presence(.approveNext(delayMilliseconds: 10)))
        #expect(h.ctap(makeCredentialRequest())?.first == 0x00)
        #expect(h.key.presence == .prompt)
        _ = h.send(command: cbor, payload: makeCredentialRequest())
        #expect(h.key.pendingPrompt?.command == "makeCredential")
        let touched = h.control(.touch)
        #expect(touched?["answered"] == true)
        #expect(h.key.pendingPrompt == nil)
        #expect(h.control(.touch)?["answered"] == false)
    }

    @Test func refuseAnswersTheWaitingRequestWithADenial() throws {
        var h = try KeyHarness(presence: .prompt)
        #expect(h.control(.refuse)?["answered"] == false)
        _ = h.send(command: cbor, payload: makeCredentialRequest())
        let (result, outputs) = h.key.execute(.refuse, now: h.now)
        #expect((try? result.get())?["answered"] == true)
        #expect((try? result.get())?["command"] == "makeCredential")
        #expect(h.key.pendingPrompt == nil)
        #expect(messages(outputs).last?.payload == [CTAPStatus.operationDenied.rawValue])
    }

    @Test func setUserVerifiedDecidesTheFinger() throws {
        let authenticator = try Authenticator(
            configuration: AuthenticatorConfiguration(fingerprintSensor: true, preEnrolledFingerprints: 1),
            storage: MemoryStorage(deviceSecret: Array(repeating: 7, count: 32)),
            entropy: EntropySource(SeededGenerator(seed: 5)),
            now: .zero
        )
        var h = try KeyHarness(presence: .approve(after: .milliseconds(10)))
        h.key = VirtualKey(hid: CTAPHIDMachine(channelSeed: 3), authenticator: authenticator, presence: h.key.presence)
        let uvRequest =
            [0x01]
            + CBORValue.map([
                1: .byteString(Array(repeating: 0xAB, count: 32)), 2: ["id": "example.com"],
                3: ["id": .byteString([1]), "name": "a"], 4: [["alg": -7, "type": "public-key"]], 7: ["uv": true],
            ]).encoded()
        _ = h.control(.setUserVerified(false))
        #expect(h.ctap(uvRequest) == [CTAPStatus.operationDenied.rawValue])  // no PIN: the finger does not match
        _ = h.control(.setUserVerified(true))
        let okValue = h.ctap(uvRequest)
        let ok = try #require(okValue)
        #expect(ok.first == 0x00)
        let authData = try #require(try CBORDecoder.decode(Array(ok.dropFirst()))[2]?.bytesValue)
        #expect(authData[32] & 0x04 != 0)  // UV
    }

    @Test func statusReportsThePendingRequestAndCounters() throws {
        var h = try KeyHarness(presence: .prompt)
        #expect(h.ctap([0x04])?.first == 0x00)
        _ = h.send(command: cbor, payload: makeCredentialRequest())
        let statusValue = h.control(.status)
        let status = try #require(statusValue)
        #expect(status["pending"]?["rpId"] == "example.com")
        #expect(status["pending"]?["userName"] == "alice")
        #expect(status["counters"]?["requests"]?["getInfo"] == 1)
        #expect(status["aaguid"] == "f1d0f1d0-5157-4e00-8a6e-000000000001")
        #expect(status["info"]?["aaguid"] == "f1d0f1d051574e008a6e000000000001")
        #expect(status["info"]?["maxMsgSize"] == 7609)
        #expect(status["attestation"]?["type"] == "shared-batch")
        #expect(status["storage"]?["discoverableCredentials"] == 0)
    }

    @Test func setOptionChangesAlwaysUvAndTheResetWindow() throws {
        var h = try KeyHarness(presence: .approve(after: .milliseconds(10)))
        let options = h.control(.setOption(OptionChanges(resetWindow: false, alwaysUv: true)))
        #expect(options?["alwaysUv"] == true)
        #expect(options?["resetWindow"] == false)
        #expect(h.key.authenticator.storage.settings.alwaysUv)
        h.now = .seconds(60)
        #expect(h.ctap([0x07]) == [0x00])  // reset long after power-up
    }
}
