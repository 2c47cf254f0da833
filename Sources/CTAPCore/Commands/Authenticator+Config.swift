import CTAPCBOR

/// Subcommands of authenticatorConfig (CTAP 2.1 §6.11).
enum ConfigSubcommand: Int {
    case enableEnterpriseAttestation = 0x01
    case toggleAlwaysUv = 0x02
    case setMinPINLength = 0x03
    /// CTAP 2.3: from now on authenticatorReset needs a long touch.
    case enableLongTouchForReset = 0x04
}

extension Authenticator {
    /// The most RP IDs setMinPINLength takes (getInfo maxRPIDsForSetMinPINLength).
    static let maxRPIDsForSetMinPINLength = 8

    /// The authenticatorConfig subcommands this key takes (getInfo authenticatorConfigCommands, CTAP 2.3).
    /// enableEnterpriseAttestation is always listed: a key without an enterprise attestation certificate answers it
    /// with CTAP1_ERR_INVALID_PARAMETER, and a certificate can be provisioned while the key runs.
    /// enableLongTouchForReset exists only on a CTAP 2.3 profile.
    var configCommands: [Int] {
        var commands: [ConfigSubcommand] = [.enableEnterpriseAttestation, .toggleAlwaysUv, .setMinPINLength]
        if configuration.profile.ctap23 { commands.append(.enableLongTouchForReset) }
        return commands.map(\.rawValue)
    }

    /// authenticatorConfig (0x0D). `raw` is the parameter map as received (its subCommandParams are signed).
    mutating func authenticatorConfig(_ raw: ArraySlice<UInt8>, now: Duration) throws(CTAPError) -> AuthenticatorOutcome
    {
        let params = try RequestParameters(cbor: raw)
        guard let number = try params.int(0x01, "subCommand") else {
            throw CTAPError(.missingParameter, "subCommand missing")
        }
        let subParams = try params.subMap(0x02, "subCommandParams")
        let protocolNumber = try params.int(0x03, "pinUvAuthProtocol")
        let pinUvAuthParam = try params.bytes(0x04, "pinUvAuthParam")
        guard let subcommand = ConfigSubcommand(rawValue: number), configCommands.contains(number) else {
            throw CTAPError(.invalidSubcommand, "unknown authenticatorConfig subcommand \(number)")
        }
        // A key without a PIN may be configured without one; with a PIN (or with alwaysUv on, except to turn it
        // off) the request needs a token with the acfg permission over 32×0xff | 0x0d | subCommand | params.
        if isProtectedByUV || (storage.settings.alwaysUv && subcommand != .toggleAlwaysUv) {
            guard CBORDecoder.isCanonical(raw) else {
                throw CTAPError(.invalidCBOR, "authenticatorConfig parameters are not canonical CBOR")
            }
            let message =
                [UInt8](repeating: 0xFF, count: 32) + [0x0D, UInt8(number)]
                + (subParams.map { CBORValue.map($0).encoded() } ?? [])
            try authorizeCommand(
                pinUvAuthParam,
                protocolNumber,
                message: message,
                permission: .authenticatorConfiguration,
                now: now
            )
        }
        var settings = storage.settings
        switch subcommand {
        case .enableEnterpriseAttestation:
            // As OpenSK: a key without enterprise attestation (no ep in getInfo) refuses the subcommand.
            guard canAttestEnterprise else {
                throw CTAPError(.invalidParameter, "this key has no enterprise attestation certificate")
            }
            settings.enterpriseAttestation = true
        case .toggleAlwaysUv:
            settings.alwaysUv.toggle()
            settings.alwaysUvChosen = true
        case .setMinPINLength:
            let newLength = try subParams?.intMember(0x01, "newMinPINLength") ?? settings.minPINLength
            let rpIDs = try subParams?.textArrayMember(0x02, "minPinLengthRPIDs")
            let force = try subParams?.boolMember(0x03, "forceChangePin") ?? false
            // pinComplexityPolicy (CTAP 2.2): true turns the policy on; it stays on until reset.
            if try subParams?.boolMember(0x04, "pinComplexityPolicy") == true { settings.pinComplexityPolicy = true }
            guard newLength >= settings.minPINLength, newLength <= 63 else {
                throw CTAPError(
                    .pinPolicyViolation,
                    "the minimum PIN length can only grow (now \(settings.minPINLength))"
                )
            }
            if let rpIDs {
                guard rpIDs.count <= Self.maxRPIDsForSetMinPINLength else {
                    throw CTAPError(.keyStoreFull, "at most \(Self.maxRPIDsForSetMinPINLength) RP IDs")
                }
                settings.minPinLengthRPIDs = rpIDs
            }
            if force && storage.pin == nil { throw CTAPError(.pinNotSet, "forceChangePin without a PIN") }
            if let pin = storage.pin, pin.codePoints < newLength { settings.forcePINChange = true }
            if force { settings.forcePINChange = true }
            settings.minPINLength = newLength
        case .enableLongTouchForReset:
            settings.longTouchForReset = true
        }
        try storage.setSettings(settings)
        if settings.forcePINChange { pinUv.resetToken(&entropy) }
        return .response([CTAPStatus.ok.rawValue])
    }
}

extension Dictionary where Key == CBORValue, Value == CBORValue {
    /// An integer-keyed member that must be an integer if present.
    func intMember(_ key: Int, _ name: String) throws(CTAPError) -> Int? {
        guard let v = self[CBORValue(key)] else { return nil }
        guard let i = v.intValue else { throw CTAPError(.cborUnexpectedType, "\(name) is not an integer") }
        return i
    }

    /// An integer-keyed member that must be a boolean if present.
    func boolMember(_ key: Int, _ name: String) throws(CTAPError) -> Bool? {
        guard let v = self[CBORValue(key)] else { return nil }
        guard let b = v.boolValue else { throw CTAPError(.cborUnexpectedType, "\(name) is not a boolean") }
        return b
    }

    /// An integer-keyed member that must be an array of text strings if present.
    func textArrayMember(_ key: Int, _ name: String) throws(CTAPError) -> [String]? {
        guard let v = self[CBORValue(key)] else { return nil }
        guard let array = v.arrayValue else { throw CTAPError(.cborUnexpectedType, "\(name) is not an array") }
        let texts = array.compactMap(\.textValue)
        guard texts.count == array.count else { throw CTAPError(.cborUnexpectedType, "\(name) holds a non-text") }
        return texts
    }
}
