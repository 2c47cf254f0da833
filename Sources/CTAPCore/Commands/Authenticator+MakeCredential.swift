import CTAPCBOR
import Crypto

/// Everything makeCredential needs once the user has touched the key.
struct MakeCredentialPlan: Sendable {
    var clientDataHash: [UInt8]
    var rpId: String
    var rpIdHash: [UInt8]
    var user: UserEntity
    var resident: Bool
    var attestationNone: Bool
    var algorithm: CredentialAlgorithm
    var userVerified: Bool
    var extensions: MakeCredentialExtensions
    /// The finger on the sensor verifies the user and stands for the touch.
    var builtInUV = false
    /// hmac-secret-mc, decrypted and checked.
    var hmacSecretMC: HMACSecretRequest?
    /// Answer with enterprise attestation (epAtt).
    var enterpriseAttestation = false
}

extension Authenticator {
    /// authenticatorMakeCredential (0x01, CTAP 2.1 §6.1.2), up to the point where user presence is needed.
    mutating func makeCredential(_ params: RequestParameters, now: Duration) throws(CTAPError) -> AuthenticatorOutcome {
        let pinUvAuthParam = try params.bytes(0x08, "pinUvAuthParam")
        if pinUvAuthParam?.isEmpty == true {
            // The "touch to select this key" probe: a touch, then the PIN state.
            return askPresence(.pinProbe, PresencePrompt(command: "makeCredential (select)"))
        }
        guard let clientDataHash = try params.bytes(0x01, "clientDataHash") else {
            throw CTAPError(.missingParameter, "clientDataHash missing")
        }
        guard let rp = try params.subMap(0x02, "rp") else { throw CTAPError(.missingParameter, "rp missing") }
        guard let userMap = try params.subMap(0x03, "user") else { throw CTAPError(.missingParameter, "user missing") }
        guard let credParams = try params.array(0x04, "pubKeyCredParams") else {
            throw CTAPError(.missingParameter, "pubKeyCredParams missing")
        }
        guard let rpId = try rp.optionalText("id") else { throw CTAPError(.missingParameter, "rp.id missing") }
        _ = try rp.optionalText("name")
        _ = try rp.optionalText("icon")
        guard let userId = try userMap.optionalBytes("id") else {
            throw CTAPError(.missingParameter, "user.id missing")
        }
        let user = UserEntity(
            id: userId,
            name: try userMap.optionalText("name"),
            displayName: try userMap.optionalText("displayName"),
            icon: try userMap.optionalText("icon")
        )
        var algorithm: CredentialAlgorithm?
        for entry in credParams {
            guard let map = entry.mapValue else { throw CTAPError(.cborUnexpectedType, "pubKeyCredParams entry") }
            guard let alg = map[.textString("alg")] else { throw CTAPError(.missingParameter, "alg missing") }
            guard let number = alg.intValue else { throw CTAPError(.cborUnexpectedType, "alg is not an integer") }
            guard let type = try map.optionalText("type") else { throw CTAPError(.missingParameter, "type missing") }
            if algorithm == nil, type == "public-key", let known = CredentialAlgorithm(rawValue: number),
                configuration.profile.algorithms.contains(known)
            {
                algorithm = known
            }
        }
        let excludeList =
            try params.array(0x05, "excludeList").map { (list) throws(CTAPError) in
                try CredentialDescriptor.list(list)
            } ?? []
        // Arguments in locals first: see getAssertion.
        let extensionsMap = try params.subMap(0x06, "extensions")
        let extensions = try MakeCredentialExtensions(knownExtensions(extensionsMap))
        try checkListLength(excludeList.count)
        let options = try RequestOptions(params.subMap(0x07, "options"))
        let protocolNumber = try params.int(0x09, "pinUvAuthProtocol")
        let proto = try pinUvAuthProtocol(protocolNumber, with: pinUvAuthParam)
        let enterpriseAttestation = try params.int(0x0A, "enterpriseAttestation")
        let formats = try params.array(0x0B, "attestationFormatsPreference")

        guard let algorithm else { throw CTAPError(.unsupportedAlgorithm, "no supported algorithm offered") }
        // A pinUvAuthParam takes the place of the uv option; without one, uv asks for built-in UV (alwaysUv asks
        // for it too when a finger is enrolled).
        var builtInUV = false
        if pinUvAuthParam == nil && (options.uv == true || (storage.settings.alwaysUv && isBuiltInUVConfigured)) {
            guard isBuiltInUVConfigured else { throw CTAPError(.invalidOption, "no built-in user verification") }
            builtInUV = true
        }
        let behaviour = configuration.profile.behaviour
        if behaviour.optionRules == .ctap20 && options.up != nil {
            throw CTAPError(.invalidOption, "up is not an option of makeCredential in CTAP 2.0")
        }
        if options.up == false { throw CTAPError(.invalidOption, "up=false is invalid in makeCredential") }
        let resident = options.rk ?? false
        // A key without room for any (getInfo rk false, as a virtual authenticator without hasResidentKey).
        if resident && configuration.maxResidentCredentials == 0 {
            throw CTAPError(.unsupportedOption, "this key stores no discoverable credentials")
        }
        // alwaysUv: every credential needs a token (and so a PIN). Otherwise makeCredUvNotRqd: once a PIN is
        // set, only a discoverable credential needs the token; without it (CTAP 2.0) every credential does.
        if storage.settings.alwaysUv && pinUvAuthParam == nil && !builtInUV {
            throw CTAPError(.puatRequired, "alwaysUv: every makeCredential needs a pinUvAuthToken")
        }
        if isProtectedByUV && pinUvAuthParam == nil && (resident || !behaviour.makeCredUvNotRqd) && !builtInUV {
            throw CTAPError(
                .puatRequired,
                resident
                    ? "a discoverable credential needs a pinUvAuthToken once a PIN is set"
                    : "a PIN is set: makeCredential needs pinUvAuthParam (CTAP2_ERR_PIN_REQUIRED)"
            )
        }
        var useEnterpriseAttestation = false
        if let enterpriseAttestation {
            guard storage.settings.enterpriseAttestation && canAttestEnterprise else {
                throw CTAPError(.invalidParameter, "enterprise attestation is not enabled")
            }
            switch enterpriseAttestation {
            // Vendor-facilitated: only for the configured RP IDs; other RPs get the usual attestation.
            case 1: useEnterpriseAttestation = configuration.enterpriseAttestationRPIDs.contains(rpId)
            // Platform-managed: the platform vouches for the RP.
            case 2: useEnterpriseAttestation = true
            default: throw CTAPError(.invalidOption, "enterpriseAttestation \(enterpriseAttestation) is not 1 or 2")
            }
        }
        guard clientDataHash.count == 32 else { throw CTAPError(.invalidLength, "clientDataHash is not 32 bytes") }
        guard userId.count <= 64 else { throw CTAPError(.invalidLength, "user.id longer than 64 bytes") }
        var attestationNone = false
        if let formats {
            let names = formats.compactMap(\.textValue)
            guard names.count == formats.count else {
                throw CTAPError(.cborUnexpectedType, "attestationFormatsPreference entry is not text")
            }
            attestationNone = names.first { $0 == "packed" || $0 == "none" } == "none"
        }
        if extensions.largeBlobKey && !resident {
            throw CTAPError(.invalidOption, "largeBlobKey needs a discoverable credential")
        }
        // hmac-secret-mc goes with hmac-secret; without it the input is ignored.
        let hmacSecretMC = try extensions.hmacSecretMC.flatMap { (input) throws(CTAPError) in
            extensions.hmacSecret ? try hmacSecretRequest(input) : nil
        }
        var userVerified = builtInUV
        if let pinUvAuthParam, let proto {
            try verifyPinUvAuthParam(
                pinUvAuthParam,
                proto: proto,
                clientDataHash: clientDataHash,
                permission: .makeCredential,
                rpId: rpId,
                now: now
            )
            userVerified = true
        }

        let rpIdHash = hashOfRpId(rpId)
        if resident {
            let replaces = storage.discoverableCredential(rpIdHash: rpIdHash, userId: userId) != nil
            if !replaces && remainingDiscoverableCredentials <= 0 {
                throw CTAPError(.keyStoreFull, "no room for another discoverable credential")
            }
        }
        let prompt = PresencePrompt(command: "makeCredential", rpId: rpId, userName: user.name ?? user.displayName)
        for descriptor in excludeList where descriptor.type == "public-key" {
            guard let found = lookUp(descriptor.id, rpIdHash: rpIdHash) else { continue }
            // A credential that needs UV is not revealed to a request without it.
            if found.credProtect == .required && !userVerified { continue }
            if pinUvAuthParam != nil && pinUv.token.userPresentFlag(now: now) {
                return .response([CTAPStatus.credentialExcluded.rawValue])
            }
            if builtInUV { return try askFingerprint(.excluded, prompt, blocked: .pinBlocked) }
            return askPresence(.excluded, prompt)
        }
        let plan = MakeCredentialPlan(
            clientDataHash: clientDataHash,
            rpId: rpId,
            rpIdHash: rpIdHash,
            user: user,
            resident: resident,
            attestationNone: attestationNone,
            algorithm: algorithm,
            userVerified: userVerified,
            extensions: extensions,
            builtInUV: builtInUV,
            hmacSecretMC: hmacSecretMC,
            enterpriseAttestation: useEnterpriseAttestation && !attestationNone
        )
        if builtInUV { return try askFingerprint(.makeCredential(plan), prompt, blocked: .pinBlocked) }
        if pinUvAuthParam != nil && pinUv.token.userPresentFlag(now: now) {
            consumeTokenFlags()
            return .response(Self.success(try finishMakeCredential(plan)))
        }
        return askPresence(.makeCredential(plan), prompt)
    }

