import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing

/// U2F (CTAP1) over `handleU2F`: VERSION, REGISTER, AUTHENTICATE and APDU framing.
@Suite struct U2FTests {
    // MARK: Framing

    @Test(
        arguments: [
            ("no body", [0x00, 0x03, 0x00, 0x00]),
            ("short Le", [0x00, 0x03, 0x00, 0x00, 0x00]),
            ("extended Le", [0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00]),
        ] as [(String, [UInt8])]
    )
    func versionIsU2FV2(name: String, apdu: [UInt8]) throws {
        var harness = try Harness()
        #expect(harness.u2f(apdu) == .response(Array("U2F_V2".utf8) + [0x90, 0x00]))
    }

    @Test func versionWithDataIsWrongLength() throws {
        var harness = try Harness()
        #expect(harness.u2f(U2FRequest.extended(0x03, [0x01])) == .response([0x67, 0x00]))
        #expect(harness.u2f(U2FRequest.short(0x03, [0x01])) == .response([0x67, 0x00]))
    }

    @Test(arguments: [0x80, 0x01, 0xFF] as [UInt8])
    func classOtherThanZeroIsNotSupported(cla: UInt8) throws {
        var harness = try Harness()
        #expect(harness.u2f(U2FRequest.extended(cla: cla, 0x03)) == .response([0x6E, 0x00]))
        #expect(harness.u2f(U2FRequest.register().replacing(at: 0, with: cla)) == .response([0x6E, 0x00]))
    }

    @Test(arguments: [0x00, 0x04, 0x09, 0x40, 0xC0, 0xFF] as [UInt8])
    func unknownInstructionIsNotSupported(ins: UInt8) throws {
        var harness = try Harness()
        #expect(harness.u2f(U2FRequest.extended(ins)) == .response([0x6D, 0x00]))
    }

    static let badLengths: [(String, [UInt8])] = {
        let body = U2FRequest.challenge + U2FRequest.application
        return [
            ("empty", []),
            ("three header bytes", [0x00, 0x03, 0x00]),
            ("extended Lc one more than the data", [0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x41] + body + [0x00, 0x00]),
            ("extended Lc one less than the data", [0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x3F] + body + [0x00, 0x00]),
            ("extended with a one-byte Le", [0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x40] + body + [0x00]),
            ("extended with a three-byte Le", [0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x40] + body + [0x00, 0x00, 0x00]),
            ("extended Lc of zero with data", [0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]),
            ("short Lc one more than the data", [0x00, 0x01, 0x00, 0x00, 0x41] + body),
            ("short Lc one less than the data", [0x00, 0x01, 0x00, 0x00, 0x3F] + body + [0x00, 0x00]),
            ("short with two Le bytes", [0x00, 0x01, 0x00, 0x00, 0x40] + body + [0x00, 0x00]),
            ("register with 63 bytes", U2FRequest.extended(0x01, Array(body.dropLast()))),
            ("register with 65 bytes", U2FRequest.extended(0x01, body + [0x00])),
            ("register with no data", U2FRequest.extended(0x01)),
            ("authenticate with 64 bytes", U2FRequest.extended(0x02, p1: 0x03, body)),
            (
                "authenticate with a handle one byte short",
                U2FRequest.extended(0x02, p1: 0x03, body + [0x40] + Array(repeating: 1, count: 0x3F))
            ),
            (
                "authenticate with a handle one byte long",
                U2FRequest.extended(0x02, p1: 0x03, body + [0x3E] + Array(repeating: 1, count: 0x3F))
            ),
        ]
    }()

    @Test(arguments: badLengths)
    func lengthsThatDoNotAddUpAreWrongLength(name: String, apdu: [UInt8]) throws {
        var harness = try Harness()
        #expect(harness.u2f(apdu) == .response([0x67, 0x00]))
        #expect(harness.authenticator.pendingPrompt == nil)
    }

    // MARK: Register

