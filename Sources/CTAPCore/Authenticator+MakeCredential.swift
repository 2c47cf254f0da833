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
}

extension Authenticator {
    /// authenticatorMakeCredential (0x01), up to the point where user presence is needed.
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
        var es256 = false
        for entry in credParams {
            guard let map = entry.mapValue else { throw CTAPError(.cborUnexpectedType, "pubKeyCredParams entry") }
            guard let alg = map[.textString("alg")] else { throw CTAPError(.missingParameter, "alg missing") }
            guard let algorithm = alg.intValue else { throw CTAPError(.cborUnexpectedType, "alg is not an integer") }
            guard let type = try map.optionalText("type") else { throw CTAPError(.missingParameter, "type missing") }
            if type == "public-key" && algorithm == -7 { es256 = true }
        }
        let excludeList = try params.array(0x05, "excludeList").map { (list) throws(CTAPError) in
            try CredentialDescriptor.list(list)
        } ?? []
        _ = try params.subMap(0x06, "extensions")
        let options = try RequestOptions(params.subMap(0x07, "options"))
        let pinUvAuthProtocol = try params.int(0x09, "pinUvAuthProtocol")
        let enterpriseAttestation = try params.int(0x0A, "enterpriseAttestation")
        let formats = try params.array(0x0B, "attestationFormatsPreference")

        if pinUvAuthParam != nil {
            guard pinUvAuthProtocol != nil else { throw CTAPError(.missingParameter, "pinUvAuthProtocol missing") }
            throw CTAPError(.invalidParameter, "no PIN/UV auth protocol is supported")
        }
        guard es256 else { throw CTAPError(.unsupportedAlgorithm, "no supported algorithm offered") }
        if enterpriseAttestation != nil { throw CTAPError(.invalidParameter, "enterprise attestation not supported") }
        if options.up == false { throw CTAPError(.invalidOption, "up=false is invalid in makeCredential") }
        if options.uv == true { throw CTAPError(.invalidOption, "no built-in user verification") }
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

        let rpIdHash = Array(SHA256.hash(data: Array(rpId.utf8)))
        let resident = options.rk ?? false
        if resident {
            let replaces = storage.residentCredentials.contains { $0.rpIdHash == rpIdHash && $0.user.id == userId }
            if !replaces && remainingDiscoverableCredentials <= 0 {
                throw CTAPError(.keyStoreFull, "no room for another discoverable credential")
            }
        }
        let prompt = PresencePrompt(command: "makeCredential", rpId: rpId, userName: user.name ?? user.displayName)
        for descriptor in excludeList where descriptor.type == "public-key" {
            if lookUp(descriptor.id, rpIdHash: rpIdHash) != nil {
                return askPresence(.excluded, prompt)
            }
        }
        let plan = MakeCredentialPlan(
            clientDataHash: clientDataHash, rpId: rpId, rpIdHash: rpIdHash, user: user, resident: resident,
            attestationNone: attestationNone)
        return askPresence(.makeCredential(plan), prompt)
    }

    /// Creates the credential after the touch: key, id, storage, counter, attestation.
    mutating func finishMakeCredential(_ plan: MakeCredentialPlan) throws(CTAPError) -> CBORValue {
        let key = newPrivateKey()
        var rawKey = Array(key.rawRepresentation)
        defer { wipe(&rawKey) }
        let credentialId = try CredentialID.seal(
            .init(isResident: plan.resident, privateKey: rawKey), rpIdHash: plan.rpIdHash, key: sealingKey,
            nonce: entropy.bytes(12))
        if plan.resident {
            let serial = (storage.residentCredentials.map(\.creationSerial).max() ?? 0) + 1
            try storage.storeResident(
                ResidentCredential(
                    id: credentialId, rpId: plan.rpId, rpIdHash: plan.rpIdHash, user: plan.user, privateKey: rawKey,
                    creationSerial: serial))
        }
        let counter = try storage.incrementSignCounter()
        let authData = AuthenticatorData.make(
            rpIdHash: plan.rpIdHash, flags: .userPresent, signCount: counter,
            attestedCredential: (configuration.aaguid, credentialId, COSEKey.es256(key.publicKey)))
        let format: String
        let statement: CBORValue
        if plan.attestationNone {
            format = "none"
            statement = .map([:])
        } else {
            format = "packed"
            let signature = try Self.sign(authData + plan.clientDataHash, with: rawKey)
            statement = ["alg": -7, "sig": .byteString(signature)]
        }
        return [0x01: .textString(format), 0x02: .byteString(authData), 0x03: statement]
    }

    /// How many more discoverable credentials the key accepts: the configured limit and the storage's room.
    var remainingDiscoverableCredentials: Int {
        min(
            max(0, configuration.maxResidentCredentials - storage.residentCredentials.count),
            storage.remainingDiscoverableCredentials)
    }

    /// A credential of this key for `rpIdHash` with the given id, or nil.
    ///
    /// A discoverable credential's id only counts while the credential is still stored.
    func lookUp(_ id: [UInt8], rpIdHash: [UInt8]) -> AssertionCandidate? {
        guard let contents = CredentialID.open(id, rpIdHash: rpIdHash, key: sealingKey) else { return nil }
        if contents.isResident {
            guard let stored = storage.residentCredentials.first(where: { $0.id == id }) else { return nil }
            return AssertionCandidate(id: id, privateKey: stored.privateKey, user: stored.user)
        }
        return AssertionCandidate(id: id, privateKey: contents.privateKey, user: nil)
    }
}
