import CTAPCBOR
import FIDOClient

/// authenticatorClientPIN checks (CTAP 2.1 §6.5).
enum PINChecks {
    static func pinClient(_ ctx: ConformanceContext, _ version: Int? = nil) -> ClientPIN {
        ClientPIN(client: ctx.client, version: version ?? ctx.pinProtocol)
    }

    static func retries(_ ctx: ConformanceContext) throws -> Int {
        let response = try pinClient(ctx).retries()
        try ctx.expectOK(response, "getPINRetries")
        guard let retries = try response.map()[3]?.intValue else {
            throw CheckFailure("getPINRetries without pinRetries (0x03)")
        }
        return retries
    }

    /// makeCredential authenticated with `token` (pinUvAuthParam over the clientDataHash) in `version`.
    static func makeCredential(
        _ ctx: ConformanceContext,
        token: [UInt8],
        version: Int,
        touch: String? = nil
    ) throws
        -> (response: CTAPResponse, clientDataHash: [UInt8])
    {
        let clientDataHash = randomBytes(32)
        var params = ctx.makeCredentialParameters(userId: randomBytes(16), clientDataHash: clientDataHash)
        params[8] = .byteString(PlatformPinProtocol.authenticate(version: version, key: token, clientDataHash))
        params[9] = CBORValue(version)
        return (try ctx.send(CTAPCommand.makeCredential, .map(params), touch: touch), clientDataHash)
    }

    /// A wrong PIN's token request: its status.
    /// The PIN the wrong-PIN checks send (a key whose PIN it is gets another).
    static let wrongPINText = "00000000-wrong"

