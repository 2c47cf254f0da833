import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import FlashStore
import Testing

/// WebAuthn Level 3's backup eligibility (BE, 0x08) and backup state (BS, 0x10) flags, and the response overrides
/// of Chromium's DevTools (a zero signature, UP or UV cleared).
@Suite struct BackupFlagsTests {
    static let be: UInt8 = 0x08
    static let bs: UInt8 = 0x10

    func harness(eligible: Bool = false, backedUp: Bool = false) throws -> Harness {
        var configuration = Harness.configuration
        configuration.backupEligible = eligible
        configuration.backupState = backedUp
        return try Harness(configuration: configuration)
    }

    func assertionFlags(_ harness: inout Harness, _ id: [UInt8]) throws -> UInt8 {
        try harness.getAssertion(Request.getAssertion(allowList: [id])).authData.flags
    }

    @Test func aKeyWithoutBackupSetsNeitherFlag() throws {
        var h = try harness()
        let made = try h.register()
        #expect(made.authData.flags & (Self.be | Self.bs) == 0)
        #expect(try assertionFlags(&h, made.credentialId) & (Self.be | Self.bs) == 0)
    }

    @Test(arguments: [true, false])
    func theKeysDefaultsGoWithEachCredential(resident: Bool) throws {
        var h = try harness(eligible: true, backedUp: true)
        let made = try h.register(Request.makeCredential(rk: resident))
        #expect(made.authData.flags & (Self.be | Self.bs) == Self.be | Self.bs)
        #expect(try assertionFlags(&h, made.credentialId) & (Self.be | Self.bs) == Self.be | Self.bs)
        var eligibleOnly = try harness(eligible: true)
        let other = try eligibleOnly.register(Request.makeCredential(rk: resident))
        #expect(other.authData.flags & (Self.be | Self.bs) == Self.be)
    }