    /// Creates the credential after the touch: key, id, storage, counter, extensions, attestation.
    mutating func finishMakeCredential(_ plan: MakeCredentialPlan) throws(CTAPError) -> CBORValue {
        let signingKey = try newSigningKey(plan.algorithm)
        var rawKey = signingKey.raw
        defer { rawKey.wipe() }
        let ext = plan.extensions
        let credProtect = ext.credProtect ?? .optional
        // A key too large for the id (RSA) is stored in flash, discoverable or not; its id carries no key.
        let stored = plan.resident || plan.algorithm.rawKeyLength == nil
        // The credBlob: kept with a discoverable credential; with a non-discoverable one only if the profile keeps it
        // (in the flash record when there is one, else in the id).
        var credBlob: [UInt8]?
        if let blob = ext.credBlob, blob.count <= maxCredBlobLength,
            plan.resident || configuration.profile.behaviour.credBlobNonDiscoverable == .inCredentialId
        {
            credBlob = blob
        }
        let credentialId = try CredentialID.seal(
            .init(
                isResident: plan.resident,
                privateKey: plan.algorithm.rawKeyLength == nil ? [] : rawKey,
                algorithm: plan.algorithm,
                credProtect: credProtect,
                hmacSecret: ext.hmacSecret,
                thirdPartyPayment: ext.thirdPartyPayment,
                backupEligible: configuration.backupEligible,
                backupState: configuration.backupEligible && configuration.backupState,
                credBlob: stored ? nil : credBlob
            ),
            rpIdHash: plan.rpIdHash,
            key: sealingKey,
            nonce: entropy.bytes(12)
        )
        signingKeys.insert(id: credentialId, raw: rawKey, key: signingKey)
        var outputs: [CBORValue: CBORValue] = [:]
        if let level = ext.credProtect {
            outputs[.textString(ExtensionName.credProtect)] = CBORValue(Int(level.rawValue))
        }
        if ext.hmacSecret { outputs[.textString(ExtensionName.hmacSecret)] = true }
        if let request = plan.hmacSecretMC {
            outputs[.textString(ExtensionName.hmacSecretMC)] = .byteString(
                try hmacSecretOutput(request, credentialId: credentialId, userVerified: plan.userVerified)
            )
        }
        if ext.thirdPartyPayment { outputs[.textString(ExtensionName.thirdPartyPayment)] = true }
        if ext.credBlob != nil { outputs[.textString(ExtensionName.credBlob)] = .boolean(credBlob != nil) }
        // minPinLength and pinComplexityPolicy answer only the RP IDs allowed to read the PIN policy.
        let readsPINPolicy =
            configuration.minPinLengthRPIDs.contains(plan.rpId)
            || storage.settings.minPinLengthRPIDs.contains(plan.rpId)
        if ext.minPinLength && readsPINPolicy {
            outputs[.textString(ExtensionName.minPinLength)] = CBORValue(minPINLength)
        }
        if ext.pinComplexityPolicy && readsPINPolicy {
            outputs[.textString(ExtensionName.pinComplexityPolicy)] = .boolean(storage.settings.pinComplexityPolicy)
        }
        let largeBlobKey = ext.largeBlobKey ? entropy.bytes(32) : nil
        if stored {
            let serial = storage.newestCreationSerial + 1
            try storage.storeResident(
                ResidentCredential(
                    id: credentialId,
                    rpId: plan.rpId,
                    rpIdHash: plan.rpIdHash,
                    user: plan.resident ? storedUser(plan.user) : UserEntity(id: []),
                    privateKey: rawKey,
                    creationSerial: serial,
                    algorithm: plan.algorithm,
                    credProtect: credProtect,
                    hmacSecret: ext.hmacSecret,
                    credBlob: credBlob,
                    largeBlobKey: largeBlobKey,
                    thirdPartyPayment: ext.thirdPartyPayment,
                    discoverable: plan.resident,
                    backupEligible: configuration.backupEligible,
                    backupState: configuration.backupEligible && configuration.backupState
                )
            )
        }
        if !stored { rememberCreated(id: credentialId, rpId: plan.rpId) }
        lastActivity = CredentialActivity(
            rpId: plan.rpId,
            credentialId: credentialId,
            userHandle: plan.resident ? plan.user.id : nil
        )
        let counter = try storage.incrementSignCounter()
        var flags: AuthenticatorDataFlags = .userPresent
        if plan.userVerified { flags.insert(.userVerified) }
        if configuration.backupEligible { flags.insert(.backupEligible) }
        if configuration.backupEligible && configuration.backupState { flags.insert(.backupState) }
        let override = takeResponseOverride()
        let authData = AuthenticatorData.make(
            rpIdHash: plan.rpIdHash,
            flags: override?.apply(flags) ?? flags,
            signCount: counter,
            attestedCredential: (
                configuration.aaguid, credentialId, signingKey.coseKey.encoded()
            ),
            extensions: outputs
        )
        let format: String
        let statement: CBORValue
        if plan.attestationNone {
            format = "none"
            statement = .map([:])
        } else if plan.enterpriseAttestation, let ea = storage.enterpriseAttestationKey {
            // Enterprise attestation: packed, signed by the device's attestation key, its certificate in x5c.
            format = "packed"
            let signature = try signingKeys.key(
                id: SigningKeyCache.enterpriseAttestationId,
                raw: ea.privateKey,
                algorithm: .es256
            ).sign(authData + plan.clientDataHash)
            statement = ["alg": -7, "sig": .byteString(signature), "x5c": [.byteString(ea.certificate)]]
        } else if let batch = storage.batchAttestation ?? configuration.defaultAttestation {
            // Batch attestation (the key's own once provisioned, else fidosim's shared batch): packed, signed by the
            // batch key, the leaf certificate in x5c.
            format = "packed"
            let signature = try signingKeys.key(
                id: SigningKeyCache.batchAttestationId,
                raw: batch.privateKey,
                algorithm: .es256
            ).sign(authData + plan.clientDataHash)
            statement = ["alg": -7, "sig": .byteString(signature), "x5c": [.byteString(batch.certificate)]]
        } else {
            format = "packed"
            let signature = try signingKey.sign(authData + plan.clientDataHash)
            statement = ["alg": CBORValue(plan.algorithm.rawValue), "sig": .byteString(signature)]
        }
        var response: [CBORValue: CBORValue] = [
            0x01: .textString(format), 0x02: .byteString(authData),
            0x03: override.map { o in o.bogusSignature ? Self.zeroingSignature(statement) : statement } ?? statement,
        ]
        if let largeBlobKey { response[0x05] = .byteString(largeBlobKey) }
        if plan.enterpriseAttestation && !plan.attestationNone { response[0x04] = true }
        return .map(response)
    }

