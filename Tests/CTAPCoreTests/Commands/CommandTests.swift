import CTAPCBOR
import CTAPCore
import Testing

/// Status bytes, unknown commands, empty messages and authenticatorSelection.
@Suite struct CommandTests {
    /// CTAP 2.1 §8.2 status codes, written out so that a wrong raw value in ``CTAPStatus`` shows.
    @Test(
        arguments: [
            (CTAPStatus.ok, 0x00), (.invalidCommand, 0x01), (.invalidParameter, 0x02), (.invalidLength, 0x03),
            (.cborUnexpectedType, 0x11), (.invalidCBOR, 0x12), (.missingParameter, 0x14),
            (.credentialExcluded, 0x19), (.unsupportedAlgorithm, 0x26), (.operationDenied, 0x27),
            (.keyStoreFull, 0x28), (.unsupportedOption, 0x2B), (.invalidOption, 0x2C), (.keepaliveCancel, 0x2D),
            (.noCredentials, 0x2E), (.userActionTimeout, 0x2F), (.notAllowed, 0x30), (.pinNotSet, 0x35),
            (.other, 0x7F),
        ] as [(CTAPStatus, UInt8)]
    )
    func statusBytesAreTheSpecifiedOnes(status: CTAPStatus, byte: UInt8) {
        #expect(status.rawValue == byte)
    }

    @Test(arguments: [0x00, 0x03, 0x05, 0x09, 0x0E, 0x40, 0x42, 0xBF, 0xFF] as [UInt8])
    func unknownCommandIsInvalidCommand(command: UInt8) throws {
        var harness = try Harness()
        #expect(harness.cbor(raw: [command]) == .response([0x01]))
        #expect(harness.cbor(raw: [command, 0xA0]) == .response([0x01]))
    }

    @Test func commandsWithParametersNeedThem() throws {
        var harness = try Harness()
        for command in [
            CTAPCommand.clientPIN, .credentialManagement, .credentialManagementPreview, .largeBlobs, .config,
        ] {
            #expect(harness.cbor(raw: [command.rawValue]) == .response([CTAPStatus.missingParameter.rawValue]))
        }
    }

    @Test func emptyMessageIsInvalidLength() throws {
        var harness = try Harness()
        #expect(harness.cbor(raw: []) == .response([0x03]))
    }

    @Test func selectionAsksForPresenceThenSucceeds() throws {
        var harness = try Harness()
        let outcome = harness.cbor(.selection)
        #expect(outcome == .needsUserPresence(PresencePrompt(command: "selection")))
        #expect(harness.authenticator.pendingPrompt?.command == "selection")
        #expect(harness.resume(.approved) == .response([0x00]))
        #expect(harness.authenticator.pendingPrompt == nil)
    }

    @Test func deniedSelectionIsOperationDenied() throws {
        var harness = try Harness()
        #expect(harness.answer(harness.cbor(.selection), with: .denied) == .response([0x27]))
    }
}
