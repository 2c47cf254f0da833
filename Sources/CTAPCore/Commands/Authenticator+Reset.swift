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

    /// The settings a key of this model has from the factory where nothing chose otherwise since the last reset:
    /// alwaysUv on for a profile with `alwaysUv` (CTAP 2.1 §6.6: a reset restores alwaysUv to its default). Run at
    /// start and by every reset.
    package mutating func applyFactoryDefaults() throws(CTAPError) {
        guard configuration.alwaysUvByDefault, !storage.settings.alwaysUv, !storage.settings.alwaysUvChosen else {
            return
        }
        var settings = storage.settings
        settings.alwaysUv = true
        try storage.setSettings(settings)
    }

    /// Wipes every credential and replaces the device secret, so no old credential id opens again.
    mutating func finishReset() throws(CTAPError) -> [UInt8] {
        try storage.wipe(newDeviceSecret: entropy.bytes(32))
        try storage.setPersistentToken(entropy.bytes(32))
        sealingKey = CredentialID.sealingKey(deviceSecret: storage.deviceSecret)
        credRandoms = CredRandomDeriver(deviceSecret: storage.deviceSecret)
        try applyFactoryDefaults()
        forgetVolatileState()
        createdCredentials.removeAll()
        createdU2F.removeAll()
        revokedCredentials.removeAll()
        backupStates.removeAll()
        countersRemoved.removeAll()
        return [CTAPStatus.ok.rawValue]
    }
}
