package import CTAPCBOR
package import FIDOClient

/// Requests and checks of answers that several checks share.
extension ConformanceContext {
    package static let rpId = "conform.fidosim.test"
    package static let otherRpId = "other.fidosim.test"

    /// A credential list as a platform sends it: no longer than maxCredentialCountInList, keeping the last entries
    /// (the checks put the credential that matters last).
    package func limited(_ ids: [[UInt8]]) -> [[UInt8]] {
        guard let limit = info.maxCredentialCountInList, limit > 0, ids.count > limit else { return ids }
        return Array(ids.suffix(limit))
    }

    package func descriptor(_ id: [UInt8]) -> CBORValue {
        .map(["type": "public-key", "id": .byteString(id)])
    }

    package func expect(_ response: CTAPResponse, _ status: UInt8, _ what: String) throws {
        guard response.status == status else {
            throw CheckFailure(
                what,
                expected: CTAPStatusCode.describe(status),
                actual: CTAPStatusCode.describe(response.status)
            )
        }
    }

    package func expectOK(_ response: CTAPResponse, _ what: String) throws {
        try expect(response, CTAPStatusCode.ok, what)
    }

    package func require(_ condition: Bool, _ message: String, expected: String? = nil, actual: String? = nil) throws {
        guard condition else { throw CheckFailure(message, expected: expected, actual: actual) }
    }

    /// Whether a makeCredential needs pinUvAuthParam on this key (CTAP 2.1 §6.1.2 steps 4-5).
    func makeCredentialNeedsUV(discoverable: Bool) -> Bool {
        if info.options["alwaysUv"] == true { return true }
        guard info.hasPIN || info.options["uv"] == true else { return false }
        return discoverable || info.options["makeCredUvNotRqd"] != true
    }

    /// The parameters of an authenticatorMakeCredential request.
    package func makeCredentialParameters(
        rpId: String = ConformanceContext.rpId,
        userId: [UInt8],
        clientDataHash: [UInt8],
        algorithms: [Int] = [-7],
        discoverable: Bool = false,
        exclude: [[UInt8]] = [],
        extensions: [String: CBORValue] = [:]
    ) -> [CBORValue: CBORValue] {
        var params: [CBORValue: CBORValue] = [
            1: .byteString(clientDataHash),
            2: .map(["id": .textString(rpId), "name": "fidosim conformance"]),
            3: .map(["id": .byteString(userId), "name": "conform-user", "displayName": "Conformance User"]),
            4: .array(algorithms.map { .map(["type": "public-key", "alg": CBORValue($0)]) }),
        ]
        if !exclude.isEmpty { params[5] = .array(limited(exclude).map(descriptor)) }
        if !extensions.isEmpty {
            params[6] = .map(
                Dictionary(uniqueKeysWithValues: extensions.map { (CBORValue.textString($0.key), $0.value) })
            )
        }
        if discoverable { params[7] = .map(["rk": true]) }
        return params
    }

    /// makeCredential, with user verification through the PIN when the key needs it. The caller checks the status.
    package func makeCredential(
        rpId: String = ConformanceContext.rpId,
        userId: [UInt8] = randomBytes(16),
        algorithms: [Int] = [-7],
        discoverable: Bool = false,
        exclude: [[UInt8]] = [],
        extensions: [String: CBORValue] = [:],
        verify: Bool = false
    ) throws -> (response: CTAPResponse, clientDataHash: [UInt8], userId: [UInt8]) {
        let clientDataHash = randomBytes(32)
        var params = makeCredentialParameters(
            rpId: rpId,
            userId: userId,
            clientDataHash: clientDataHash,
            algorithms: algorithms,
            discoverable: discoverable,
            exclude: exclude,
            extensions: extensions
        )
        if verify || makeCredentialNeedsUV(discoverable: discoverable) {
            guard pin != nil || !info.hasPIN else { throw CheckSkip("the key has a PIN: give it with --pin") }
            try skipWithoutPINUnderAlwaysUv()
            for (key, value) in try userVerification(
                permission: ClientPIN.Permission.makeCredential,
                rpId: rpId,
                clientDataHash: clientDataHash
            ) {
                params[key] = value
            }
        }
        let response = try send(CTAPCommand.makeCredential, .map(params), touch: "makeCredential for \(rpId)")
        return (response, clientDataHash, userId)
    }

