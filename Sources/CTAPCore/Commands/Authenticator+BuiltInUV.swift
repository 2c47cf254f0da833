import CTAPCBOR

/// getPinUvAuthTokenUsingUvWithPermissions waiting for a finger.
struct UVTokenRequest: Sendable {
    var proto: PinUvAuthProtocol
    var secret: [UInt8]
    var permissions: PinUvPermissions
    var rpId: String?
}

/// A fingerprint enrollment in progress (authenticatorBioEnrollment enrollBegin … enrollCaptureNextSample).
struct FingerprintEnrollment: Sendable {
    var templateId: [UInt8]
    var remainingSamples: Int
}

/// Sample statuses of authenticatorBioEnrollment (lastEnrollSampleStatus).
enum EnrollSampleStatus: Int {
    case good = 0x00
    case poorQuality = 0x07
}

extension Authenticator {
    static let maxFingerprints = 5
    static let samplesPerEnrollment = 3
    static let maxTemplateFriendlyName = 32
    /// getInfo preferredPlatformUvAttempts: the platform retries a mismatch itself, so one finger per request.
    static let preferredPlatformUvAttempts = 3

    // MARK: Performing built-in UV

    /// Starts performBuiltInUv: a UV attempt is counted (and committed) before the finger is read, like a PIN
    /// attempt; a match gives it back.
    mutating func askFingerprint(
        _ kind: PendingOperation.Kind,
        _ prompt: PresencePrompt,
        blocked: CTAPStatus
    ) throws(CTAPError) -> AuthenticatorOutcome {
        guard storage.uvRetries > 0 else { throw CTAPError(blocked, "built-in user verification is blocked") }
        try storage.setUvRetries(storage.uvRetries - 1)
        var prompt = prompt
        prompt.gesture = .fingerprint
        return askPresence(kind, prompt)
    }

    /// The answer to a fingerprint request: a matching finger (approved), one that does not match (denied), none
    /// in time, or a cancel.
    mutating func finishFingerprint(
        _ operation: PendingOperation,
        _ result: PresenceResult,
        now: Duration
    ) throws(CTAPError) -> [UInt8] {
        if case .enrollSample(let templateId, let first) = operation.kind {
            return try finishEnrollSample(templateId: templateId, first: first, result)
        }
        switch result {
        case .approved:
            try storage.setUvRetries(StoredPIN.maxUvRetries)
            var settings = storage.settings
            settings.uvCountSinceLastPinEntry += 1
            try storage.setSettings(settings)
            switch operation.kind {
            case .uvToken(let request):
                if request.permissions == .persistentCredentialManagementReadOnly,
                    let persistent = storage.persistentToken
                {
                    let sealed = try request.proto.encrypt(persistent, secret: request.secret, iv: entropy.bytes(16))
                    return Self.success([0x02: .byteString(sealed)])
                }
                pinUv.resetToken(&entropy)
                pinUv.token.begin(permissions: request.permissions, rpId: request.rpId, userIsPresent: true, now: now)
                let token = try request.proto.encrypt(pinUv.token.value, secret: request.secret, iv: entropy.bytes(16))
                return Self.success([0x02: .byteString(token)])
            default:
                return try finish(operation, now: now)
            }
        case .timedOut, .cancelled:
            // No finger was read: the attempt is given back.
            try storage.setUvRetries(min(StoredPIN.maxUvRetries, storage.uvRetries + 1))
            if case .uvToken = operation.kind {} else { enrollment = nil }
            throw CTAPError(result == .timedOut ? .userActionTimeout : .keepaliveCancel, "no finger")
        case .denied:
            if case .uvToken = operation.kind {
                throw CTAPError(storage.uvRetries == 0 ? .uvBlocked : .uvInvalid, "the finger does not match")
            }
            // makeCredential and getAssertion with the uv option (CTAP 2.1 §6.1.2 step 11.2).
            if storage.uvRetries == 0 { throw CTAPError(.pinBlocked, "built-in user verification is now blocked") }
            if storage.pin != nil { throw CTAPError(.puatRequired, "the finger does not match; use the PIN") }
            throw CTAPError(.operationDenied, "the finger does not match")
        }
    }