    static func wrongPIN(_ ctx: ConformanceContext) throws -> UInt8 {
        try pinClient(ctx).token(pin: ctx.pin == wrongPINText ? wrongPINText + "!" : wrongPINText).response.status
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "client-pin.key-agreement",
            .clientPIN,
            "CTAP 2.1 §6.5.5.4",
            "getKeyAgreement answers a P-256 COSE key with alg -25 in each protocol",
            requires: [.option("clientPin")]
        ) { ctx in
            for version in ctx.info.pinUvAuthProtocols {
                let response = try pinClient(ctx, version).request(2)
                try ctx.expectOK(response, "getKeyAgreement, protocol \(version)")
                guard let key = try response.map()[1] else { throw CheckFailure("no keyAgreement (0x01)") }
                let parsed = try COSEPublicKey(key)
                try ctx.require(
                    parsed.algorithm == -25 && parsed.curve == 1,
                    "an EC2 P-256 key with alg -25",
                    actual: "\(key)"
                )
            }
        },
        ConformanceCheck(
            "client-pin.retries",
            .clientPIN,
            "CTAP 2.1 §6.5.5.2, §6.5.2.2",
            "getPINRetries answers at most 8",
            requires: [.option("clientPin")]
        ) { ctx in
            if !ctx.info.hasPIN {
                // Without a PIN, the count (the text) or CTAP2_ERR_PIN_NOT_SET (YubiKey 5): a choice.
                let response = try pinClient(ctx).retries()
                if response.status == CTAPStatusCode.pinNotSet {
                    ctx.observe("getPINRetries without a PIN: CTAP2_ERR_PIN_NOT_SET (the text gives the count)")
                    return
                }
                ctx.observe("getPINRetries without a PIN: the count")
            }
            let count = try retries(ctx)
            try ctx.require(
                (1...8).contains(count) || (count == 0 && ctx.info.hasPIN),
                "pinRetries from 1 to 8",
                actual: "\(count)"
            )
        },
        ConformanceCheck(
            "client-pin.set-short",
            .clientPIN,
            "CTAP 2.1 §6.5.5.5",
            "a PIN shorter than minPINLength gets CTAP2_ERR_PIN_POLICY_VIOLATION",
            requires: [.option("clientPin"), .destructive]
        ) { ctx in
            guard !ctx.info.hasPIN else { throw CheckSkip("the key already has a PIN") }
            let short = String(repeating: "7", count: max(1, (ctx.info.minPINLength ?? 4) - 1))
            try ctx.expect(
                try pinClient(ctx).setPIN(short),
                CTAPStatusCode.pinPolicyViolation,
                "a PIN of \(short.count) characters"
            )
        },
        ConformanceCheck(
            "client-pin.set",
            .clientPIN,
            "CTAP 2.1 §6.5.5.5",
            "setPIN sets a PIN and getInfo says so",
            requires: [.option("clientPin"), .destructive]
        ) { ctx in
            guard !ctx.info.hasPIN else { throw CheckSkip("the key already has a PIN") }
            try ctx.expectOK(try pinClient(ctx).setPIN(ConformanceContext.firstPIN), "setPIN")
            ctx.pin = ConformanceContext.firstPIN
            try ctx.refreshInfo()
            try ctx.require(ctx.info.hasPIN, "clientPin is true in getInfo")
        },
        ConformanceCheck(
            "client-pin.set-again",
            .clientPIN,
            "CTAP 2.1 §6.5.5.5",
            "setPIN when a PIN is set is refused: CTAP2_ERR_PIN_AUTH_INVALID, or CTAP2_ERR_NOT_ALLOWED (a choice)",
            requires: [.knownPIN]
        ) { ctx in
            // The text says CTAP2_ERR_PIN_AUTH_INVALID; trussed, pico-fido, solo 1 and fido2-tests answer
            // CTAP2_ERR_NOT_ALLOWED (commands.md, "Where the specification leaves a choice").
            let answer = try pinClient(ctx).setPIN(ConformanceContext.secondPIN)
            if answer.status == CTAPStatusCode.notAllowed {
                ctx.observe(
                    "setPIN on a key with a PIN: CTAP2_ERR_NOT_ALLOWED (the text gives CTAP2_ERR_PIN_AUTH_INVALID)"
                )
                return
            }
            try ctx.expect(answer, CTAPStatusCode.pinAuthInvalid, "a second setPIN")
            ctx.observe("setPIN on a key with a PIN: CTAP2_ERR_PIN_AUTH_INVALID")
        },
        ConformanceCheck(
            "client-pin.token",
            .clientPIN,
            "CTAP 2.1 §6.5.5.7, §6.5.6, §6.5.7",
            "a token from each protocol makes a user-verified credential",
            requires: [.knownPIN]
        ) { ctx in
            for version in ctx.info.pinUvAuthProtocols {
                let token = try ctx.token(
                    permissions: ClientPIN.Permission.makeCredential,
                    rpId: ConformanceContext.rpId,
                    version: version
                )
                try ctx.require(
                    version == 2 ? token.count == 32 : (token.count == 16 || token.count == 32),
                    "the token's length",
                    actual: "\(token.count) bytes in protocol \(version)"
                )
                let request = try makeCredential(
                    ctx,
                    token: token,
                    version: version,
                    touch: "makeCredential with a PIN token"
                )
                let made = try ctx.madeCredential(
                    request.response,
                    clientDataHash: request.clientDataHash,
                    userId: [],
                    discoverable: false
                )
                try ctx.require(
                    made.authData.userVerified,
                    "the UV flag is set",
                    actual: "flags 0x\(Hex.string(made.authData.flags))"
                )
            }
        },
        ConformanceCheck(
            "client-pin.wrong",
            .clientPIN,
            "CTAP 2.1 §6.5.5.7",
            "a wrong PIN gets CTAP2_ERR_PIN_INVALID and costs one retry; the right one restores them",
            requires: [.knownPIN, .spendsPINRetries(1)]
        ) { ctx in
            let before = try retries(ctx)
            try ctx.require(try wrongPIN(ctx) == CTAPStatusCode.pinInvalid, "a wrong PIN is PIN_INVALID")
            let after = try retries(ctx)
            try ctx.require(after == before - 1, "one retry fewer", expected: "\(before - 1)", actual: "\(after)")
            _ = try ctx.token(permissions: ClientPIN.Permission.getAssertion, rpId: ConformanceContext.rpId)
            try ctx.require(try retries(ctx) == before, "the right PIN restores the retries", expected: "\(before)")
        },
        ConformanceCheck(
            "client-pin.auth-blocked",
            .clientPIN,
            "CTAP 2.1 §6.5.5.7, §6.5.2.2",
            "three wrong PINs in a row block PIN entry until a power cycle (CTAP2_ERR_PIN_AUTH_BLOCKED)",
            requires: [.knownPIN, .spendsPINRetries(3)]
        ) { ctx in
            let statuses = try (0..<3).map { _ in try wrongPIN(ctx) }
            try ctx.require(
                statuses == [CTAPStatusCode.pinInvalid, CTAPStatusCode.pinInvalid, CTAPStatusCode.pinAuthBlocked],
                "PIN_INVALID, PIN_INVALID, PIN_AUTH_BLOCKED",
                actual: statuses.map { CTAPStatusCode.describe($0) }.joined(separator: ", ")
            )
            try ctx.expect(
                try pinClient(ctx).token(pin: ctx.pin ?? "").response,
                CTAPStatusCode.pinAuthBlocked,
                "the right PIN before a power cycle"
            )
            try ctx.powerCycle()
            _ = try ctx.token(permissions: ClientPIN.Permission.getAssertion, rpId: ConformanceContext.rpId)
        },
        ConformanceCheck(
            "client-pin.change",
            .clientPIN,
            "CTAP 2.1 §6.5.5.6",
            "changePIN replaces the PIN: the old one fails, the new one works (then the old PIN comes back)",
            // An interrupted run would leave the key with the check's PIN instead of its owner's.
            requires: [.knownPIN, .destructive]
        ) { ctx in
            guard let old = ctx.pin else { return }
            let new = old == ConformanceContext.firstPIN ? ConformanceContext.secondPIN : ConformanceContext.firstPIN
            try ctx.expectOK(try pinClient(ctx).changePIN(from: old, to: new), "changePIN")
            ctx.pin = new
            try ctx.require(
                try pinClient(ctx).token(pin: old).response.status == CTAPStatusCode.pinInvalid,
                "the old PIN is PIN_INVALID"
            )
            _ = try ctx.token(permissions: ClientPIN.Permission.getAssertion, rpId: ConformanceContext.rpId)
            // Back to the PIN the key had.
            try ctx.expectOK(try pinClient(ctx).changePIN(from: new, to: old), "changePIN back")
            ctx.pin = old
        },
        ConformanceCheck(
            "client-pin.change-wrong",
            .clientPIN,
            "CTAP 2.1 §6.5.5.6",
            "changePIN with a wrong current PIN gets CTAP2_ERR_PIN_INVALID",
            requires: [.knownPIN, .spendsPINRetries(1)]
        ) { ctx in
            // Wrong for certain: never the key's PIN, so the change can never happen.
            let wrong = ctx.pin == wrongPINText ? wrongPINText + "!" : wrongPINText
            try ctx.expect(
                try pinClient(ctx).changePIN(from: wrong, to: ConformanceContext.secondPIN),
                CTAPStatusCode.pinInvalid,
                "a wrong current PIN"
            )
            _ = try ctx.token(permissions: ClientPIN.Permission.getAssertion, rpId: ConformanceContext.rpId)
        },
        ConformanceCheck(
            "client-pin.required",
            .clientPIN,
            "CTAP 2.1 §6.1.2",
            "a discoverable makeCredential without pinUvAuthParam on a PIN key gets CTAP2_ERR_PUAT_REQUIRED",
            requires: [.knownPIN]
        ) { ctx in
            guard ctx.info.options["uv"] != true else { throw CheckSkip("the key has built-in user verification") }
            var params = ctx.makeCredentialParameters(
                userId: randomBytes(16),
                clientDataHash: randomBytes(32),
                discoverable: true
            )
            params[7] = .map(["rk": true])
            try ctx.expect(
                try ctx.send(CTAPCommand.makeCredential, .map(params)),
                CTAPStatusCode.puatRequired,
                "rk=true without pinUvAuthParam"
            )
        },
        ConformanceCheck(
            "client-pin.bad-param",
            .clientPIN,
            "CTAP 2.1 §6.1.2",
            "a pinUvAuthParam that does not verify gets CTAP2_ERR_PIN_AUTH_INVALID",
            requires: [.knownPIN]
        ) { ctx in
            var params = ctx.makeCredentialParameters(userId: randomBytes(16), clientDataHash: randomBytes(32))
            params[8] = .byteString(randomBytes(ctx.pinProtocol == 2 ? 32 : 16))
            params[9] = CBORValue(ctx.pinProtocol)
            try ctx.expect(
                try ctx.send(CTAPCommand.makeCredential, .map(params)),
                CTAPStatusCode.pinAuthInvalid,
                "a random pinUvAuthParam"
            )
        },
        ConformanceCheck(
            "client-pin.permission",
            .clientPIN,
            "CTAP 2.1 §6.1.2, §6.5.5.7.2",
            "a token without the mc permission gets CTAP2_ERR_PIN_AUTH_INVALID for makeCredential",
            requires: [.knownPIN, .optionTrue("pinUvAuthToken")]
        ) { ctx in
            let token = try ctx.token(permissions: ClientPIN.Permission.getAssertion, rpId: ConformanceContext.rpId)
            try ctx.expect(
                try makeCredential(ctx, token: token, version: ctx.pinProtocol).response,
                CTAPStatusCode.pinAuthInvalid,
                "a ga-only token for makeCredential"
            )
        },
        ConformanceCheck(
            "client-pin.rp-bound",
            .clientPIN,
            "CTAP 2.1 §6.1.2, §6.5.5.7.2",
            "a token bound to one RP ID gets CTAP2_ERR_PIN_AUTH_INVALID for another",
            requires: [.knownPIN, .optionTrue("pinUvAuthToken")]
        ) { ctx in
            let token = try ctx.token(
                permissions: ClientPIN.Permission.makeCredential,
                rpId: ConformanceContext.otherRpId
            )
            try ctx.expect(
                try makeCredential(ctx, token: token, version: ctx.pinProtocol).response,
                CTAPStatusCode.pinAuthInvalid,
                "a token for another RP ID"
            )
        },
        ConformanceCheck(
            "client-pin.no-permissions",
            .clientPIN,
            "CTAP 2.1 §6.5.5.7.2",
            "permissions 0 gets CTAP1_ERR_INVALID_PARAMETER",
            requires: [.knownPIN, .optionTrue("pinUvAuthToken")]
        ) { ctx in
            let result = try pinClient(ctx).token(pin: ctx.pin ?? "", permissions: 0)
            try ctx.expect(result.response, CTAPStatusCode.invalidParameter, "permissions 0")
        },
    ]
}