    /// How many more discoverable credentials the key accepts: the configured limit and the storage's room.
    var remainingDiscoverableCredentials: Int {
        let stored = storage.residentCount
        let limit = min(configuration.maxResidentCredentials, faults.keyStoreFullAfter ?? .max)
        return min(max(0, limit - stored), storage.remainingDiscoverableCredentials)
    }

    /// SHA-256 of `rpId`, remembered for the last rpId.
    mutating func hashOfRpId(_ rpId: String) -> [UInt8] {
        if let last = lastRpIdHash, last.rpId == rpId { return last.hash }
        let hash = Array(SHA256.hash(data: Array(rpId.utf8)))
        lastRpIdHash = (rpId, hash)
        return hash
    }

    /// A credential of this key for `rpIdHash` with the given id, or nil.
    ///
    /// A discoverable credential's id only counts while the credential is still stored.
    mutating func lookUp(_ id: [UInt8], rpIdHash: [UInt8]) -> AssertionCandidate? {
        guard revokedCredentials.isEmpty || !revokedCredentials.contains(id) else { return nil }
        guard let contents = openedIds.contents(id: id, rpIdHash: rpIdHash, sealingKey: sealingKey) else {
            // A credential imported through the control plane keeps the id it came with.
            guard let imported = storage.residentCredential(id: id), imported.rpIdHash == rpIdHash else { return nil }
            return AssertionCandidate(imported)
        }
        if contents.isResident || contents.privateKey.isEmpty {
            // Discoverable, or a key kept in flash (RSA): only while the credential is stored.
            guard let stored = storage.residentCredential(id: id) else { return nil }
            return AssertionCandidate(stored)
        }
        var candidate = AssertionCandidate(
            id: id,
            privateKey: contents.privateKey,
            algorithm: contents.algorithm,
            credProtect: contents.credProtect,
            hmacSecret: contents.hmacSecret
        )
        candidate.thirdPartyPayment = contents.thirdPartyPayment
        candidate.credBlob = contents.credBlob
        candidate.backupEligible = contents.backupEligible
        // The control plane may have changed the backup state since the id was made.
        candidate.backupState = backupStates[id] ?? contents.backupState
        return candidate
    }

