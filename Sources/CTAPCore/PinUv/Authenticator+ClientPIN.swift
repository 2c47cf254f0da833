import CTAPCBOR
import Crypto

/// Subcommands of authenticatorClientPIN (CTAP 2.1 §6.5.5).
enum ClientPINSubcommand: Int {
    case getPINRetries = 0x01
    case getKeyAgreement = 0x02
    case setPIN = 0x03
    case changePIN = 0x04
    case getPinToken = 0x05
    case getPinUvAuthTokenUsingUvWithPermissions = 0x06
    case getUVRetries = 0x07
    case getPinUvAuthTokenUsingPinWithPermissions = 0x09
}

extension Authenticator {
    /// The permissions a token request asks for, checked (CTAP 2.1 §6.5.5.7 step 3–4): none → 0x02; one this key
    /// cannot grant (be without the sensor, pcmr together with anything else) → CTAP2_ERR_UNAUTHORIZED_PERMISSION.
    func requestedPermissions(_ bits: Int) throws(CTAPError) -> PinUvPermissions {
        guard bits > 0 else { throw CTAPError(.invalidParameter, "permissions are empty") }
        let requested = PinUvPermissions(rawValue: bits)
        var grantable: PinUvPermissions = [
            .makeCredential, .getAssertion, .credentialManagement, .largeBlobWrite, .authenticatorConfiguration,
        ]
        if configuration.fingerprintSensor { grantable.insert(.bioEnrollment) }
        // pcmr comes alone: it asks for the persistent token.
        if requested == .persistentCredentialManagementReadOnly { grantable = requested }
        guard grantable.isSuperset(of: requested) else {
            throw CTAPError(.unauthorizedPermission, "permissions 0x\(String(bits, radix: 16)) not supported")
        }
        return requested
    }

    /// The shortest PIN accepted, in Unicode code points (raised by setMinPINLength).
    var minPINLength: Int { storage.settings.minPINLength }

