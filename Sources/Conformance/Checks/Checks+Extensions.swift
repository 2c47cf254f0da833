import CTAPCBOR
import FIDOClient

/// Extension checks (CTAP 2.1 §12, CTAP 2.2 §12), each run when getInfo lists the extension.
enum ExtensionChecks {
    /// The hmac-secret outputs for `salts` (32 or 64 bytes) from a getAssertion over `credential`, decrypted.
    static func hmacSecret(
        _ ctx: ConformanceContext,
        _ credential: MadeCredential,
        salts: [UInt8],
        version: Int
    ) throws -> [UInt8] {
        let session = try ClientPIN(client: ctx.client, version: version).agree()
        let encrypted = try session.encrypt(salts)
        var input: [CBORValue: CBORValue] = [
            1: session.platformKey, 2: .byteString(encrypted), 3: .byteString(session.authenticate(encrypted)),
        ]
        if version == 2 { input[4] = 2 }
        let assertion = try ctx.getAssertion(allow: [credential.id], extensions: ["hmac-secret": .map(input)])
        let result = try ctx.verifiedAssertion(
            assertion.response,
            clientDataHash: assertion.clientDataHash,
            from: [credential]
        )
        guard let output = result.authData.extensions?["hmac-secret"]?.bytesValue else {
            throw CheckFailure("the assertion's authenticator data has an hmac-secret output")
        }
        return try session.decrypt(output)
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "extensions.unknown",
            .extensions,
            "CTAP 2.1 §6.1.2",
            "an extension the key does not know is ignored"
        ) { ctx in
            let made = try ctx.makeVerifiedCredential("unknown-ext", extensions: ["fidosim-conform-unknown": true])
            try ctx.require(made.authData.extensions?["fidosim-conform-unknown"] == nil, "no output for it")
        },
        ConformanceCheck(
            "extensions.cred-protect",
            .extensions,
            "CTAP 2.1 §12.1",
            "credProtect 3 hides a credential from requests without user verification",
            requires: [.extension("credProtect"), .knownPIN, .destructive]
        ) { ctx in
            let rpId = "protected.fidosim.test"
            let made = try ctx.makeVerifiedCredential(
                "protected",
                rpId: rpId,
                discoverable: true,
                extensions: ["credProtect": 3]
            )
            try ctx.require(
                made.authData.extensions?["credProtect"]?.intValue == 3,
                "the output credProtect is 3",
                actual: "\(made.authData.extensions ?? [:])"
            )
            try ctx.expect(
                try ctx.getAssertion(rpId: rpId, up: ctx.silentUnderAlwaysUv).response,
                CTAPStatusCode.noCredentials,
                "discovery without user verification"
            )
            try ctx.expect(
                try ctx.getAssertion(rpId: rpId, allow: [made.credential.id], up: ctx.silentUnderAlwaysUv).response,
                CTAPStatusCode.noCredentials,
                "an allow list without user verification"
            )
            let assertion = try ctx.getAssertion(rpId: rpId, verify: true)
            let result = try ctx.verifiedAssertion(
                assertion.response,
                rpId: rpId,
                clientDataHash: assertion.clientDataHash,
                from: [made.credential]
            )
            try ctx.require(result.authData.userVerified, "with user verification it signs, UV set")
        },
        ConformanceCheck(
            "extensions.cred-protect-2",
            .extensions,
            "CTAP 2.1 §12.1",
            "credProtect 2 needs an allow list without user verification",
            requires: [.extension("credProtect"), .destructive]
        ) { ctx in
            let rpId = "optional.fidosim.test"
            let made = try ctx.makeVerifiedCredential(
                "optional",
                rpId: rpId,
                discoverable: true,
                extensions: ["credProtect": 2]
            )
            try ctx.require(made.authData.extensions?["credProtect"]?.intValue == 2, "the output credProtect is 2")
            try ctx.expect(
                try ctx.getAssertion(rpId: rpId, up: ctx.silentUnderAlwaysUv).response,
                CTAPStatusCode.noCredentials,
                "discovery without user verification"
            )
            let assertion = try ctx.getAssertion(rpId: rpId, allow: [made.credential.id])
            try ctx.verifiedAssertion(
                assertion.response,
                rpId: rpId,
                clientDataHash: assertion.clientDataHash,
                from: [made.credential]
            )
        },
        ConformanceCheck(
            "extensions.hmac-secret",
            .extensions,
            "CTAP 2.1 §12.5",
            "hmac-secret gives the same output for the same salt, and two outputs for two salts",
            requires: [.extension("hmac-secret")]
        ) { ctx in
            let made = try ctx.makeVerifiedCredential("hmac", extensions: ["hmac-secret": true])
            try ctx.require(
                made.authData.extensions?["hmac-secret"] == true,
                "the makeCredential output is true",
                actual: "\(made.authData.extensions ?? [:])"
            )
            let salt1 = randomBytes(32)
            let salt2 = randomBytes(32)
            for version in ctx.info.pinUvAuthProtocols.isEmpty ? [1] : ctx.info.pinUvAuthProtocols {
                let one = try hmacSecret(ctx, made.credential, salts: salt1, version: version)
                try ctx.require(one.count == 32, "one salt: 32 bytes", actual: "\(one.count)")
                let again = try hmacSecret(ctx, made.credential, salts: salt1, version: version)
                try ctx.require(again == one, "the same salt gives the same output (protocol \(version))")
                let two = try hmacSecret(ctx, made.credential, salts: salt1 + salt2, version: version)
                try ctx.require(
                    two.count == 64 && Array(two.prefix(32)) == one && Array(two.suffix(32)) != one,
                    "two salts: the first output, then another"
                )
            }
        },
        ConformanceCheck(
            "extensions.hmac-secret-mc",
            .extensions,
            "CTAP 2.2 §12.8",
            "hmac-secret-mc gives at makeCredential the output getAssertion's hmac-secret gives for the same salt",
            requires: [.extension("hmac-secret-mc"), .extension("hmac-secret")]
        ) { ctx in
            let version = ctx.pinProtocol
            let session = try ClientPIN(client: ctx.client, version: version).agree()
            let salt = randomBytes(32)
            let encrypted = try session.encrypt(salt)
            var input: [CBORValue: CBORValue] = [
                1: session.platformKey, 2: .byteString(encrypted), 3: .byteString(session.authenticate(encrypted)),
            ]
            if version == 2 { input[4] = 2 }
            let made = try ctx.makeVerifiedCredential(
                "hmac-mc",
                extensions: ["hmac-secret": true, "hmac-secret-mc": .map(input)]
            )
            guard let output = made.authData.extensions?["hmac-secret-mc"]?.bytesValue else {
                throw CheckFailure(
                    "the makeCredential authenticator data has an hmac-secret-mc output",
                    actual: "\(made.authData.extensions ?? [:])"
                )
            }
            let atRegistration = try session.decrypt(output)
            try ctx.require(atRegistration.count == 32, "32 bytes for one salt", actual: "\(atRegistration.count)")
            let atAssertion = try hmacSecret(ctx, made.credential, salts: salt, version: version)
            try ctx.require(
                atAssertion == atRegistration,
                "getAssertion's hmac-secret output for the same salt is the same"
            )
        },
        ConformanceCheck(
            "extensions.cred-blob",
            .extensions,
            "CTAP 2.1 §12.2",
            "credBlob stores a blob with a discoverable credential and returns it",
            requires: [.extension("credBlob"), .destructive]
        ) { ctx in
            let blob = randomBytes(min(32, ctx.info.maxCredBlobLength ?? 32))
            let made = try ctx.makeVerifiedCredential(
                "blob",
                rpId: "blob.fidosim.test",
                discoverable: true,
                extensions: ["credBlob": .byteString(blob)]
            )
            try ctx.require(made.authData.extensions?["credBlob"] == true, "the makeCredential output is true")
            let assertion = try ctx.getAssertion(
                rpId: "blob.fidosim.test",
                allow: [made.credential.id],
                extensions: ["credBlob": true]
            )
            let result = try ctx.verifiedAssertion(
                assertion.response,
                rpId: "blob.fidosim.test",
                clientDataHash: assertion.clientDataHash,
                from: [made.credential]
            )
            try ctx.require(
                result.authData.extensions?["credBlob"]?.bytesValue == blob,
                "the blob comes back",
                expected: Hex.string(blob)
            )
            let tooLong = try ctx.makeVerifiedCredential(
                "blob-long",
                rpId: "blob.fidosim.test",
                discoverable: true,
                extensions: ["credBlob": .byteString(randomBytes((ctx.info.maxCredBlobLength ?? 32) + 1))]
            )
            try ctx.require(
                tooLong.authData.extensions?["credBlob"] == false,
                "a blob over maxCredBlobLength: output false"
            )
        },
        ConformanceCheck(
            "extensions.large-blob-key",
            .extensions,
            "CTAP 2.1 §12.3",
            "largeBlobKey gives a 32-byte key at makeCredential and the same at getAssertion",
            requires: [.extension("largeBlobKey"), .destructive]
        ) { ctx in
            let made = try ctx.makeVerifiedCredential(
                "lbk",
                rpId: "lbk.fidosim.test",
                discoverable: true,
                extensions: ["largeBlobKey": true]
            )
            guard let key = made.map[5]?.bytesValue, key.count == 32 else {
                throw CheckFailure("largeBlobKey (0x05) of 32 bytes in the makeCredential answer")
            }
            let assertion = try ctx.getAssertion(
                rpId: "lbk.fidosim.test",
                allow: [made.credential.id],
                extensions: ["largeBlobKey": true]
            )
            let result = try ctx.verifiedAssertion(
                assertion.response,
                rpId: "lbk.fidosim.test",
                clientDataHash: assertion.clientDataHash,
                from: [made.credential]
            )
            try ctx.require(result.map[7]?.bytesValue == key, "largeBlobKey (0x07) of the assertion is the same key")
        },
        ConformanceCheck(
            "extensions.min-pin-length",
            .extensions,
            "CTAP 2.1 §12.4",
            "minPinLength is accepted; its output, when given, is the minimum PIN length",
            requires: [.extension("minPinLength")]
        ) { ctx in
            let made = try ctx.makeVerifiedCredential("minpin", extensions: ["minPinLength": true])
            if let output = made.authData.extensions?["minPinLength"] {
                try ctx.require(
                    output.intValue == ctx.info.minPINLength ?? 4,
                    "the output is getInfo's minPINLength",
                    actual: "\(output)"
                )
            }
        },
        ConformanceCheck(
            "extensions.pin-complexity-policy",
            .extensions,
            "CTAP 2.3 §12 (pinComplexityPolicy)",
            "pinComplexityPolicy is accepted; its output, when given, is getInfo's pinComplexityPolicy",
            requires: [.extension("pinComplexityPolicy")]
        ) { ctx in
            let made = try ctx.makeVerifiedCredential("pin-policy", extensions: ["pinComplexityPolicy": true])
            if let output = made.authData.extensions?["pinComplexityPolicy"] {
                try ctx.require(
                    output.boolValue != nil && output.boolValue == ctx.info.raw[0x1B]?.boolValue,
                    "the output is a boolean, getInfo's pinComplexityPolicy (0x1B)",
                    actual: "\(output)"
                )
            }
        },
        ConformanceCheck(
            "extensions.third-party-payment",
            .extensions,
            "CTAP 2.2 §12.9",
            "thirdPartyPayment is recorded at makeCredential and reported at getAssertion",
            requires: [.extension("thirdPartyPayment")]
        ) { ctx in
            let made = try ctx.makeVerifiedCredential("payment", extensions: ["thirdPartyPayment": true])
            try ctx.require(made.authData.extensions?["thirdPartyPayment"] == true, "the makeCredential output is true")
            let assertion = try ctx.getAssertion(allow: [made.credential.id], extensions: ["thirdPartyPayment": true])
            let result = try ctx.verifiedAssertion(
                assertion.response,
                clientDataHash: assertion.clientDataHash,
                from: [made.credential]
            )
            try ctx.require(result.authData.extensions?["thirdPartyPayment"] == true, "the getAssertion output is true")
        },
    ]
}