    /// Reads and verifies a successful makeCredential answer: the attestation object's fields, the rpIdHash, the
    /// flags, the credential key and the attestation statement (OpenSSL).
    @discardableResult
    package func madeCredential(
        _ response: CTAPResponse,
        rpId: String = ConformanceContext.rpId,
        clientDataHash: [UInt8],
        userId: [UInt8],
        discoverable: Bool
    ) throws -> (credential: MadeCredential, authData: ParsedAuthenticatorData, map: [Int: CBORValue]) {
        if discoverable && response.status == CTAPStatusCode.keyStoreFull {
            throw CheckSkip("the key's store of discoverable credentials is full (CTAP2_ERR_KEY_STORE_FULL)")
        }
        try expectOK(response, "makeCredential")
        let map = try response.map()
        guard let format = map[1]?.textValue, let authBytes = map[2]?.bytesValue, let statement = map[3]?.mapValue
        else {
            throw CheckFailure("the attestation object lacks fmt (1), authData (2) or attStmt (3)")
        }
        let authData = try ParsedAuthenticatorData(authBytes)
        try require(
            authData.rpIdHash == OpenSSLVerifier.sha256(Array(rpId.utf8)),
            "rpIdHash is SHA-256 of the RP ID",
            expected: Hex.string(OpenSSLVerifier.sha256(Array(rpId.utf8))),
            actual: Hex.string(authData.rpIdHash)
        )
        try require(authData.userPresent, "the UP flag is set", actual: "flags 0x\(Hex.string(authData.flags))")
        try requireBackupFlagsAgree(authData)
        guard authData.attested, let id = authData.credentialId, let keyValue = authData.credentialPublicKey else {
            throw CheckFailure(
                "the AT flag and attested credential data",
                actual: "flags 0x\(Hex.string(authData.flags))"
            )
        }
        let key = try COSEPublicKey(keyValue)
        let type = try AttestationVerifier.verify(
            format: format,
            authData: authData,
            statement: statement,
            clientDataHash: clientDataHash
        )
        if type != .none {
            try require(
                authData.aaguid == info.aaguid,
                "the AAGUID in authenticator data is getInfo's",
                expected: Hex.string(info.aaguid),
                actual: Hex.string(authData.aaguid ?? [])
            )
        }
        let credential = MadeCredential(
            rpId: rpId,
            id: id,
            publicKey: key,
            userId: userId,
            signCount: authData.signCount,
            discoverable: discoverable
        )
        return (credential, authData, map)
    }

    /// Makes and verifies a credential, remembered under `name`.
    @discardableResult
    package func makeVerifiedCredential(
        _ name: String,
        rpId: String = ConformanceContext.rpId,
        discoverable: Bool = false,
        extensions: [String: CBORValue] = [:],
        verify: Bool = false
    ) throws -> (credential: MadeCredential, authData: ParsedAuthenticatorData, map: [Int: CBORValue]) {
        let made = try makeCredential(rpId: rpId, discoverable: discoverable, extensions: extensions, verify: verify)
        let result = try madeCredential(
            made.response,
            rpId: rpId,
            clientDataHash: made.clientDataHash,
            userId: made.userId,
            discoverable: discoverable
        )
        credentials[name] = result.credential
        return result
    }

    /// A credential an earlier check made, or a new one made now.
    package func credential(_ name: String, discoverable: Bool = false) throws -> MadeCredential {
        if let made = credentials[name] { return made }
        return try makeVerifiedCredential(name, discoverable: discoverable).credential
    }

    /// getAssertion; `verify` adds the PIN's user verification. The caller checks the status.
    package func getAssertion(
        rpId: String = ConformanceContext.rpId,
        allow: [[UInt8]]? = nil,
        up: Bool? = nil,
        verify: Bool = false,
        extensions: [String: CBORValue] = [:],
        clientDataHash: [UInt8] = randomBytes(32)
    ) throws -> (response: CTAPResponse, clientDataHash: [UInt8]) {
        var params: [CBORValue: CBORValue] = [1: .textString(rpId), 2: .byteString(clientDataHash)]
        if let allow { params[3] = .array(limited(allow).map(descriptor)) }
        if !extensions.isEmpty {
            params[4] = .map(
                Dictionary(uniqueKeysWithValues: extensions.map { (CBORValue.textString($0.key), $0.value) })
            )
        }
        if let up { params[5] = .map(["up": .boolean(up)]) }
        // alwaysUv: a getAssertion with user presence needs a token (CTAP 2.1 §6.2.2), as a platform sends it.
        if verify || (info.options["alwaysUv"] == true && up != false) {
            try skipWithoutPINUnderAlwaysUv()
            guard pin != nil else { throw CheckSkip("user verification needs the key's PIN") }
            // getAssertion carries pinUvAuthParam as 0x06 and pinUvAuthProtocol as 0x07.
            let uv = try userVerification(
                permission: ClientPIN.Permission.getAssertion,
                rpId: rpId,
                clientDataHash: clientDataHash
            )
            params[6] = uv[8]
            params[7] = uv[9]
        }
        let touch: String? = up == false ? nil : "getAssertion for \(rpId)"
        return (try send(CTAPCommand.getAssertion, .map(params), touch: touch), clientDataHash)
    }