    // MARK: clientPIN with built-in UV

    /// getPinUvAuthTokenUsingUvWithPermissions (clientPIN 0x06, CTAP 2.1 §6.5.5.7.3).
    mutating func tokenUsingUV(
        proto: PinUvAuthProtocol,
        keyAgreement: CBORValue,
        permissions bits: Int,
        rpId: String?
    ) throws(CTAPError) -> AuthenticatorOutcome {
        let requested = try requestedPermissions(bits)
        guard isBuiltInUVConfigured else { throw CTAPError(.notAllowed, "no fingerprint is enrolled") }
        guard storage.uvRetries > 0 else { throw CTAPError(.uvBlocked, "built-in user verification is blocked") }
        let secret = try pinUv.sharedSecret(proto, peer: PinUvAuthProtocol.peerKey(keyAgreement))
        let request = UVTokenRequest(proto: proto, secret: secret, permissions: requested, rpId: rpId)
        return try askFingerprint(
            .uvToken(request),
            PresencePrompt(command: "getPinUvAuthTokenUsingUvWithPermissions", rpId: rpId),
            blocked: .uvBlocked
        )
    }

    // MARK: authenticatorBioEnrollment

    /// authenticatorBioEnrollment (0x09, and the preview 0x40), CTAP 2.1 §6.7, for the simulated sensor.
    mutating func bioEnrollment(
        _ raw: ArraySlice<UInt8>,
        preview: Bool,
        now: Duration
    ) throws(CTAPError) -> AuthenticatorOutcome {
        let params = try RequestParameters(cbor: raw)
        let modality = try params.int(0x01, "modality")
        let number = try params.int(0x02, "subCommand")
        let subParams = try params.subMap(0x03, "subCommandParams")
        let protocolNumber = try params.int(0x04, "pinUvAuthProtocol")
        let pinUvAuthParam = try params.bytes(0x05, "pinUvAuthParam")
        if params.value(0x06)?.boolValue == true { return .response(Self.success([0x01: 1])) }
        guard let number else { throw CTAPError(.missingParameter, "subCommand missing") }
        guard let modality else { throw CTAPError(.missingParameter, "modality missing") }
        guard modality == 1 else { throw CTAPError(.invalidParameter, "modality \(modality) is not fingerprint") }
        switch number {
        case 0x07:  // getFingerprintSensorInfo
            return .response(
                Self.success([
                    0x01: 1, 0x02: 1, 0x03: CBORValue(Self.samplesPerEnrollment),
                    0x08: CBORValue(Self.maxTemplateFriendlyName),
                ])
            )
        case 0x03:  // cancelCurrentEnrollment
            enrollment = nil
            return .response([CTAPStatus.ok.rawValue])
        case 0x01, 0x02, 0x04, 0x05, 0x06:
            break
        default:
            throw CTAPError(.invalidSubcommand, "unknown bio enrollment subcommand \(number)")
        }
        guard CBORDecoder.isCanonical(raw) else {
            throw CTAPError(.invalidCBOR, "bio enrollment parameters are not canonical CBOR")
        }
        let message = [UInt8(modality), UInt8(number)] + (subParams.map { CBORValue.map($0).encoded() } ?? [])
        try authorizeCommand(
            pinUvAuthParam,
            protocolNumber,
            message: message,
            permission: .bioEnrollment,
            preview: preview,
            now: now
        )
        let templateId = try subParams?.bytesMember(0x01, "templateId")
        let name = try subParams?.optionalMember(0x02, "templateFriendlyName")
        _ = try subParams?.intMember(0x03, "timeoutMilliseconds")
        var templates = storage.fingerprints
        switch number {
        case 0x01:  // enrollBegin
            guard templates.count < Self.maxFingerprints else {
                throw CTAPError(.fingerprintDatabaseFull, "\(Self.maxFingerprints) fingerprints are enrolled")
            }
            var id: [UInt8]
            repeat { id = entropy.bytes(2) } while templates.contains { $0.id == id } || id == [0, 0]
            enrollment = FingerprintEnrollment(templateId: id, remainingSamples: Self.samplesPerEnrollment)
            return askSample(templateId: id, first: true)
        case 0x02:  // enrollCaptureNextSample
            guard let templateId else { throw CTAPError(.missingParameter, "templateId missing") }
            guard let current = enrollment, current.templateId == templateId else {
                throw CTAPError(.invalidParameter, "no enrollment of this template is in progress")
            }
            return askSample(templateId: templateId, first: false)
        case 0x04:  // enumerateEnrollments
            guard !templates.isEmpty else { throw CTAPError(.invalidOption, "no fingerprint is enrolled") }
            let infos: [CBORValue] = templates.map { t in
                // An unnamed template has an empty name: python-fido2 reads the member of every template.
                .map([0x01: .byteString(t.id), 0x02: .textString(t.name ?? "")])
            }
            return .response(Self.success([0x07: .array(infos)]))
        case 0x05:  // setFriendlyName
            guard let templateId else { throw CTAPError(.missingParameter, "templateId missing") }
            guard let name else { throw CTAPError(.missingParameter, "templateFriendlyName missing") }
            guard name.utf8.count <= Self.maxTemplateFriendlyName else {
                throw CTAPError(.invalidLength, "a name of \(name.utf8.count) bytes, at most 32")
            }
            guard let index = templates.firstIndex(where: { $0.id == templateId }) else {
                throw CTAPError(.invalidOption, "no such template")
            }
            templates[index].name = name
            try storage.setFingerprints(templates)
            return .response([CTAPStatus.ok.rawValue])
        default:  // 0x06 removeEnrollment
            guard let templateId else { throw CTAPError(.missingParameter, "templateId missing") }
            guard templates.contains(where: { $0.id == templateId }) else {
                throw CTAPError(.invalidOption, "no such template")
            }
            templates.removeAll { $0.id == templateId }
            try storage.setFingerprints(templates)
            return .response([CTAPStatus.ok.rawValue])
        }
    }