    /// An attestation statement whose `sig` is zero bytes of the same length (a response override).
    static func zeroingSignature(_ statement: CBORValue) -> CBORValue {
        guard var map = statement.mapValue, let sig = map["sig"]?.bytesValue else { return statement }
        map["sig"] = .byteString([UInt8](repeating: 0, count: sig.count))
        return .map(map)
    }

    /// The extension inputs the key's profile knows; the others are ignored, as by a key without them.
    func knownExtensions(_ map: [CBORValue: CBORValue]?) -> [CBORValue: CBORValue]? {
        guard let map, configuration.profile.extensions != nil else { return map }
        return map.filter { key, _ in key.textValue.map { configuration.profile.allows(extension: $0) } ?? true }
    }

    /// The rejectsLargeLists quirk: a list longer than maxCredentialCountInList is refused.
    func checkListLength(_ count: Int) throws(CTAPError) {
        let profile = configuration.profile
        if profile.rejectsLargeLists && count > profile.maxCredentialCountInList {
            throw CTAPError(
                .limitExceeded,
                "\(count) credentials in a list; this key takes \(profile.maxCredentialCountInList)"
            )
        }
    }

    /// The user entity as stored with a discoverable credential (the dropsDisplayName quirk forgets displayName).
    func storedUser(_ user: UserEntity) -> UserEntity {
        var stored = user
        if configuration.profile.dropsDisplayName { stored.displayName = nil }
        return stored
    }
}