    /// authenticatorClientPIN (0x06).
    mutating func clientPIN(_ params: RequestParameters, now: Duration) throws(CTAPError) -> AuthenticatorOutcome {
        guard let raw = try params.int(0x02, "subCommand") else {
            throw CTAPError(.missingParameter, "subCommand missing")
        }
        let protocolNumber = try params.int(0x01, "pinUvAuthProtocol")
        let behaviour = configuration.profile.behaviour
        if behaviour.clientPINErrors == .other {
            // One answer for what the key cannot take: no protocol or not its own, an unknown subcommand.
            let known = ClientPINSubcommand(rawValue: raw) != nil && behaviour.clientPINSubcommands.contains(raw)
            guard let protocolNumber, configuration.profile.pinUvAuthProtocols.contains(protocolNumber), known else {
                throw CTAPError(.other, "clientPIN: no or an unknown pinUvAuthProtocol, or an unknown subcommand")
            }
        }
        let proto = try protocolNumber.map { (n) throws(CTAPError) in try pinProtocol(n) }
        // Type-check every member the request carries before acting on any.
        let keyAgreement = params.value(0x03)
        let pinUvAuthParam = try params.bytes(0x04, "pinUvAuthParam")
        let newPinEnc = try params.bytes(0x05, "newPinEnc")
        let pinHashEnc = try params.bytes(0x06, "pinHashEnc")
        let permissions = try params.int(0x09, "permissions")
        let rpId = try params.text(0x0A, "rpId")
        guard let subcommand = ClientPINSubcommand(rawValue: raw), behaviour.clientPINSubcommands.contains(raw) else {
            // CTAP2_ERR_INVALID_SUBCOMMAND is a CTAP 2.1 code; before it, CTAP1_ERR_INVALID_PARAMETER.
            throw CTAPError(
                configuration.profile.ctap21 ? .invalidSubcommand : .invalidParameter,
                "unknown clientPIN subcommand \(raw)"
            )
        }
        func need<T>(_ value: T?, _ name: String) throws(CTAPError) -> T {
            guard let value else { throw CTAPError(.missingParameter, "\(name) missing") }
            return value
        }

        switch subcommand {
        case .getPINRetries:
            if behaviour.pinProtocolForRetries == .required { _ = try need(proto, "pinUvAuthProtocol") }
            if storage.pin == nil && behaviour.pinRetriesWithoutPIN == .pinNotSet {
                throw CTAPError(.pinNotSet, "no PIN is set (this profile answers getPINRetries so)")
            }
            return .response(
                Self.success([0x03: CBORValue(storage.pinRetries), 0x04: .boolean(pinUv.isBlockedUntilPowerCycle)])
            )
        case .getKeyAgreement:
            let proto = try need(proto, "pinUvAuthProtocol")
            let key = pinUv.keyAgreementKey(proto).publicKey
            return .response(Self.success([0x01: PinUvAuthProtocol.coseKey(key)]))
        case .setPIN:
            try setPIN(
                proto: need(proto, "pinUvAuthProtocol"),
                keyAgreement: need(keyAgreement, "keyAgreement"),
                newPinEnc: need(newPinEnc, "newPinEnc"),
                pinUvAuthParam: need(pinUvAuthParam, "pinUvAuthParam")
            )
            return .response([CTAPStatus.ok.rawValue])
        case .changePIN:
            try changePIN(
                proto: need(proto, "pinUvAuthProtocol"),
                keyAgreement: need(keyAgreement, "keyAgreement"),
                pinHashEnc: need(pinHashEnc, "pinHashEnc"),
                newPinEnc: need(newPinEnc, "newPinEnc"),
                pinUvAuthParam: need(pinUvAuthParam, "pinUvAuthParam")
            )
            return .response([CTAPStatus.ok.rawValue])
        case .getPinToken:
            let proto = try need(proto, "pinUvAuthProtocol")
            let keyAgreement = try need(keyAgreement, "keyAgreement")
            let pinHashEnc = try need(pinHashEnc, "pinHashEnc")
            if permissions != nil || rpId != nil {
                throw CTAPError(.invalidParameter, "getPinToken takes no permissions or rpId")
            }
            let token = try tokenUsingPIN(
                proto: proto,
                keyAgreement: keyAgreement,
                pinHashEnc: pinHashEnc,
                permissions: [.makeCredential, .getAssertion],
                rpId: nil,
                forcedChange: .pinInvalid,
                getPinToken: true,
                now: now
            )
            return .response(Self.success([0x02: .byteString(token)]))
        case .getPinUvAuthTokenUsingPinWithPermissions:
            let proto = try need(proto, "pinUvAuthProtocol")
            let keyAgreement = try need(keyAgreement, "keyAgreement")
            let pinHashEnc = try need(pinHashEnc, "pinHashEnc")
            let requested = try requestedPermissions(need(permissions, "permissions"))
            let token = try tokenUsingPIN(
                proto: proto,
                keyAgreement: keyAgreement,
                pinHashEnc: pinHashEnc,
                permissions: requested,
                rpId: rpId,
                forcedChange: .pinPolicyViolation,
                now: now
            )
            return .response(Self.success([0x02: .byteString(token)]))
        case .getUVRetries:
            guard configuration.fingerprintSensor else {
                throw CTAPError(.invalidSubcommand, "this key has no built-in user verification")
            }
            return .response(Self.success([0x05: CBORValue(storage.uvRetries)]))
        case .getPinUvAuthTokenUsingUvWithPermissions:
            guard configuration.fingerprintSensor else {
                throw CTAPError(.invalidSubcommand, "this key has no built-in user verification")
            }
            return try tokenUsingUV(
                proto: need(proto, "pinUvAuthProtocol"),
                keyAgreement: need(keyAgreement, "keyAgreement"),
                permissions: need(permissions, "permissions"),
                rpId: rpId
            )
        }
    }

