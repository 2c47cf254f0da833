import CTAPCBOR
import FIDOClient

/// Where CTAP versions differ, checked against the version the key claims, and where the specification leaves a
/// choice, observed (firmware-spec/commands.md, "Where the specification leaves a choice"; conformance.md).
enum ChoiceChecks {
    /// Whether the key claims CTAP 2.1 (else its 2.0 or 2.1 preview rules apply).
    static func claims21(_ ctx: ConformanceContext) -> Bool { ctx.info.versions.contains("FIDO_2_1") }
    /// Whether the key claims nothing after CTAP 2.0.
    static func only20(_ ctx: ConformanceContext) -> Bool {
        !ctx.info.versions.contains("FIDO_2_1") && !ctx.info.versions.contains("FIDO_2_1_PRE")
    }

    /// In the makeCredential group.
    static let makeCredential: [ConformanceCheck] = [
        ConformanceCheck(
            "make-credential.up-option",
            .makeCredential,
            "CTAP 2.1 §6.1.2 step 5; CTAP 2.0 §5.1",
            "up: true in makeCredential is accepted (CTAP 2.0: not an option of makeCredential, CTAP2_ERR_INVALID_OPTION)"
        ) { ctx in
            var params = ctx.makeCredentialParameters(userId: randomBytes(16), clientDataHash: randomBytes(32))
            params[7] = ["up": true]
            if only20(ctx) {
                try ctx.expect(
                    try ctx.send(CTAPCommand.makeCredential, .map(params)),
                    CTAPStatusCode.invalidOption,
                    "up: true on a CTAP 2.0 key"
                )
                return
            }
            guard !ctx.makeCredentialNeedsUV(discoverable: false) else {
                throw CheckSkip("a credential needs user verification on this key")
            }
            try ctx.expectOK(
                try ctx.send(CTAPCommand.makeCredential, .map(params), touch: "make a credential"),
                "up: true"
            )
        }
    ]

    /// In the getAssertion group.
    static let getAssertion: [ConformanceCheck] = [
        ConformanceCheck(
            "get-assertion.rk-option",
            .getAssertion,
            "CTAP 2.1 §6.2.2 step 5; CTAP 2.0 §5.2",
            "rk in getAssertion gets CTAP2_ERR_UNSUPPORTED_OPTION (CTAP 2.0: CTAP2_ERR_INVALID_OPTION)"
        ) { ctx in
            let params: [CBORValue: CBORValue] = [
                1: .textString(ConformanceContext.rpId), 2: .byteString(randomBytes(32)), 5: ["rk": true],
            ]
            let expected = only20(ctx) ? CTAPStatusCode.invalidOption : CTAPStatusCode.unsupportedOption
            try ctx.expect(try ctx.send(CTAPCommand.getAssertion, .map(params)), expected, "rk: true")
        }
    ]