    mutating func askSample(templateId: [UInt8], first: Bool) -> AuthenticatorOutcome {
        askPresence(
            .enrollSample(templateId: templateId, first: first),
            PresencePrompt(command: "bio enrollment sample", gesture: .fingerprint)
        )
    }

    /// A sample of an enrollment: a finger on the sensor (approved) is a good sample, a denied one a poor-quality
    /// sample; the template is stored with its last good sample.
    mutating func finishEnrollSample(
        templateId: [UInt8],
        first: Bool,
        _ result: PresenceResult
    ) throws(CTAPError) -> [UInt8] {
        guard var current = enrollment, current.templateId == templateId else {
            throw CTAPError(.invalidParameter, "the enrollment was cancelled")
        }
        let status: EnrollSampleStatus
        switch result {
        case .approved:
            status = .good
            current.remainingSamples -= 1
        case .denied:
            status = .poorQuality
        case .timedOut:
            enrollment = nil
            throw CTAPError(.userActionTimeout, "no finger on the sensor")
        case .cancelled:
            enrollment = nil
            throw CTAPError(.keepaliveCancel, "enrollment cancelled")
        }
        if current.remainingSamples == 0 {
            enrollment = nil
            // No name until the platform gives it one (setFriendlyName), as on the YubiKey Bio and in Yubico's
            // device tests: enumerateEnrollments lists it with an empty templateFriendlyName.
            try storage.setFingerprints(storage.fingerprints + [FingerprintTemplate(id: templateId, name: nil)])
        } else {
            enrollment = current
        }
        var response: [CBORValue: CBORValue] = [
            0x05: CBORValue(status.rawValue), 0x06: CBORValue(current.remainingSamples),
        ]
        if first { response[0x04] = .byteString(templateId) }
        return Self.success(.map(response))
    }
}

extension Dictionary where Key == CBORValue, Value == CBORValue {
    /// An integer-keyed member that must be a text string if present.
    func optionalMember(_ key: Int, _ name: String) throws(CTAPError) -> String? {
        guard let v = self[CBORValue(key)] else { return nil }
        guard let t = v.textValue else { throw CTAPError(.cborUnexpectedType, "\(name) is not a text string") }
        return t
    }
}