    /// setPIN (0x03): the first PIN of a key.
    mutating func setPIN(
        proto: PinUvAuthProtocol,
        keyAgreement: CBORValue,
        newPinEnc: [UInt8],
        pinUvAuthParam: [UInt8]
    ) throws(CTAPError) {
        if storage.pin != nil {
            throw CTAPError(configuration.profile.behaviour.setPINWhenSet.status, "a PIN is already set; use changePIN")
        }
        let secret = try pinUv.sharedSecret(proto, peer: PinUvAuthProtocol.peerKey(keyAgreement))
        guard proto.verify(key: secret, message: newPinEnc, signature: pinUvAuthParam) else {
            throw CTAPError(.pinAuthInvalid, "pinUvAuthParam does not authenticate newPinEnc")
        }
        let pin = try decryptNewPIN(newPinEnc, proto: proto, secret: secret)
        try storage.setPIN(pin)
    }

    /// changePIN (0x04): the current PIN proves the user, then the new PIN replaces it.
    mutating func changePIN(
        proto: PinUvAuthProtocol,
        keyAgreement: CBORValue,
        pinHashEnc: [UInt8],
        newPinEnc: [UInt8],
        pinUvAuthParam: [UInt8]
    ) throws(CTAPError) {
        try checkPINUsable()
        let secret = try pinUv.sharedSecret(proto, peer: PinUvAuthProtocol.peerKey(keyAgreement))
        guard proto.verify(key: secret, message: newPinEnc + pinHashEnc, signature: pinUvAuthParam) else {
            throw CTAPError(.pinAuthInvalid, "pinUvAuthParam does not authenticate newPinEnc | pinHashEnc")
        }
        try checkPINHash(pinHashEnc, proto: proto, secret: secret)
        let pin = try decryptNewPIN(newPinEnc, proto: proto, secret: secret)
        if storage.settings.forcePINChange, let current = storage.pin, constantTimeEqual(pin.hash, current.hash) {
            throw CTAPError(.pinPolicyViolation, "a forced PIN change needs a different PIN")
        }
        try storage.setPIN(pin)
        try storage.setPersistentToken(entropy.bytes(32))
        if storage.settings.forcePINChange {
            var settings = storage.settings
            settings.forcePINChange = false
            try storage.setSettings(settings)
        }
        pinUv.resetToken(&entropy)
    }

    /// getPinToken and getPinUvAuthTokenUsingPinWithPermissions: the PIN proves the user, then a token is handed
    /// out, encrypted for the platform: a new one with `permissions`, or from getPinToken (`getPinToken`) what the
    /// profile's token model says (CTAP 2.0: the power-up token; FIDO_2_1_PRE: a new token without permissions).
    mutating func tokenUsingPIN(
        proto: PinUvAuthProtocol,
        keyAgreement: CBORValue,
        pinHashEnc: [UInt8],
        permissions: PinUvPermissions,
        rpId: String?,
        forcedChange: CTAPStatus,
        getPinToken: Bool = false,
        now: Duration
    ) throws(CTAPError) -> [UInt8] {
        try checkPINUsable()
        let secret = try pinUv.sharedSecret(proto, peer: PinUvAuthProtocol.peerKey(keyAgreement))
        try checkPINHash(pinHashEnc, proto: proto, secret: secret)
        if storage.settings.forcePINChange {
            throw CTAPError(forcedChange, "the PIN must be changed first (forcePINChange)")
        }
        if permissions == .persistentCredentialManagementReadOnly, let persistent = storage.persistentToken {
            // The persistent token (CTAP 2.2): read-only credential management across power cycles.
            return try proto.encrypt(persistent, secret: secret, iv: entropy.bytes(16))
        }
        let model = getPinToken ? configuration.profile.behaviour.pinToken : .permissions
        switch model {
        case .powerUp:
            // One token per power-up (made new by a PIN change): every getPinToken returns it.
            if !(pinUv.token.isInUse(now: now) && pinUv.token.withoutPermissions) {
                pinUv.token.begin(
                    permissions: permissions,
                    rpId: nil,
                    userIsPresent: false,
                    now: now,
                    fromGetPinToken: true,
                    withoutPermissions: true
                )
            }
        case .withoutPermissions, .permissions:
            pinUv.resetToken(&entropy)
            pinUv.token.begin(
                permissions: permissions,
                rpId: rpId,
                userIsPresent: false,
                now: now,
                fromGetPinToken: getPinToken,
                withoutPermissions: model == .withoutPermissions
            )
        }
        return try proto.encrypt(pinUv.token.value, secret: secret, iv: entropy.bytes(16))
    }

