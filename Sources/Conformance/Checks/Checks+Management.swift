package import CTAPCBOR
package import FIDOClient

/// authenticatorCredentialManagement (CTAP 2.1 §6.8), authenticatorLargeBlobs (§6.10) and authenticatorConfig (§6.11).
package enum ManagementChecks {
    static let managedRpId = "managed.fidosim.test"

    /// A request of a command with subcommands (credential management, config): `{1: subCommand, 2: params,
    /// 3: pinUvAuthProtocol, 4: pinUvAuthParam}`, the param computed over `prefix || subCommand || params` with a
    /// fresh token of `permission` (or `override`), or left out when `authenticate` is false.
    package static func subcommandRequest(
        _ ctx: ConformanceContext,
        command: UInt8,
        prefix: [UInt8],
        permission: Int,
        _ subCommand: Int,
        _ params: CBORValue?,
        authenticate: Bool,
        override: [UInt8]?
    ) throws -> CTAPResponse {
        var request: [CBORValue: CBORValue] = [1: CBORValue(subCommand)]
        if let params { request[2] = params }
        if authenticate {
            let message = prefix + [UInt8(subCommand)] + (params.map { CBOREncoder.encode($0) } ?? [])
            let auth =
                try override
                ?? PlatformPinProtocol.authenticate(
                    version: ctx.pinProtocol,
                    key: ctx.token(permissions: permission),
                    message
                )
            request[3] = CBORValue(ctx.pinProtocol)
            request[4] = .byteString(auth)
        }
        return try ctx.send(command, .map(request))
    }

    /// A credential management request (the param is over subCommand || params).
    static func manage(
        _ ctx: ConformanceContext,
        _ subCommand: Int,
        _ params: CBORValue? = nil,
        authenticate: Bool = true,
        param override: [UInt8]? = nil
    ) throws -> CTAPResponse {
        try subcommandRequest(
            ctx,
            command: CTAPCommand.credentialManagement,
            prefix: [],
            permission: ClientPIN.Permission.credentialManagement,
            subCommand,
            params,
            authenticate: authenticate,
            override: override
        )
    }

    /// Every credential of an RP as enumerateCredentials lists them (begin, then getNext).
    static func enumerate(_ ctx: ConformanceContext, rpId: String) throws -> [[Int: CBORValue]] {
        let first = try manage(ctx, 4, .map([1: .byteString(OpenSSLVerifier.sha256(Array(rpId.utf8)))]))
        if first.status == CTAPStatusCode.noCredentials { return [] }
        try ctx.expectOK(first, "enumerateCredentialsBegin")
        let head = try first.map()
        guard let total = head[9]?.intValue else {
            throw CheckFailure("enumerateCredentialsBegin without totalCredentials (0x09)")
        }
        var all = [head]
        // A key's count is not trusted to bound the loop: at most 1,000 requests.
        for _ in 1..<min(max(total, 1), 1000) {
            let next = try manage(ctx, 5, authenticate: false)
            try ctx.expectOK(next, "enumerateCredentialsGetNextCredential")
            all.append(try next.map())
        }
        return all
    }

    static func credentialId(_ entry: [Int: CBORValue]) -> [UInt8]? {
        entry[7]?.mapValue?[.textString("id")]?.bytesValue
    }

    static let credentialManagement: [ConformanceCheck] = [
        ConformanceCheck(
            "credential-management.metadata",
            .credentialManagement,
            "CTAP 2.1 §6.8.2",
            "getCredsMetadata counts the discoverable credentials made",
            requires: [.optionTrue("credMgmt"), .knownPIN, .destructive]
        ) { ctx in
            let before = try manage(ctx, 1)
            try ctx.expectOK(before, "getCredsMetadata")
            guard let count = try before.map()[1]?.intValue, let remaining = try before.map()[2]?.intValue else {
                throw CheckFailure(
                    "getCredsMetadata without existingResidentCredentialsCount (1) or maxPossibleRemaining (2)"
                )
            }
            try ctx.makeVerifiedCredential("managed", rpId: managedRpId, discoverable: true)
            let after = try manage(ctx, 1).map()
            try ctx.require(
                after[1]?.intValue == count + 1,
                "one more credential",
                expected: "\(count + 1)",
                actual: "\(after[1] ?? .null)"
            )
            try ctx.require(
                (after[2]?.intValue ?? -1) < remaining || remaining == 0,
                "fewer remaining",
                actual: "\(remaining) then \(after[2] ?? .null)"
            )
        },
        ConformanceCheck(
            "credential-management.rps",
            .credentialManagement,
            "CTAP 2.1 §6.8.3",
            "enumerateRPs lists each RP with its rpIDHash",
            requires: [.optionTrue("credMgmt"), .knownPIN, .destructive]
        ) { ctx in
            _ = try ctx.credential("managed", discoverable: true)
            let first = try manage(ctx, 2)
            try ctx.expectOK(first, "enumerateRPsBegin")
            let head = try first.map()
            guard let total = head[5]?.intValue else { throw CheckFailure("enumerateRPsBegin without totalRPs (0x05)") }
            var rps = [head]
            for _ in 1..<min(max(total, 1), 1000) {
                let next = try manage(ctx, 3, authenticate: false)
                try ctx.expectOK(next, "enumerateRPsGetNextRP")
                rps.append(try next.map())
            }
            var found = false
            for rp in rps {
                guard let id = rp[3]?.mapValue?[.textString("id")]?.textValue, let hash = rp[4]?.bytesValue else {
                    throw CheckFailure("an RP entry without rp (0x03) id or rpIDHash (0x04)")
                }
                try ctx.require(hash == OpenSSLVerifier.sha256(Array(id.utf8)), "rpIDHash is SHA-256 of \(id)")
                found = found || id == managedRpId
            }
            try ctx.require(found, "the RP of the credential made is listed", expected: managedRpId)
        },
        ConformanceCheck(
            "credential-management.credentials",
            .credentialManagement,
            "CTAP 2.1 §6.8.4",
            "enumerateCredentials gives the user, the credential ID and the public key makeCredential gave",
            requires: [.optionTrue("credMgmt"), .knownPIN, .destructive]
        ) { ctx in
            let made = try ctx.credential("managed", discoverable: true)
            let entries = try enumerate(ctx, rpId: managedRpId)
            guard let entry = entries.first(where: { credentialId($0) == made.id }) else {
                throw CheckFailure(
                    "the credential is listed",
                    expected: Hex.string(made.id.prefix(8)),
                    actual: "\(entries.count) entries"
                )
            }
            try ctx.require(
                entry[6]?.mapValue?[.textString("id")]?.bytesValue == made.userId,
                "user (0x06) has the user ID"
            )
            guard let key = entry[8] else { throw CheckFailure("no publicKey (0x08)") }
            try ctx.require(try COSEPublicKey(key) == made.publicKey, "publicKey (0x08) is makeCredential's")
        },
        ConformanceCheck(
            "credential-management.update-user",
            .credentialManagement,
            "CTAP 2.1 §6.8.6",
            "updateUserInformation renames the user",
            requires: [.optionTrue("credMgmt"), .knownPIN, .destructive, .version("FIDO_2_1")]
        ) { ctx in
            let made = try ctx.credential("managed", discoverable: true)
            let user: CBORValue = .map([
                "id": .byteString(made.userId), "name": "renamed-user", "displayName": "Renamed",
            ])
            try ctx.expectOK(try manage(ctx, 7, .map([2: ctx.descriptor(made.id), 3: user])), "updateUserInformation")
            let entry = try enumerate(ctx, rpId: managedRpId).first { credentialId($0) == made.id }
            try ctx.require(
                entry?[6]?.mapValue?[.textString("name")]?.textValue == "renamed-user",
                "the new name is listed",
                actual: "\(entry?[6] ?? .null)"
            )
        },
        ConformanceCheck(
            "credential-management.delete",
            .credentialManagement,
            "CTAP 2.1 §6.8.5",
            "deleteCredential removes it: getAssertion finds nothing",
            requires: [.optionTrue("credMgmt"), .knownPIN, .destructive]
        ) { ctx in
            let made = try ctx.credential("managed", discoverable: true)
            try ctx.expectOK(try manage(ctx, 6, .map([2: ctx.descriptor(made.id)])), "deleteCredential")
            ctx.credentials["managed"] = nil
            try ctx.expect(
                try ctx.getAssertion(rpId: managedRpId, allow: [made.id]).response,
                CTAPStatusCode.noCredentials,
                "getAssertion after the delete"
            )
            try ctx.require(
                try enumerate(ctx, rpId: managedRpId).allSatisfy { credentialId($0) != made.id },
                "not listed any more"
            )
        },
        ConformanceCheck(
            "credential-management.bad-param",
            .credentialManagement,
            "CTAP 2.1 §6.8.2",
            "a pinUvAuthParam that does not verify gets CTAP2_ERR_PIN_AUTH_INVALID",
            requires: [.optionTrue("credMgmt"), .knownPIN]
        ) { ctx in
            try ctx.expect(
                try manage(ctx, 1, param: randomBytes(ctx.pinProtocol == 2 ? 32 : 16)),
                CTAPStatusCode.pinAuthInvalid,
                "a random pinUvAuthParam"
            )
        },
        ConformanceCheck(
            "credential-management.no-param",
            .credentialManagement,
            "CTAP 2.1 §6.8.2",
            "no pinUvAuthParam gets CTAP2_ERR_PUAT_REQUIRED",
            requires: [.optionTrue("credMgmt"), .knownPIN]
        ) { ctx in
            try ctx.expect(
                try manage(ctx, 1, authenticate: false),
                CTAPStatusCode.puatRequired,
                "getCredsMetadata without pinUvAuthParam"
            )
        },
        ConformanceCheck(
            "credential-management.enc-cred-store-state",
            .credentialManagement,
            "CTAP 2.3 §6.4",
            "encCredStoreState decrypts with the persistent token, to the same state each time under a fresh IV",
            requires: [.version("FIDO_2_3"), .knownPIN, .optionTrue("perCredMgmtRO")]
        ) { ctx in
            guard ctx.info.raw[0x1E] != nil else { throw CheckSkip("getInfo has no encCredStoreState (0x1E)") }
            let token = try ctx.token(permissions: 0x40)
            var states: [[UInt8]] = []
            var sealed: [[UInt8]] = []
            for _ in 0..<2 {
                let response = try ctx.client.send(CTAPCommand.getInfo)
                try ctx.expectOK(response, "getInfo")
                guard let value = try response.map()[0x1E]?.bytesValue else {
                    throw CheckFailure("encCredStoreState (0x1E) went away")
                }
                guard let state = PersistentTokenSecret.decrypt(value, token: token, info: "encCredStoreState") else {
                    throw CheckFailure("encCredStoreState does not decrypt with the persistent token")
                }
                sealed.append(value)
                states.append(state)
            }
            try ctx.require(states[0] == states[1], "the same state twice")
            try ctx.require(sealed[0] != sealed[1], "a fresh IV each time")
        },
    ]

    // MARK: Large blobs

    static func readBlobs(_ ctx: ConformanceContext) throws -> [UInt8] {
        let fragment = max(64, (ctx.info.maxMsgSize ?? 1024) - 64)
        var data: [UInt8] = []
        while true {
            let response = try ctx.send(
                CTAPCommand.largeBlobs,
                .map([1: CBORValue(fragment), 3: CBORValue(data.count)])
            )
            try ctx.expectOK(response, "largeBlobs get at offset \(data.count)")
            guard let chunk = try response.map()[1]?.bytesValue else {
                throw CheckFailure("largeBlobs get without config (0x01)")
            }
            data += chunk
            if chunk.count < fragment { return data }
            guard data.count <= max(ctx.info.maxSerializedLargeBlobArray ?? 0, 1 << 20) else {
                throw CheckFailure("the large-blob array ends", actual: "more than \(data.count) bytes")
            }
        }
    }

    static func serialized(_ array: CBORValue) -> [UInt8] {
        let body = CBOREncoder.encode(array)
        return body + OpenSSLVerifier.sha256(body).prefix(16)
    }

    static func writeBlobs(_ ctx: ConformanceContext, _ data: [UInt8], authenticate: Bool = true) throws -> CTAPResponse
    {
        var request: [CBORValue: CBORValue] = [2: .byteString(data), 3: 0, 4: CBORValue(data.count)]
        if authenticate {
            let token = try ctx.token(permissions: ClientPIN.Permission.largeBlobWrite)
            let message = [UInt8](repeating: 0xFF, count: 32) + [0x0C, 0x00, 0, 0, 0, 0] + OpenSSLVerifier.sha256(data)
            request[5] = .byteString(PlatformPinProtocol.authenticate(version: ctx.pinProtocol, key: token, message))
            request[6] = CBORValue(ctx.pinProtocol)
        }
        return try ctx.send(CTAPCommand.largeBlobs, .map(request))
    }

    static let largeBlobs: [ConformanceCheck] = [
        ConformanceCheck(
            "large-blobs.read",
            .largeBlobs,
            "CTAP 2.1 §6.10.2",
            "the stored array reads back with its truncated SHA-256",
            requires: [.optionTrue("largeBlobs")]
        ) { ctx in
            let data = try readBlobs(ctx)
            try ctx.require(data.count >= 17, "at least an empty array and its hash", actual: "\(data.count) bytes")
            let body = Array(data.dropLast(16))
            try ctx.require(
                Array(data.suffix(16)) == Array(OpenSSLVerifier.sha256(body).prefix(16)),
                "the last 16 bytes are SHA-256's first 16 of the rest"
            )
            try ctx.require(try CBORItem.decode(body).arrayValue != nil, "the rest is a CBOR array")
        },
        ConformanceCheck(
            "large-blobs.write",
            .largeBlobs,
            "CTAP 2.1 §6.10.2, §6.10.3",
            "a written array reads back the same",
            requires: [.optionTrue("largeBlobs"), .knownPIN, .destructive]
        ) { ctx in
            let original = try readBlobs(ctx)
            let entry: CBORValue = .map([1: .byteString(randomBytes(40)), 2: .byteString(randomBytes(12)), 3: 24])
            let data = serialized(.array([entry]))
            try ctx.expectOK(try writeBlobs(ctx, data), "largeBlobs set")
            try ctx.require(try readBlobs(ctx) == data, "the array reads back")
            try ctx.expectOK(try writeBlobs(ctx, original), "largeBlobs set of the original array")
        },
        ConformanceCheck(
            "large-blobs.integrity",
            .largeBlobs,
            "CTAP 2.1 §6.10.2",
            "an array whose hash does not match gets CTAP2_ERR_INTEGRITY_FAILURE",
            requires: [.optionTrue("largeBlobs"), .knownPIN]
        ) { ctx in
            var data = serialized(.array([]))
            data[data.count - 1] ^= 0xFF
            try ctx.expect(try writeBlobs(ctx, data), CTAPStatusCode.integrityFailure, "a wrong hash")
        },
        ConformanceCheck(
            "large-blobs.no-param",
            .largeBlobs,
            "CTAP 2.1 §6.10.2",
            "a write without pinUvAuthParam on a PIN key gets CTAP2_ERR_PUAT_REQUIRED",
            requires: [.optionTrue("largeBlobs"), .knownPIN]
        ) { ctx in
            try ctx.expect(
                try writeBlobs(ctx, serialized(.array([])), authenticate: false),
                CTAPStatusCode.puatRequired,
                "set without pinUvAuthParam"
            )
        },
        ConformanceCheck(
            "large-blobs.get-too-long",
            .largeBlobs,
            "CTAP 2.1 §6.10.2",
            "a get longer than maxFragmentLength gets CTAP1_ERR_INVALID_LENGTH",
            requires: [.optionTrue("largeBlobs")]
        ) { ctx in
            let fragment = (ctx.info.maxMsgSize ?? 1024) - 64
            try ctx.expect(
                try ctx.send(CTAPCommand.largeBlobs, .map([1: CBORValue(fragment + 1), 3: 0])),
                CTAPStatusCode.invalidLength,
                "get \(fragment + 1)"
            )
        },
    ]

    // MARK: Config

    /// An authenticatorConfig request (the param is over 32 × 0xff || 0x0d || subCommand || params).
    static func configure(
        _ ctx: ConformanceContext,
        _ subCommand: Int,
        _ params: CBORValue? = nil,
        authenticate: Bool = true,
        param override: [UInt8]? = nil
    ) throws -> CTAPResponse {
        try subcommandRequest(
            ctx,
            command: CTAPCommand.config,
            prefix: [UInt8](repeating: 0xFF, count: 32) + [0x0D],
            permission: ClientPIN.Permission.authenticatorConfig,
            subCommand,
            params,
            authenticate: authenticate,
            override: override
        )
    }

    static let config: [ConformanceCheck] = [
        ConformanceCheck(
            "config.no-param",
            .config,
            "CTAP 2.1 §6.11",
            "a config request without pinUvAuthParam on a PIN key gets CTAP2_ERR_PUAT_REQUIRED",
            requires: [.optionTrue("authnrCfg"), .knownPIN]
        ) { ctx in
            try ctx.expect(
                try configure(ctx, 3, .map([1: CBORValue(ctx.info.minPINLength ?? 4)]), authenticate: false),
                CTAPStatusCode.puatRequired,
                "setMinPINLength without pinUvAuthParam"
            )
        },
        ConformanceCheck(
            "config.bad-param",
            .config,
            "CTAP 2.1 §6.11",
            "a pinUvAuthParam that does not verify gets CTAP2_ERR_PIN_AUTH_INVALID",
            requires: [.optionTrue("authnrCfg"), .knownPIN]
        ) { ctx in
            try ctx.expect(
                try configure(
                    ctx,
                    3,
                    .map([1: CBORValue(ctx.info.minPINLength ?? 4)]),
                    param: randomBytes(ctx.pinProtocol == 2 ? 32 : 16)
                ),
                CTAPStatusCode.pinAuthInvalid,
                "a random pinUvAuthParam"
            )
        },
        ConformanceCheck(
            "config.toggle-always-uv",
            .config,
            "CTAP 2.1 §6.11.2",
            "toggleAlwaysUv flips alwaysUv in getInfo, and back",
            requires: [.optionTrue("authnrCfg"), .option("alwaysUv"), .knownPIN, .destructive]
        ) { ctx in
            let before = ctx.info.options["alwaysUv"] == true
            try ctx.expectOK(try configure(ctx, 2), "toggleAlwaysUv")
            try ctx.refreshInfo()
            try ctx.require(ctx.info.options["alwaysUv"] == !before, "alwaysUv is now \(!before)")
            try ctx.expectOK(try configure(ctx, 2), "toggleAlwaysUv back")
            try ctx.refreshInfo()
            try ctx.require(ctx.info.options["alwaysUv"] == before, "alwaysUv is \(before) again")
        },
        ConformanceCheck(
            "config.min-pin-length",
            .config,
            "CTAP 2.1 §6.11.4",
            "setMinPINLength keeps the length; a lower one gets CTAP2_ERR_PIN_POLICY_VIOLATION",
            requires: [.optionTrue("authnrCfg"), .optionTrue("setMinPINLength"), .knownPIN, .destructive]
        ) { ctx in
            let current = ctx.info.minPINLength ?? 4
            try ctx.expectOK(
                try configure(ctx, 3, .map([1: CBORValue(current)])),
                "setMinPINLength to the current \(current)"
            )
            try ctx.expect(
                try configure(ctx, 3, .map([1: CBORValue(current - 1)])),
                CTAPStatusCode.pinPolicyViolation,
                "setMinPINLength to \(current - 1)"
            )
        },
    ]
}
