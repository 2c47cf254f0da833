import CTAPCBOR
import Crypto

/// A credential that can answer an assertion.
struct AssertionCandidate: Sendable {
    var id: [UInt8]
    var privateKey: [UInt8]
    var algorithm: CredentialAlgorithm
    var credProtect: CredProtect
    var hmacSecret: Bool
    /// The stored user of a discoverable credential; nil for a non-discoverable one.
    var user: UserEntity?
    var credBlob: [UInt8]?
    var largeBlobKey: [UInt8]?
    var thirdPartyPayment = false
    var backupEligible = false
    var backupState = false

    init(
        id: [UInt8],
        privateKey: [UInt8],
        algorithm: CredentialAlgorithm = .es256,
        credProtect: CredProtect = .optional,
        hmacSecret: Bool = false,
        user: UserEntity? = nil
    ) {
        self.id = id
        self.privateKey = privateKey
        self.algorithm = algorithm
        self.credProtect = credProtect
        self.hmacSecret = hmacSecret
        self.user = user
    }

    init(_ stored: ResidentCredential) {
        self.init(
            id: stored.id,
            privateKey: stored.privateKey,
            algorithm: stored.algorithm,
            credProtect: stored.credProtect,
            hmacSecret: stored.hmacSecret,
            // A stored non-discoverable credential without a user id (an RSA one, an import without a userHandle)
            // answers without a user, like one whose id holds its key.
            user: stored.discoverable || !stored.user.id.isEmpty ? stored.user : nil
        )
        credBlob = stored.credBlob
        largeBlobKey = stored.largeBlobKey
        thirdPartyPayment = stored.thirdPartyPayment
        backupEligible = stored.backupEligible
        backupState = stored.backupState
    }
}

/// Everything getAssertion needs once the user has touched the key (or without a touch for up=false).
struct AssertionPlan: Sendable {
    var rpId: String
    var rpIdHash: [UInt8]
    var clientDataHash: [UInt8]
    var candidates: [AssertionCandidate]
    var userPresent: Bool
    var userVerified: Bool
    /// True when the credentials were found by an allow list (no numberOfCredentials, no getNextAssertion).
    var fromAllowList: Bool
    var extensions: AssertionExtensions
    var hmacSecret: HMACSecretRequest?
}

/// State kept between getAssertion and getNextAssertion.
struct NextAssertionState: Sendable {
    var plan: AssertionPlan
    var remaining: ArraySlice<AssertionCandidate>
    var lastTime: Duration
}