    @Test(arguments: ["extended", "short"])
    func registerResponseIsSignedByTheAttestationCertificate(encoding: String) throws {
        var harness = try Harness()
        let data = U2FRequest.challenge + U2FRequest.application
        let apdu = encoding == "short" ? U2FRequest.short(0x01, data) : U2FRequest.extended(0x01, data)
        let outcome = harness.u2f(apdu)
        #expect(outcome == .needsUserPresence(PresencePrompt(command: "U2F register", protocolKind: .u2f)))
        let bytes = try #require(responseBytes(harness.resume(.approved)))
        let registration = try U2FRegistration(bytes)

        #expect(registration.point.count == 65)
        #expect(registration.point.first == 0x04)
        #expect(registration.keyHandle.count == 63)
        #expect(bytes.count == 1 + 65 + 1 + 63 + registration.certificate.count + registration.signature.count + 2)

        let certificate = try ParsedCertificate(registration.certificate)
        // The certificate is self-signed by the attestation key.
        #expect(verifiesES256(certificate.signature, over: certificate.tbs.encoded, with: certificate.subjectPublicKey))
        // The signature is one DER SEQUENCE of two INTEGERs, exactly.
        let signature = try DERNode(parsing: registration.signature)
        #expect(signature.tag == 0x30)
        #expect(signature.children.map(\.tag) == [0x02, 0x02])

        let signed =
            [0x00] + U2FRequest.application + U2FRequest.challenge + registration.keyHandle
            + registration.point
        #expect(verifiesES256(registration.signature, over: signed, with: certificate.subjectPublicKey))
        // Not with the new credential's own key.
        #expect(!verifiesES256(registration.signature, over: signed, with: registration.publicKey))
    }

    @Test func attestationKeyIsTheSameForEveryRegistration() throws {
        var harness = try Harness()
        let first = try harness.u2fRegister()
        let second = try harness.u2fRegister(application: sha256("https://other.example"))
        #expect(first.certificate == second.certificate)
        #expect(first.keyHandle != second.keyHandle)
        #expect(first.point != second.point)
    }

    @Test func registerDoesNotTouchTheCounter() throws {
        var harness = try Harness()
        _ = try harness.u2fRegister()
        #expect(harness.signCounter == 0)
    }

    @Test(arguments: [PresenceResult.denied, .timedOut, .cancelled])
    func unapprovedRegisterIsConditionsNotSatisfied(answer: PresenceResult) throws {
        var harness = try Harness()
        #expect(harness.answer(harness.u2f(U2FRequest.register()), with: answer) == .response([0x69, 0x85]))
    }

    // MARK: Authenticate

    @Test func checkOnlyWithAValidHandleIsConditionsNotSatisfied() throws {
        var harness = try Harness()
        let registration = try harness.u2fRegister()
        let outcome = harness.u2f(U2FRequest.authenticate(p1: 0x07, keyHandle: registration.keyHandle))
        #expect(outcome == .response([0x69, 0x85]))
        #expect(harness.signCounter == 0)
    }