    /// Reads and verifies a successful getAssertion or getNextAssertion answer against the credentials it may come
    /// from: the credential ID, the rpIdHash, and the signature over authData || clientDataHash (OpenSSL).
    @discardableResult
    package func verifiedAssertion(
        _ response: CTAPResponse,
        rpId: String = ConformanceContext.rpId,
        clientDataHash: [UInt8],
        from candidates: [MadeCredential]
    ) throws -> (credential: MadeCredential, authData: ParsedAuthenticatorData, map: [Int: CBORValue]) {
        try expectOK(response, "getAssertion")
        let map = try response.map()
        guard let authBytes = map[2]?.bytesValue, let signature = map[3]?.bytesValue else {
            throw CheckFailure("the assertion lacks authData (2) or signature (3)")
        }
        let id: [UInt8]
        if let returned = map[1]?.mapValue?[.textString("id")]?.bytesValue {
            id = returned
        } else if candidates.count == 1 {
            // CTAP 2.1 §6.2.3: credential (0x01) may be left out when the allow list had one entry.
            id = candidates[0].id
        } else {
            throw CheckFailure("the assertion lacks credential (1)")
        }
        guard let credential = candidates.first(where: { $0.id == id }) else {
            throw CheckFailure("the assertion names a credential that was not asked for", actual: Hex.string(id))
        }
        let authData = try ParsedAuthenticatorData(authBytes)
        try require(
            authData.rpIdHash == OpenSSLVerifier.sha256(Array(rpId.utf8)),
            "rpIdHash is SHA-256 of the RP ID",
            expected: Hex.string(OpenSSLVerifier.sha256(Array(rpId.utf8))),
            actual: Hex.string(authData.rpIdHash)
        )
        try require(!authData.attested, "an assertion has no attested credential data (AT clear)")
        try requireBackupFlagsAgree(authData)
        guard
            try credential.publicKey.verify(message: authBytes + clientDataHash, signature: signature)
        else {
            throw CheckFailure(
                "the assertion signature verifies with the credential's public key (OpenSSL)",
                actual: Hex.string(signature)
            )
        }
        return (credential, authData, map)
    }

    /// WebAuthn Level 3 §6.1: a credential that is backed up (BS, 0x10) is backup eligible (BE, 0x08).
    func requireBackupFlagsAgree(_ authData: ParsedAuthenticatorData) throws {
        try require(
            authData.flags & 0x10 == 0 || authData.flags & 0x08 != 0,
            "BS (backed up) only with BE (backup eligible) (WebAuthn §6.1)",
            actual: "flags 0x\(Hex.string(authData.flags))"
        )
    }

    /// A key with alwaysUv on and no PIN makes no credential and signs nothing with user presence (CTAP 2.1 §6.1.2,
    /// §6.2.2): such checks are skipped, as for a key whose PIN the runner does not know.
    func skipWithoutPINUnderAlwaysUv() throws {
        guard info.options["alwaysUv"] == true, !info.hasPIN, info.options["uv"] != true else { return }
        throw CheckSkip(
            "alwaysUv is on and the key has no PIN: every request with user presence needs a token "
                + "(--allow-destructive sets a PIN)"
        )
    }

    /// `up: false` on a key with alwaysUv on, where a request with user presence always carries a token: a request
    /// "without user verification" is then a silent one (CTAP 2.1 §6.2.2 holds alwaysUv to requests with `up`).
    package var silentUnderAlwaysUv: Bool? { info.options["alwaysUv"] == true ? false : nil }

    /// A PIN/UV auth protocol the key supports (two when it has both).
    package var pinProtocol: Int { info.pinUvAuthProtocols.contains(2) ? 2 : (info.pinUvAuthProtocols.first ?? 1) }

    /// A token with `permissions` (CTAP 2.1) or from getPinToken (2.0 keys).
    package func token(permissions: Int, rpId: String? = nil, version: Int? = nil) throws -> [UInt8] {
        guard let pin else { throw CheckSkip("needs the key's PIN") }
        let pinClient = ClientPIN(client: client, version: version ?? pinProtocol)
        let result = try pinClient.token(
            pin: pin,
            permissions: info.options["pinUvAuthToken"] == true ? permissions : nil,
            rpId: rpId
        )
        guard let token = result.token else {
            throw CheckFailure(
                "a pinUvAuthToken",
                expected: CTAPStatusCode.describe(0),
                actual: CTAPStatusCode.describe(result.response.status)
            )
        }
        return token
    }

    /// A U2F request that needs a touch: repeated while the key answers CONDITIONS_NOT_SATISFIED, as U2F clients do.
    package func u2fWithTouch(_ apdu: [UInt8], what: String) throws -> (data: [UInt8], status: UInt16) {
        try deviceOperator.touchNeeded(what)
        let start = CTAPHIDClient.nowMs()
        while true {
            let answer = try client.u2f(apdu)
            if answer.status != U2FMessage.conditionsNotSatisfied || CTAPHIDClient.nowMs() - start > 30000 {
                return answer
            }
            sleepMs(100)
        }
    }
}
