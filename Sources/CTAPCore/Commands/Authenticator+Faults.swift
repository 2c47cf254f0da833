/// The faults a test rig arms in the authenticator itself (the control plane's `injectFault`); the key's transport
/// faults (injected statuses, dropped reports) and flash write failures are armed around it (VirtualKey's
/// `ArmedFaults` holds all of them as one value).
package struct AuthenticatorFaults: Sendable, Equatable {
    /// KEY_STORE_FULL once this many discoverable credentials are stored.
    package var keyStoreFullAfter: Int?
    /// What the next answers get wrong on purpose.
    package var responseOverride: ResponseOverride?

    package init(keyStoreFullAfter: Int? = nil, responseOverride: ResponseOverride? = nil) {
        self.keyStoreFullAfter = keyStoreFullAfter
        self.responseOverride = responseOverride
    }
}

/// What a test rig makes the key get wrong in its next makeCredential and getAssertion answers, with the names of
/// Chromium's DevTools WebAuthn domain (`setResponseOverrideBits`: isBogusSignature, isBadUP, isBadUV), so that a
/// relying party's rejection of such answers can be tested.
package struct ResponseOverride: Sendable, Equatable {
    /// The signature (the attestation statement's, the assertion's) is all zero bytes, of its usual length.
    package var bogusSignature: Bool
    /// The UP flag is clear in the authenticator data (which is then signed as it is).
    package var clearUserPresent: Bool
    /// The UV flag is clear in the authenticator data.
    package var clearUserVerified: Bool
    /// How many more answers it changes; nil: every one until the faults are cleared.
    package var remaining: Int?

    package init(bogusSignature: Bool, clearUserPresent: Bool, clearUserVerified: Bool, remaining: Int?) {
        self.bogusSignature = bogusSignature
        self.clearUserPresent = clearUserPresent
        self.clearUserVerified = clearUserVerified
        self.remaining = remaining
    }

    func apply(_ flags: AuthenticatorDataFlags) -> AuthenticatorDataFlags {
        var flags = flags
        if clearUserPresent { flags.remove(.userPresent) }
        if clearUserVerified { flags.remove(.userVerified) }
        return flags
    }

    func apply(signature: [UInt8]) -> [UInt8] {
        bogusSignature ? [UInt8](repeating: 0, count: signature.count) : signature
    }
}

extension Authenticator {
    /// The override for the answer being made now, counted down (nil when none is set). An answer without user
    /// presence (a platform's silent `up: false` probe of an allow list) is left alone and not counted: the override
    /// is for the ceremony a test watches.
    mutating func takeResponseOverride(userPresent: Bool = true) -> ResponseOverride? {
        guard userPresent, var override = faults.responseOverride else { return nil }
        if let remaining = override.remaining {
            override.remaining = remaining - 1
            faults.responseOverride = remaining > 1 ? override : nil
        }
        return override
    }
}
