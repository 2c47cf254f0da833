extension Authenticator {
    /// authenticatorReset (0x07): only within the reset window after power-up, and only with a touch.
    mutating func reset(now: Duration) throws(CTAPError) -> AuthenticatorOutcome {
        guard configuration.transportsForReset.contains(configuration.transport) else {
            throw CTAPError(
                .operationDenied,
                "reset is allowed over \(configuration.transportsForReset.joined(separator: ", ")), not \(configuration.transport)"
            )
        }
        if configuration.resetWindowEnabled && now - powerUpTime > configuration.resetWindow {
            throw CTAPError(.notAllowed, "reset is only allowed within \(configuration.resetWindow) of power-up")
        }
        let longTouch = configuration.profile.ctap23 && storage.settings.longTouchForReset
        return askPresence(.reset, PresencePrompt(command: "reset", gesture: longTouch ? .longTouch : .touch))
    }

    /// Wipes every credential and replaces the device secret, so no old credential id opens again.
    mutating func finishReset() throws(CTAPError) -> [UInt8] {
        try storage.wipe(newDeviceSecret: entropy.bytes(32))
        try storage.setPersistentToken(entropy.bytes(32))
        sealingKey = CredentialID.sealingKey(deviceSecret: storage.deviceSecret)
        credRandoms = CredRandomDeriver(deviceSecret: storage.deviceSecret)
        forgetVolatileState()
        createdCredentials.removeAll()
        backupStates.removeAll()
        return [CTAPStatus.ok.rawValue]
    }
}