    /// The checks before any PIN entry: a PIN is set, not blocked, and not latched until a power cycle.
    func checkPINUsable() throws(CTAPError) {
        guard storage.pin != nil else { throw CTAPError(.pinNotSet, "no PIN is set") }
        if storage.pinRetries == 0 { throw CTAPError(.pinBlocked, "the PIN is blocked; reset the key") }
        if pinUv.isBlockedUntilPowerCycle {
            throw CTAPError(.pinAuthBlocked, "three wrong PINs since power-up; replug the key")
        }
    }

    /// Checks an encrypted PIN hash against the stored one. The retry counter is decremented and committed
    /// before the comparison; a match restores it, a mismatch regenerates the key-agreement keys and counts
    /// towards the power-cycle block.
    mutating func checkPINHash(_ pinHashEnc: [UInt8], proto: PinUvAuthProtocol, secret: [UInt8]) throws(CTAPError) {
        guard let stored = storage.pin else { throw CTAPError(.pinNotSet, "no PIN is set") }
        try storage.setPinRetries(storage.pinRetries - 1)
        let hash = proto.decrypt(pinHashEnc, secret: secret)
        guard let hash, hash.count == 16, constantTimeEqual(hash, stored.hash) else {
            pinUv.regenerateKeyAgreementKeys(&entropy)
            pinUv.consecutiveMismatches += 1
            if storage.pinRetries == 0 { throw CTAPError(.pinBlocked, "wrong PIN; no attempts left") }
            if pinUv.isBlockedUntilPowerCycle {
                throw CTAPError(.pinAuthBlocked, "wrong PIN three times; replug the key")
            }
            throw CTAPError(.pinInvalid, "wrong PIN, \(storage.pinRetries) attempts left")
        }
        pinUv.consecutiveMismatches = 0
        try storage.setPinRetries(StoredPIN.maxRetries)
        if storage.settings.uvCountSinceLastPinEntry != 0 {
            var settings = storage.settings
            settings.uvCountSinceLastPinEntry = 0
            try storage.setSettings(settings)
        }
        // The PIN also unblocks built-in user verification.
        if configuration.fingerprintSensor && storage.uvRetries != StoredPIN.maxUvRetries {
            try storage.setUvRetries(StoredPIN.maxUvRetries)
        }
    }

    /// Decrypts and checks a new PIN: 64 bytes padded with zeros, 4 to 63 bytes of UTF-8 of at least
    /// ``minPINLength`` code points.
    func decryptNewPIN(_ newPinEnc: [UInt8], proto: PinUvAuthProtocol, secret: [UInt8]) throws(CTAPError) -> StoredPIN {
        guard var padded = proto.decrypt(newPinEnc, secret: secret) else {
            throw CTAPError(.pinAuthInvalid, "newPinEnc does not decrypt")
        }
        defer { padded.wipe() }
        guard padded.count == 64 else { throw CTAPError(.invalidParameter, "the padded PIN is not 64 bytes") }
        var pinBytes = Array(padded.prefix { $0 != 0 })
        defer { pinBytes.wipe() }
        guard padded[pinBytes.count...].allSatisfy({ $0 == 0 }) else {
            throw CTAPError(.pinPolicyViolation, "the PIN contains a zero byte")
        }
        guard pinBytes.count <= 63 else { throw CTAPError(.pinPolicyViolation, "the PIN is longer than 63 bytes") }
        guard let text = String(validating: pinBytes, as: UTF8.self) else {
            throw CTAPError(.pinPolicyViolation, "the PIN is not UTF-8")
        }
        let codePoints = text.unicodeScalars.count
        guard codePoints >= minPINLength else {
            throw CTAPError(.pinPolicyViolation, "the PIN is shorter than \(minPINLength) code points")
        }
        if storage.settings.pinComplexityPolicy && AuthenticatorSettings.isTooSimple(text) {
            throw CTAPError(.pinPolicyViolation, "the PIN complexity policy refuses repeats and runs")
        }
        return StoredPIN(hash: Array(SHA256.hash(data: pinBytes).prefix(16)), codePoints: codePoints)
    }
}
