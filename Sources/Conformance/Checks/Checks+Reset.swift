import CTAPCBOR
package import FIDOClient

/// authenticatorReset (CTAP 2.1 §6.6) and PIN lockout (§6.5.2.2), the checks that erase.
package enum ResetChecks {
    package static func reset(_ ctx: ConformanceContext) throws -> CTAPResponse {
        try ctx.send(CTAPCommand.reset, nil, touch: "authenticatorReset (erases the key)")
    }

    /// Power cycle and reset: the key as it left the factory.
    static let blankStart = ConformanceCheck(
        "reset.blank-start",
        .reset,
        "CTAP 2.1 §6.6",
        "a power cycle and a reset give a blank key to start from",
        requires: [.destructive]
    ) { ctx in
        try ctx.powerCycle()
        try ctx.expectOK(try reset(ctx), "authenticatorReset")
        ctx.pin = nil
        ctx.credentials = [:]
        try ctx.refreshInfo()
        // A key whose alwaysUv is on from the factory makes no credential without a token (CTAP 2.1 §6.1.2): a PIN
        // is set first, as a platform must, and the run goes on as with --pin.
        if ctx.info.options["alwaysUv"] == true && ctx.info.supportsPIN && !ctx.info.hasPIN {
            let version = ctx.pinProtocol
            try ctx.expectOK(
                try ClientPIN(client: ctx.client, version: version).setPIN(ConformanceContext.firstPIN),
                "setPIN on a key whose alwaysUv is on after a reset"
            )
            ctx.pin = ConformanceContext.firstPIN
            ctx.notes.append("alwaysUv is on after the reset (the key's default): the PIN was set at the start")
            try ctx.refreshInfo()
        }
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "reset.pin-blocked",
            .reset,
            "CTAP 2.1 §6.5.2.2",
            "wrong PINs, with power cycles, end in CTAP2_ERR_PIN_BLOCKED, even for the right PIN",
            requires: [.knownPIN, .destructive]
        ) { ctx in
            var statuses: [UInt8] = []
            for _ in 0..<16 {
                let status = try PINChecks.wrongPIN(ctx)
                statuses.append(status)
                if status == CTAPStatusCode.pinBlocked { break }
                if status == CTAPStatusCode.pinAuthBlocked { try ctx.powerCycle() }
            }
            try ctx.require(
                statuses.last == CTAPStatusCode.pinBlocked,
                "PIN_BLOCKED in the end",
                actual: statuses.map { Hex.string($0) }.joined(separator: " ")
            )
            try ctx.require(
                statuses.filter { $0 == CTAPStatusCode.pinInvalid }.count <= 8,
                "at most 8 tries",
                actual: "\(statuses.count)"
            )
            try ctx.require(try PINChecks.retries(ctx) == 0, "getPINRetries answers 0")
            let right = try PINChecks.pinClient(ctx).token(pin: ctx.pin ?? "").response
            try ctx.expect(right, CTAPStatusCode.pinBlocked, "the right PIN once blocked")
        },
        ConformanceCheck(
            "reset.denied",
            .reset,
            "CTAP 2.1 §6.6",
            "a refused touch gets CTAP2_ERR_OPERATION_DENIED and erases nothing",
            requires: [.destructive, .automaticOperator]
        ) { ctx in
            try ctx.powerCycle()
            try ctx.deviceOperator.refuseNextTouch()
            try ctx.expect(
                try ctx.client.send(CTAPCommand.reset, nil),
                CTAPStatusCode.operationDenied,
                "the user refuses"
            )
            if let basic = ctx.credentials["basic"] {
                let assertion = try ctx.getAssertion(allow: [basic.id], up: false)
                try ctx.verifiedAssertion(assertion.response, clientDataHash: assertion.clientDataHash, from: [basic])
            }
        },
        ConformanceCheck(
            "reset.too-late",
            .reset,
            "CTAP 2.1 §6.6",
            "a reset more than 10 s after power-up gets CTAP2_ERR_NOT_ALLOWED",
            requires: [.destructive]
        ) { ctx in
            let wait = 10_500 - (CTAPHIDClient.nowMs() - ctx.poweredUpAtMs)
            if wait > 0 { sleepMs(Int(wait)) }
            try ctx.expect(
                try ctx.client.send(CTAPCommand.reset, nil),
                CTAPStatusCode.notAllowed,
                "reset 10.5 s after power-up"
            )
        },
        ConformanceCheck(
            "reset.erases",
            .reset,
            "CTAP 2.1 §6.6",
            "a reset erases the PIN and every credential, discoverable or not, U2F too",
            requires: [.destructive]
        ) { ctx in
            try ctx.powerCycle()
            let before = ctx.credentials
            try ctx.expectOK(try reset(ctx), "authenticatorReset")
            ctx.pin = nil
            ctx.credentials = [:]
            try ctx.refreshInfo()
            if ctx.info.supportsPIN { try ctx.require(!ctx.info.hasPIN, "getInfo's clientPin is false") }
            for (name, credential) in before.sorted(by: { $0.key < $1.key }) {
                if name == "u2f" {
                    let answer = try ctx.client.u2f(
                        U2FMessage.apdu(
                            ins: U2FMessage.authenticate,
                            p1: U2FMessage.checkOnly,
                            data: randomBytes(32) + U2FChecks.appId + [UInt8(credential.id.count)] + credential.id
                        )
                    )
                    try U2FChecks.expectWord(answer.status, U2FMessage.wrongData, "the U2F key handle after the reset")
                } else {
                    let response = try ctx.getAssertion(rpId: credential.rpId, allow: [credential.id], up: false)
                        .response
                    try ctx.expect(response, CTAPStatusCode.noCredentials, "credential \(name) after the reset")
                }
            }
        },
    ]
}