extension Authenticator {
    /// authenticatorGetAssertion (0x02, CTAP 2.1 §6.2.2), up to the point where user presence is needed.
    mutating func getAssertion(_ params: RequestParameters, now: Duration) throws(CTAPError) -> AuthenticatorOutcome {
        let pinUvAuthParam = try params.bytes(0x06, "pinUvAuthParam")
        if pinUvAuthParam?.isEmpty == true {
            return askPresence(.pinProbe, PresencePrompt(command: "getAssertion (select)"))
        }
        guard let rpId = try params.text(0x01, "rpId") else { throw CTAPError(.missingParameter, "rpId missing") }
        guard let clientDataHash = try params.bytes(0x02, "clientDataHash") else {
            throw CTAPError(.missingParameter, "clientDataHash missing")
        }
        let allowList =
            try params.array(0x03, "allowList").map { (list) throws(CTAPError) in
                try CredentialDescriptor.list(list)
            } ?? []
        // Arguments are read into locals before a method of self takes them: `method(params.x())` in a mutating
        // function copies the whole authenticator first (the argument could change self), about 1 µs each.
        let extensionsMap = try params.subMap(0x04, "extensions")
        let extensions = try AssertionExtensions(knownExtensions(extensionsMap))
        try checkListLength(allowList.count)
        let options = try RequestOptions(params.subMap(0x05, "options"))
        let protocolNumber = try params.int(0x07, "pinUvAuthProtocol")
        let proto = try pinUvAuthProtocol(protocolNumber, with: pinUvAuthParam)
        var builtInUV = false
        let alwaysUv = storage.settings.alwaysUv && options.up != false
        if pinUvAuthParam == nil && (options.uv == true || (alwaysUv && isBuiltInUVConfigured)) {
            guard isBuiltInUVConfigured else { throw CTAPError(.invalidOption, "no built-in user verification") }
            // A silent probe (up=false) reads no finger: it runs without UV.
            builtInUV = options.up != false
        }
        if options.rk != nil {
            throw CTAPError(
                configuration.profile.behaviour.optionRules.rkInGetAssertion,
                "rk is not an option of getAssertion"
            )
        }
        guard clientDataHash.count == 32 else { throw CTAPError(.invalidLength, "clientDataHash is not 32 bytes") }
        if alwaysUv && pinUvAuthParam == nil && !builtInUV {
            throw CTAPError(.puatRequired, "alwaysUv: getAssertion with user presence needs a pinUvAuthToken")
        }
        var userVerified = builtInUV
        if let pinUvAuthParam, let proto {
            try verifyPinUvAuthParam(
                pinUvAuthParam,
                proto: proto,
                clientDataHash: clientDataHash,
                permission: .getAssertion,
                rpId: rpId,
                now: now
            )
            userVerified = true
        }

        let rpIdHash = hashOfRpId(rpId)
        var candidates: [AssertionCandidate] = []
        if allowList.isEmpty {
            candidates = storage.residentCredentials(rpIdHash: rpIdHash)
                .filter(\.discoverable)
                .filter { userVerified || $0.credProtect == .optional }
                .sorted { $0.creationSerial > $1.creationSerial }
                .map { AssertionCandidate($0) }
        } else {
            for descriptor in allowList where descriptor.type == "public-key" {
                if let found = lookUp(descriptor.id, rpIdHash: rpIdHash),
                    userVerified || found.credProtect != .required
                {
                    candidates = [found]
                    break
                }
            }
        }
        guard !candidates.isEmpty else {
            // Built-in UV comes before the search (CTAP 2.1 §6.2.2 step 6.2): the finger is read, then none found.
            if builtInUV {
                return try askFingerprint(
                    .noCredentials,
                    PresencePrompt(command: "getAssertion", rpId: rpId),
                    blocked: .pinBlocked
                )
            }
            throw CTAPError(.noCredentials, "no credential for \(rpId)")
        }
        let userPresent = options.up ?? true
        var hmacSecret: HMACSecretRequest?
        if let input = extensions.hmacSecret {
            guard userPresent else { throw CTAPError(.unsupportedOption, "hmac-secret needs user presence") }
            hmacSecret = try hmacSecretRequest(input)
        }
        let plan = AssertionPlan(
            rpId: rpId,
            rpIdHash: rpIdHash,
            clientDataHash: clientDataHash,
            candidates: candidates,
            userPresent: userPresent,
            userVerified: userVerified,
            fromAllowList: !allowList.isEmpty,
            extensions: extensions,
            hmacSecret: hmacSecret
        )
        guard userPresent else { return .response(try finishGetAssertion(plan, now: now)) }
        if pinUvAuthParam != nil && pinUv.token.userPresentFlag(now: now) {
            consumeTokenFlags()
            return .response(try finishGetAssertion(plan, now: now))
        }
        let user = candidates.count == 1 ? candidates[0].user : nil
        let prompt = PresencePrompt(command: "getAssertion", rpId: rpId, userName: user?.name ?? user?.displayName)
        if builtInUV { return try askFingerprint(.getAssertion(plan), prompt, blocked: .pinBlocked) }
        return askPresence(.getAssertion(plan), prompt)
    }

    /// Signs the first assertion and keeps the rest for getNextAssertion; returns the whole response.
    mutating func finishGetAssertion(_ plan: AssertionPlan, now: Duration) throws(CTAPError) -> [UInt8] {
        let count = plan.candidates.count
        let several = !plan.fromAllowList && count > 1
        if several {
            nextAssertion = NextAssertionState(plan: plan, remaining: plan.candidates.dropFirst(), lastTime: now)
        }
        return try assertion(plan.candidates[0], plan: plan, numberOfCredentials: several ? count : nil)
    }