    @Test(arguments: [0x07, 0x03, 0x08] as [UInt8])
    func handleThatDoesNotOpenIsWrongData(p1: UInt8) throws {
        var harness = try Harness()
        let registration = try harness.u2fRegister()
        var tampered = registration.keyHandle
        tampered[20] ^= 0x80
        let otherApp = sha256("https://evil.example")
        var foreign = try Harness(deviceSecret: Harness.foreignSecret)
        let foreignHandle = try foreign.u2fRegister().keyHandle
        for (handle, application) in [
            (tampered, U2FRequest.application),
            (registration.keyHandle, otherApp),
            (Array(registration.keyHandle.dropLast()), U2FRequest.application),
            ([], U2FRequest.application),
            (foreignHandle, U2FRequest.application),
        ] {
            let apdu = U2FRequest.authenticate(p1: p1, keyHandle: handle, application: application)
            #expect(harness.u2f(apdu) == .response([0x6A, 0x80]))
        }
        #expect(harness.signCounter == 0)
        // The genuine handle does open.
        #expect(
            harness.u2f(U2FRequest.authenticate(p1: 0x07, keyHandle: registration.keyHandle))
                == .response([0x69, 0x85])
        )
    }

    @Test func enforcedAuthenticationIsSignedWithTheRegisteredKey() throws {
        var harness = try Harness()
        let registration = try harness.u2fRegister()
        let challenge: [UInt8] = Array(repeating: 0xC4, count: 32)
        let outcome = harness.u2f(
            U2FRequest.authenticate(p1: 0x03, keyHandle: registration.keyHandle, challenge: challenge)
        )
        #expect(outcome == .needsUserPresence(PresencePrompt(command: "U2F authenticate", protocolKind: .u2f)))
        let bytes = try #require(responseBytes(harness.resume(.approved)))
        #expect(bytes.suffix(2) == [0x90, 0x00])
        #expect(bytes[0] == 0x01)
        #expect(Array(bytes[1..<5]) == [0, 0, 0, 1])
        let signature = Array(bytes[5..<(bytes.count - 2)])
        let signed = U2FRequest.application + [0x01, 0, 0, 0, 1] + challenge
        #expect(verifiesES256(signature, over: signed, with: registration.publicKey))
        #expect(
            !verifiesES256(
                signature,
                over: U2FRequest.application + [0x01, 0, 0, 0, 1] + U2FRequest.challenge,
                with: registration.publicKey
            )
        )
    }

    @Test(arguments: [PresenceResult.denied, .timedOut, .cancelled])
    func unapprovedAuthenticationIsConditionsNotSatisfied(answer: PresenceResult) throws {
        var harness = try Harness()
        let registration = try harness.u2fRegister()
        let outcome = harness.u2f(U2FRequest.authenticate(p1: 0x03, keyHandle: registration.keyHandle))
        #expect(harness.answer(outcome, with: answer) == .response([0x69, 0x85]))
        #expect(harness.signCounter == 0)
    }

    @Test func dontEnforceSignsAtOnceWithoutTheUserPresentFlag() throws {
        var harness = try Harness()
        let registration = try harness.u2fRegister()
        let outcome = harness.u2f(U2FRequest.authenticate(p1: 0x08, keyHandle: registration.keyHandle))
        let bytes = try #require(responseBytes(outcome))
        #expect(bytes.suffix(2) == [0x90, 0x00])
        #expect(Array(bytes[0..<5]) == [0x00, 0, 0, 0, 1])
        let signature = Array(bytes[5..<(bytes.count - 2)])
        #expect(
            verifiesES256(
                signature,
                over: U2FRequest.application + [0x00, 0, 0, 0, 1] + U2FRequest.challenge,
                with: registration.publicKey
            )
        )
    }

    @Test(arguments: [0x00, 0x01, 0x05, 0x83, 0x87, 0xFF] as [UInt8])
    func unknownControlByteIsIncorrectParameters(p1: UInt8) throws {
        var harness = try Harness()
        let registration = try harness.u2fRegister()
        #expect(
            harness.u2f(U2FRequest.authenticate(p1: p1, keyHandle: registration.keyHandle)) == .response([0x6B, 0x00])
        )
        #expect(harness.signCounter == 0)
    }

    @Test func shortEncodedAuthenticationWorks() throws {
        var harness = try Harness()
        let registration = try harness.u2fRegister()
        let data = U2FRequest.challenge + U2FRequest.application + [63] + registration.keyHandle
        #expect(harness.u2f(U2FRequest.short(0x02, p1: 0x07, data)) == .response([0x69, 0x85]))
        #expect(harness.u2f(Array(U2FRequest.short(0x02, p1: 0x07, data).dropLast())) == .response([0x69, 0x85]))
    }

    @Test func u2fCredentialIsUsableInCTAP2WithTheAppIdAsRpId() throws {
        var harness = try Harness()
        let registration = try harness.u2fRegister()
        #expect(sha256(U2FRequest.appId) == U2FRequest.application)
        let outcome = harness.cbor(
            .getAssertion,
            Request.getAssertion(rpId: U2FRequest.appId, allowList: [registration.keyHandle])
        )
        let assertion = try Assertion(responseMap(harness.approve(outcome)))
        #expect(assertion.credentialId == registration.keyHandle)
        #expect(assertion.authData.rpIdHash == U2FRequest.application)
        #expect(assertion.authData.flags == 0x01)
        #expect(assertion.user == nil)
        #expect(assertion.verifies(with: registration.publicKey))
        // Another rpId does not open it.
        #expect(
            harness.cbor(.getAssertion, Request.getAssertion(allowList: [registration.keyHandle])) == .response([0x2E])
        )
    }

    @Test func ctap2CredentialIsUsableInU2FWithTheRpIdHashAsApplication() throws {
        var harness = try Harness()
        let registration = try harness.register()
        let outcome = harness.u2f(
            U2FRequest.authenticate(p1: 0x08, keyHandle: registration.credentialId, application: sha256("example.com"))
        )
        let bytes = try #require(responseBytes(outcome))
        #expect(bytes.suffix(2) == [0x90, 0x00])
        let signature = Array(bytes[5..<(bytes.count - 2)])
        #expect(
            verifiesES256(
                signature,
                over: sha256("example.com") + Array(bytes[0..<5]) + U2FRequest.challenge,
                with: registration.publicKey
            )
        )
    }
}