    @Test(arguments: [true, false])
    func theBackupStateChangesAndTheEligibilityDoesNot(resident: Bool) throws {
        var h = try harness(eligible: true)
        let made = try h.register(Request.makeCredential(rk: resident))
        let id = made.credentialId
        #expect(try h.authenticator.setCredentialProperties(id: id, backupEligible: nil, backupState: true))
        #expect(try assertionFlags(&h, id) & (Self.be | Self.bs) == Self.be | Self.bs)
        #expect(try h.authenticator.setCredentialProperties(id: id, backupEligible: true, backupState: false))
        #expect(try assertionFlags(&h, id) & (Self.be | Self.bs) == Self.be)
        #expect(throws: CTAPError.self) {
            try h.authenticator.setCredentialProperties(id: id, backupEligible: false, backupState: nil)
        }
        #expect(
            try h.authenticator.setCredentialProperties(id: [1, 2, 3], backupEligible: nil, backupState: true) == false
        )
        let listed = try #require(try h.authenticator.managedCredentials().first { $0.id == id })
        #expect(listed.backupEligible && !listed.backupState)
    }

    /// WebDriver's signCount: -1 removes a credential's counter (its assertions report 0 and leave the key's counter
    /// alone); a number raises the key's one counter, never lowers it.
    @Test(arguments: [true, false])
    func theSignCountOfACredential(resident: Bool) throws {
        var h = try harness()
        let id = try h.register(Request.makeCredential(rk: resident)).credentialId
        let other = try h.register(Request.makeCredential(user: Request.user(id: [9]), rk: true)).credentialId
        #expect(
            try h.authenticator.setCredentialProperties(id: id, backupEligible: nil, backupState: nil, signCount: -1)
        )
        let before = h.signCounter
        #expect(try h.getAssertion(Request.getAssertion(allowList: [id])).authData.counter == 0)
        #expect(h.signCounter == before)
        #expect(try h.getAssertion(Request.getAssertion(allowList: [other])).authData.counter == before + 1)
        #expect(try h.authenticator.managedCredentials().first { $0.id == id }?.signCount == 0)
        // A number: the key's counter goes up to it, and the credential counts again.
        #expect(
            try h.authenticator.setCredentialProperties(id: id, backupEligible: nil, backupState: nil, signCount: 500)
        )
        #expect(try h.getAssertion(Request.getAssertion(allowList: [id])).authData.counter == 501)
        // Never back: refused, nothing changed.
        #expect(throws: CTAPError.self) {
            try h.authenticator.setCredentialProperties(id: id, backupEligible: nil, backupState: nil, signCount: 7)
        }
        #expect(h.signCounter == 501)
        // An unknown credential changes nothing.
        #expect(
            try h.authenticator.setCredentialProperties(
                id: [1, 2],
                backupEligible: nil,
                backupState: nil,
                signCount: -1
            )
                == false
        )
        #expect(try h.getAssertion(Request.getAssertion(allowList: [other])).authData.counter == 502)
    }

    @Test func anIneligibleCredentialIsNeverBackedUp() throws {
        var h = try harness()
        let made = try h.register(Request.makeCredential(rk: true))
        #expect(throws: CTAPError.self) {
            try h.authenticator.setCredentialProperties(id: made.credentialId, backupEligible: nil, backupState: true)
        }
    }

    @Test func theFlagsOfAStoredCredentialSurviveARemount() throws {
        var entropy = EntropySource(SeededGenerator(seed: 9))
        let storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        var configuration = AuthenticatorConfiguration()
        configuration.backupEligible = true
        var authenticator = try Authenticator(
            configuration: configuration,
            storage: storage,
            entropy: entropy,
            now: .zero
        )
        guard
            case .needsUserPresence = authenticator.handleCBOR(
                [0x01] + CBORValue.map(Request.makeCredential(rk: true)).encoded(),
                now: .zero
            ),
            case .response = authenticator.resume(.approved, now: .zero)
        else { throw HarnessFailure("makeCredential did not complete") }
        let id = try #require(authenticator.storage.residentCredentials.first?.id)
        _ = try authenticator.setCredentialProperties(id: id, backupEligible: nil, backupState: true)
        guard let flash = authenticator.storage as? FlashStorage<SimulatedFlash> else { throw HarnessFailure("") }
        var fresh = EntropySource(SeededGenerator(seed: 10))
        let remounted = try FlashStorage(device: flash.store.device, entropy: &fresh)
        let stored = try #require(remounted.residentCredentials.first)
        #expect(stored.backupEligible && stored.backupState)
    }

    @Test func aResponseOverrideChangesTheNextAnswersOnly() throws {
        var h = try harness()
        h.authenticator.faults.responseOverride = ResponseOverride(
            bogusSignature: true,
            clearUserPresent: true,
            clearUserVerified: false,
            remaining: 1
        )
        let made = try h.register()
        #expect(made.authData.flags & 0x01 == 0)
        #expect(made.response[3]?["sig"]?.bytesValue?.allSatisfy { $0 == 0 } == true)
        #expect(h.authenticator.faults.responseOverride == nil)
        let assertion = try h.getAssertion(Request.getAssertion(allowList: [made.credentialId]))
        #expect(assertion.authData.flags & 0x01 == 0x01)
        #expect(!assertion.signature.allSatisfy { $0 == 0 })
    }

    @Test func anOverrideWithoutACountLastsUntilCleared() throws {
        var h = try harness()
        let made = try h.register()
        h.authenticator.faults.responseOverride = ResponseOverride(
            bogusSignature: true,
            clearUserPresent: false,
            clearUserVerified: false,
            remaining: nil
        )
        for _ in 0..<3 {
            let assertion = try h.getAssertion(Request.getAssertion(allowList: [made.credentialId]))
            #expect(assertion.signature.allSatisfy { $0 == 0 } && !assertion.signature.isEmpty)
        }
        #expect(h.authenticator.faults.responseOverride != nil)
    }
}