    /// authenticatorGetNextAssertion (0x08).
    mutating func getNextAssertion(now: Duration) throws(CTAPError) -> AuthenticatorOutcome {
        guard var state = nextAssertion, let candidate = state.remaining.first else {
            nextAssertion = nil
            throw CTAPError(.notAllowed, "no getAssertion to continue")
        }
        guard now - state.lastTime <= configuration.getNextAssertionTimeout else {
            nextAssertion = nil
            throw CTAPError(.notAllowed, "getNextAssertion came too late")
        }
        state.remaining = state.remaining.dropFirst()
        state.lastTime = now
        nextAssertion = state.remaining.isEmpty ? nil : state
        return .response(try assertion(candidate, plan: state.plan))
    }

    /// One signed assertion response (status byte and CBOR map), with its extension outputs and, when given,
    /// numberOfCredentials. The counter is committed before the signature is made.
    ///
    /// Written member by member with ``CBORWriter``, in canonical key order, rather than as a dictionary that the
    /// encoder hashes and sorts: that was a tenth of getAssertion's time outside the signature.
    mutating func assertion(
        _ candidate: AssertionCandidate,
        plan: AssertionPlan,
        numberOfCredentials: Int? = nil
    ) throws(CTAPError) -> [UInt8] {
        var outputs: [CBORValue: CBORValue] = [:]
        if let request = plan.hmacSecret, candidate.hmacSecret {
            outputs[.textString(ExtensionName.hmacSecret)] = .byteString(
                try hmacSecretOutput(request, credentialId: candidate.id, userVerified: plan.userVerified)
            )
        }
        if plan.extensions.credBlob {
            outputs[.textString(ExtensionName.credBlob)] = .byteString(candidate.credBlob ?? [])
        }
        if plan.extensions.thirdPartyPayment {
            outputs[.textString(ExtensionName.thirdPartyPayment)] = .boolean(candidate.thirdPartyPayment)
        }
        let counter = countersRemoved.contains(candidate.id) ? 0 : try storage.incrementSignCounter()
        lastActivity = CredentialActivity(rpId: plan.rpId, credentialId: candidate.id, userHandle: candidate.user?.id)
        var flags: AuthenticatorDataFlags = []
        if plan.userPresent { flags.insert(.userPresent) }
        if plan.userVerified { flags.insert(.userVerified) }
        if candidate.backupEligible { flags.insert(.backupEligible) }
        if candidate.backupState { flags.insert(.backupState) }
        let override = takeResponseOverride(userPresent: plan.userPresent)
        let authData = AuthenticatorData.make(
            rpIdHash: plan.rpIdHash,
            flags: override?.apply(flags) ?? flags,
            signCount: counter,
            extensions: outputs
        )
        var signature = try signingKeys.key(id: candidate.id, raw: candidate.privateKey, algorithm: candidate.algorithm)
            .sign(authData + plan.clientDataHash)
        if let override { signature = override.apply(signature: signature) }
        let largeBlobKey = plan.extensions.largeBlobKey ? candidate.largeBlobKey : nil
        var members = 3
        if candidate.user != nil { members += 1 }
        if numberOfCredentials != nil { members += 1 }
        if largeBlobKey != nil { members += 1 }

        var response = CBORWriter(prefix: [CTAPStatus.ok.rawValue], capacity: 160 + candidate.id.count + authData.count)
        response.mapHead(count: members)
        // 0x01 credential: {"id", "type"} (text keys sort by length: "id" before "type").
        response.unsigned(1)
        response.mapHead(count: 2)
        response.textString("id")
        response.byteString(candidate.id)
        response.textString("type")
        response.textString("public-key")
        response.unsigned(2)
        response.byteString(authData)
        response.unsigned(3)
        response.byteString(signature)
        if let user = candidate.user {
            // Names only after user verification and when the platform must choose among several accounts
            // (CTAP 2.1 §6.2.2 step 12); otherwise only the user id.
            var entity: [CBORValue: CBORValue] = ["id": .byteString(user.id)]
            if plan.userVerified && !plan.fromAllowList && plan.candidates.count > 1 {
                if let name = user.name { entity["name"] = .textString(name) }
                if let displayName = user.displayName { entity["displayName"] = .textString(displayName) }
                if let icon = user.icon { entity["icon"] = .textString(icon) }
            }
            response.unsigned(4)
            response.value(.map(entity))
        }
        if let numberOfCredentials {
            response.unsigned(5)
            response.unsigned(UInt64(numberOfCredentials))
        }
        if let largeBlobKey {
            response.unsigned(7)
            response.byteString(largeBlobKey)
        }
        return response.bytes
    }
}