    /// In the clientPIN group (after client-pin.set, so that the runner knows the PIN).
    static let clientPIN: [ConformanceCheck] = [
        ConformanceCheck(
            "client-pin.make-credential-without-token",
            .clientPIN,
            "CTAP 2.1 §6.1.2 step 8; CTAP 2.0 §5.1",
            "with a PIN, a non-discoverable credential without a token: made when makeCredUvNotRqd is true, else CTAP2_ERR_PUAT_REQUIRED (CTAP 2.0's PIN_REQUIRED)",
            requires: [.knownPIN]
        ) { ctx in
            let params = ctx.makeCredentialParameters(userId: randomBytes(16), clientDataHash: randomBytes(32))
            if claims21(ctx) && ctx.info.options["makeCredUvNotRqd"] == true && ctx.info.options["alwaysUv"] != true {
                try ctx.expectOK(
                    try ctx.send(CTAPCommand.makeCredential, .map(params), touch: "make a credential"),
                    "no pinUvAuthParam"
                )
            } else {
                try ctx.expect(
                    try ctx.send(CTAPCommand.makeCredential, .map(params)),
                    CTAPStatusCode.puatRequired,
                    "no pinUvAuthParam"
                )
            }
        },
        ConformanceCheck(
            "client-pin.unknown-subcommand",
            .clientPIN,
            "CTAP 2.1 §6.5.5",
            "an unknown clientPIN subcommand gets CTAP2_ERR_INVALID_SUBCOMMAND (before CTAP 2.1: an error the key chooses)",
            requires: [.option("clientPin")]
        ) { ctx in
            let response = try PINChecks.pinClient(ctx).request(0x0F)
            if claims21(ctx) {
                try ctx.expect(response, CTAPStatusCode.invalidSubcommand, "subcommand 0x0F")
            } else {
                try ctx.require(!response.ok, "an error for subcommand 0x0F", actual: "CTAP2_OK")
                ctx.observe("an unknown clientPIN subcommand: \(CTAPStatusCode.describe(response.status))")
            }
        },
        ConformanceCheck(
            "client-pin.get-pin-token-twice",
            .clientPIN,
            "CTAP 2.1 §6.5.5.7.1; CTAP 2.0 §5.5.4",
            "two getPinToken give two tokens (CTAP 2.0: the one token of this power-up, twice)",
            requires: [.knownPIN]
        ) { ctx in
            guard let pin = ctx.pin else { throw CheckSkip("no known PIN") }
            let client = PINChecks.pinClient(ctx, 1)
            let first = try client.token(pin: pin)
            try ctx.expectOK(first.response, "getPinToken")
            let second = try client.token(pin: pin)
            try ctx.expectOK(second.response, "getPinToken again")
            let same = first.token == second.token
            if claims21(ctx) {
                try ctx.require(!same, "a new token at each getPinToken", actual: "the same token")
            } else if only20(ctx) {
                try ctx.require(same, "the power-up token again", actual: "a new token")
            } else {
                ctx.observe("getPinToken twice on a FIDO_2_1_PRE key: \(same ? "the same token" : "a new token")")
            }
        },
    ]

    /// In the credentialManagement group.
    static let credentialManagement: [ConformanceCheck] = [
        ConformanceCheck(
            "credential-management.preview-get-pin-token",
            .credentialManagement,
            "CTAP 2.1 §6.13, §6.5.5.7.1",
            "credentialMgmtPreview (0x41) with a getPinToken token: the key's choice; 0x0A refuses it (CTAP2_ERR_PIN_AUTH_INVALID)",
            requires: [.knownPIN, .option("credentialMgmtPreview")]
        ) { ctx in
            guard let pin = ctx.pin else { throw CheckSkip("no known PIN") }
            let version = ctx.info.pinUvAuthProtocols.contains(2) ? 2 : 1
            let (response, token) = try PINChecks.pinClient(ctx, version).token(pin: pin)
            try ctx.expectOK(response, "getPinToken")
            guard let token else { throw CheckFailure("getPinToken gave no token") }
            // getCredsMetadata (0x01), authenticated over its subcommand byte.
            let params: CBORValue = [
                1: 1, 3: CBORValue(version),
                4: .byteString(PlatformPinProtocol.authenticate(version: version, key: token, [0x01])),
            ]
            let preview = try ctx.send(0x41, params)
            try ctx.require(
                preview.ok || preview.status == CTAPStatusCode.pinAuthInvalid,
                "CTAP2_OK or CTAP2_ERR_PIN_AUTH_INVALID",
                actual: CTAPStatusCode.describe(preview.status)
            )
            ctx.observe(
                "0x41 with a getPinToken token: \(preview.ok ? "accepted" : "refused (CTAP2_ERR_PIN_AUTH_INVALID)")"
            )
            if ctx.info.options["credMgmt"] == true {
                try ctx.expect(
                    try ctx.send(CTAPCommand.credentialManagement, params),
                    CTAPStatusCode.pinAuthInvalid,
                    "0x0A with a getPinToken token"
                )
            }
        }
    ]
}
