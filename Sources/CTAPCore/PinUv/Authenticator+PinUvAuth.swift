extension Authenticator {
    /// Whether the key is protected by some form of user verification: a PIN is set, or a fingerprint enrolled.
    var isProtectedByUV: Bool { storage.pin != nil || isBuiltInUVConfigured }

    /// Whether built-in user verification can run: the sensor is on and a finger is enrolled (getInfo uv).
    var isBuiltInUVConfigured: Bool { configuration.fingerprintSensor && !storage.fingerprints.isEmpty }

    /// The PIN/UV auth protocol of a request that carries a pinUvAuthParam: CTAP2_ERR_MISSING_PARAMETER without
    /// one, CTAP1_ERR_INVALID_PARAMETER for one this key does not support; nil when no pinUvAuthParam was sent.
    func pinUvAuthProtocol(_ number: Int?, with pinUvAuthParam: [UInt8]?) throws(CTAPError) -> PinUvAuthProtocol? {
        guard pinUvAuthParam != nil else {
            return try number.map { (n) throws(CTAPError) in try pinProtocol(n) }
        }
        guard let number else { throw CTAPError(.missingParameter, "pinUvAuthProtocol missing") }
        return try pinProtocol(number)
    }

    /// Checks the pinUvAuthParam of makeCredential or getAssertion (CTAP 2.1 §6.1.2 step 11.1, §6.2.2 step 6.1):
    /// the token is in use and authenticates `clientDataHash`, has `permission`, was obtained for `rpId` or for
    /// no RP (it is then bound to `rpId`), and its user verified flag is set. Every failure is
    /// CTAP2_ERR_PIN_AUTH_INVALID; on a key without a PIN it is CTAP2_ERR_PIN_NOT_SET.
    mutating func verifyPinUvAuthParam(
        _ pinUvAuthParam: [UInt8],
        proto: PinUvAuthProtocol,
        clientDataHash: [UInt8],
        permission: PinUvPermissions,
        rpId: String,
        now: Duration
    ) throws(CTAPError) {
        guard isProtectedByUV else {
            throw CTAPError(.pinNotSet, "a pinUvAuthParam was sent but no PIN or fingerprint is set")
        }
        try verifyToken(pinUvAuthParam, proto: proto, message: clientDataHash, now: now)
        // A token without permissions (CTAP 2.0, FIDO_2_1_PRE) is good for any RP, any number of times.
        if pinUv.token.withoutPermissions { return }
        guard pinUv.token.permissions.contains(permission) else {
            throw CTAPError(
                .pinAuthInvalid,
                "the pinUvAuthToken lacks permission 0x\(String(permission.rawValue, radix: 16))"
            )
        }
        if let bound = pinUv.token.rpId, bound != rpId {
            throw CTAPError(.pinAuthInvalid, "the pinUvAuthToken is for \(bound), not \(rpId)")
        }
        guard pinUv.token.userVerifiedFlag(now: now) else {
            throw CTAPError(.pinAuthInvalid, "the pinUvAuthToken was already used for a touch")
        }
        if pinUv.token.rpId == nil { pinUv.token.bind(rpId: rpId) }
    }

    /// verify(pinUvAuthToken, message, pinUvAuthParam): fails when the token is not in use or the MAC differs.
    mutating func verifyToken(
        _ pinUvAuthParam: [UInt8],
        proto: PinUvAuthProtocol,
        message: [UInt8],
        now: Duration
    ) throws(CTAPError) {
        guard pinUv.token.isInUse(now: now) else {
            throw CTAPError(.pinAuthInvalid, "no pinUvAuthToken is in use (expired, or never obtained)")
        }
        guard proto.verify(key: pinUv.token.value, message: message, signature: pinUvAuthParam) else {
            throw CTAPError(.pinAuthInvalid, "pinUvAuthParam does not verify")
        }
        pinUv.token.markUsed()
    }

    /// The pinUvAuthParam and protocol of a command that needs them: CTAP2_ERR_PUAT_REQUIRED without the param,
    /// CTAP2_ERR_MISSING_PARAMETER without the protocol, CTAP1_ERR_INVALID_PARAMETER for an unsupported one.
    func requireAuthParameters(
        _ pinUvAuthParam: [UInt8]?,
        _ protocolNumber: Int?
    ) throws(CTAPError) -> (param: [UInt8], proto: PinUvAuthProtocol) {
        guard let pinUvAuthParam else { throw CTAPError(.puatRequired, "pinUvAuthParam missing") }
        guard let protocolNumber else { throw CTAPError(.missingParameter, "pinUvAuthProtocol missing") }
        return (pinUvAuthParam, try pinProtocol(protocolNumber))
    }

    /// The token checks of a command that authenticates its own bytes (large blobs, config, bio enrollment):
    /// the parameters as ``requireAuthParameters(_:_:)``, the MAC over `message` with the token in use, and
    /// `permission` (CTAP2_ERR_PIN_AUTH_INVALID).
    /// `preview`: the command is a FIDO_2_1_PRE preview command (0x40, 0x41), which takes a getPinToken token
    /// when the profile says so (``previewAcceptsGetPinToken``).
    mutating func authorizeCommand(
        _ pinUvAuthParam: [UInt8]?,
        _ protocolNumber: Int?,
        message: [UInt8],
        permission: PinUvPermissions,
        preview: Bool = false,
        now: Duration
    ) throws(CTAPError) {
        let (param, proto) = try requireAuthParameters(pinUvAuthParam, protocolNumber)
        try verifyToken(param, proto: proto, message: message, now: now)
        if preview && previewAcceptsGetPinToken && pinUv.token.fromGetPinToken { return }
        guard pinUv.token.authorises(permission) else {
            throw CTAPError(
                .pinAuthInvalid,
                "the pinUvAuthToken lacks permission 0x\(String(permission.rawValue, radix: 16))"
            )
        }
    }

    /// After the user's touch in makeCredential or getAssertion: the token's cached presence and verification
    /// are spent, and it keeps only the lbw permission (§6.1.2 step 14.d, §6.2.2 step 9.d).
    mutating func consumeTokenFlags() {
        if pinUv.token.withoutPermissions { return }
        pinUv.token.clearUserPresentFlag()
        pinUv.token.clearUserVerifiedFlag()
        pinUv.token.clearPermissionsExceptLargeBlobWrite()
    }

    /// Whether a preview command (0x40, 0x41) takes a token from getPinToken: always in the CTAP 2.0 and
    /// FIDO_2_1_PRE token models, by the profile's choice in the CTAP 2.1 model.
    var previewAcceptsGetPinToken: Bool {
        let behaviour = configuration.profile.behaviour
        return behaviour.pinToken != .permissions || behaviour.previewAcceptsPinToken
    }

    /// A PIN/UV auth protocol by number, if the key's profile has it (else CTAP1_ERR_INVALID_PARAMETER, or
    /// CTAP2_ERR_PIN_AUTH_INVALID as CTAP 2.0 words it).
    func pinProtocol(_ number: Int) throws(CTAPError) -> PinUvAuthProtocol {
        guard configuration.profile.pinUvAuthProtocols.contains(number) else {
            throw CTAPError(
                configuration.profile.behaviour.unsupportedProtocol.status,
                "pinUvAuthProtocol \(number) is not one of this key's"
            )
        }
        return try PinUvAuthProtocol.named(number)
    }
}
