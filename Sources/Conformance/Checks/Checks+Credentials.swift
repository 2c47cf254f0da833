import CTAPCBOR
import FIDOClient

/// authenticatorMakeCredential (CTAP 2.1 §6.1), authenticatorGetAssertion (§6.2), authenticatorGetNextAssertion
/// (§6.3) and authenticatorSelection (§6.9).
enum CredentialChecks {
    static let rkRpId = "discoverable.fidosim.test"

    /// makeCredential with one parameter removed or replaced; the answer's status.
    static func makeCredential(
        _ ctx: ConformanceContext,
        changing key: Int,
        to value: CBORValue?
    ) throws -> CTAPResponse {
        var params = ctx.makeCredentialParameters(userId: randomBytes(16), clientDataHash: randomBytes(32))
        params[CBORValue(key)] = value
        return try ctx.send(CTAPCommand.makeCredential, .map(params))
    }

    /// The COSE identifiers this client verifies (FIDOClient's COSEPublicKey): the others a key lists are noted.
    static let verifiable: Set<Int> = [-7, -8, -9, -19, -35, -36, -51, -52, -257, -37, -47, -48, -49, -50]

    static let makeCredential: [ConformanceCheck] = [
        ConformanceCheck(
            "make-credential.every-algorithm",
            .makeCredential,
            "CTAP 2.1 §6.1.2, §6.4; RFC 9053, RFC 9864, RFC 9964; WebAuthn §6.5.6",
            "each algorithm getInfo lists makes a credential that keeps that identifier, and its attestation and "
                + "assertion verify"
        ) { ctx in
            guard let listed = ctx.info.algorithms, !listed.isEmpty else {
                throw CheckSkip("getInfo lists no algorithms (CTAP 2.0)")
            }
            for alg in listed where !verifiable.contains(alg) {
                ctx.notes.append(
                    "make-credential.every-algorithm: alg \(alg) is listed but this client cannot verify it"
                )
            }
            for alg in listed where verifiable.contains(alg) {
                let made = try ctx.makeCredential(algorithms: [alg])
                let result = try ctx.madeCredential(
                    made.response,
                    clientDataHash: made.clientDataHash,
                    userId: made.userId,
                    discoverable: false
                )
                try ctx.require(
                    result.credential.publicKey.algorithm == alg,
                    "the credential key keeps the identifier asked for",
                    expected: "\(alg)",
                    actual: "\(result.credential.publicKey.algorithm)"
                )
                if let limit = ctx.info.maxCredentialIdLength {
                    try ctx.require(
                        result.credential.id.count <= limit,
                        "an alg \(alg) credential ID fits maxCredentialIdLength",
                        actual: "\(result.credential.id.count)"
                    )
                }
                let asked = try ctx.getAssertion(allow: [result.credential.id])
                try ctx.verifiedAssertion(
                    asked.response,
                    clientDataHash: asked.clientDataHash,
                    from: [result.credential]
                )
            }
            if listed.contains(where: { [-48, -49, -50].contains($0) }) {
                ctx.notes.append(
                    "make-credential.every-algorithm: ML-DSA keys and signature sizes checked; the system OpenSSL "
                        + "cannot verify ML-DSA signatures"
                )
            }
        },
        ConformanceCheck(
            "make-credential.es256",
            .makeCredential,
            "CTAP 2.1 §6.1; WebAuthn §6.1, §8.2",
            "an ES256 credential: authenticator data, credential key and attestation verify"
        ) { ctx in
            let made = try ctx.makeVerifiedCredential("basic")
            let format = made.map[1]?.textValue ?? "?"
            let statement = made.map[3]?.mapValue ?? [:]
            let kind = format == "none" ? "none" : (statement["x5c"] != nil ? "basic (x5c verified)" : "self")
            ctx.notes.append("make-credential.es256: attestation format \(format), type \(kind)")
            try ctx.require(
                made.credential.publicKey.algorithm == -7,
                "the credential key is ES256",
                actual: "\(made.credential.publicKey.algorithm)"
            )
            if let limit = ctx.info.maxCredentialIdLength {
                try ctx.require(
                    made.credential.id.count <= limit,
                    "the credential ID fits maxCredentialIdLength",
                    actual: "\(made.credential.id.count)"
                )
            }
        },
        ConformanceCheck(
            "make-credential.algorithm-order",
            .makeCredential,
            "CTAP 2.1 §6.1.2",
            "the first supported algorithm of pubKeyCredParams is used"
        ) { ctx in
            let made = try ctx.makeCredential(algorithms: [-65535, -8, -7])
            let result = try ctx.madeCredential(
                made.response,
                clientDataHash: made.clientDataHash,
                userId: made.userId,
                discoverable: false
            )
            let algorithm = result.credential.publicKey.algorithm
            guard let listed = ctx.info.algorithms else {
                // A getInfo without algorithms (CTAP 2.0) does not say whether the key has EdDSA: either is right.
                try ctx.require([-8, -7].contains(algorithm), "EdDSA or ES256", actual: "\(algorithm)")
                return
            }
            let edDSA = listed.contains(-8)
            try ctx.require(
                algorithm == (edDSA ? -8 : -7),
                "the first algorithm the key lists",
                expected: edDSA ? "-8" : "-7",
                actual: "\(algorithm)"
            )
        },
        ConformanceCheck(
            "make-credential.unsupported-algorithm",
            .makeCredential,
            "CTAP 2.1 §6.1.2",
            "no supported algorithm gets CTAP2_ERR_UNSUPPORTED_ALGORITHM"
        ) { ctx in
            let made = try ctx.makeCredential(algorithms: [-65535])
            try ctx.expect(made.response, CTAPStatusCode.unsupportedAlgorithm, "pubKeyCredParams with alg -65535 only")
        },
        ConformanceCheck(
            "make-credential.missing",
            .makeCredential,
            "CTAP 2.1 §6.1.2",
            "each required parameter left out gets CTAP2_ERR_MISSING_PARAMETER"
        ) { ctx in
            for key in 1...4 {
                try ctx.expect(
                    try makeCredential(ctx, changing: key, to: nil),
                    CTAPStatusCode.missingParameter,
                    "parameter 0x0\(key) left out"
                )
            }
        },
        ConformanceCheck(
            "make-credential.types",
            .makeCredential,
            "CTAP 2.1 §8.2",
            "a parameter of the wrong CBOR type gets CTAP2_ERR_CBOR_UNEXPECTED_TYPE"
        ) { ctx in
            try ctx.expect(
                try makeCredential(ctx, changing: 1, to: "not bytes"),
                CTAPStatusCode.cborUnexpectedType,
                "clientDataHash as text"
            )
            try ctx.expect(
                try makeCredential(ctx, changing: 2, to: .array([])),
                CTAPStatusCode.cborUnexpectedType,
                "rp as an array"
            )
        },
        ConformanceCheck(
            "make-credential.exclude",
            .makeCredential,
            "CTAP 2.1 §6.1.2",
            "a credential of the excludeList gets CTAP2_ERR_CREDENTIAL_EXCLUDED"
        ) { ctx in
            let basic = try ctx.credential("basic")
            let made = try ctx.makeCredential(exclude: [randomBytes(32), basic.id])
            try ctx.expect(made.response, CTAPStatusCode.credentialExcluded, "excludeList holding the RP's credential")
        },
        ConformanceCheck(
            "make-credential.exclude-other-rp",
            .makeCredential,
            "CTAP 2.1 §6.1.2",
            "another RP's credential in the excludeList is not a match"
        ) { ctx in
            let basic = try ctx.credential("basic")
            let made = try ctx.makeCredential(rpId: ConformanceContext.otherRpId, exclude: [basic.id])
            try ctx.madeCredential(
                made.response,
                rpId: ConformanceContext.otherRpId,
                clientDataHash: made.clientDataHash,
                userId: made.userId,
                discoverable: false
            )
        },
        ConformanceCheck(
            "make-credential.up-false",
            .makeCredential,
            "CTAP 2.1 §6.1.2",
            "option up=false gets CTAP2_ERR_INVALID_OPTION"
        ) { ctx in
            var params = ctx.makeCredentialParameters(userId: randomBytes(16), clientDataHash: randomBytes(32))
            params[7] = .map(["up": false])
            try ctx.expect(
                try ctx.send(CTAPCommand.makeCredential, .map(params)),
                CTAPStatusCode.invalidOption,
                "options {up: false}"
            )
        },
        ConformanceCheck(
            "make-credential.pin-protocol",
            .makeCredential,
            "CTAP 2.1 §6.1.2; CTAP 2.0 §5.1",
            "an unsupported pinUvAuthProtocol gets CTAP1_ERR_INVALID_PARAMETER (CTAP 2.0: CTAP2_ERR_PIN_AUTH_INVALID)",
            requires: [.option("clientPin")]
        ) { ctx in
            var params = ctx.makeCredentialParameters(userId: randomBytes(16), clientDataHash: randomBytes(32))
            params[8] = .byteString(randomBytes(32))
            params[9] = 99
            let expected = ChoiceChecks.only20(ctx) ? CTAPStatusCode.pinAuthInvalid : CTAPStatusCode.invalidParameter
            try ctx.expect(try ctx.send(CTAPCommand.makeCredential, .map(params)), expected, "pinUvAuthProtocol 99")
        },
        ConformanceCheck(
            "make-credential.empty-pin-auth",
            .makeCredential,
            "CTAP 2.1 §6.1.2",
            "an empty pinUvAuthParam asks for a touch, then answers PIN_NOT_SET or PIN_INVALID",
            requires: [.option("clientPin"), .version("FIDO_2_1")]
        ) { ctx in
            var params = ctx.makeCredentialParameters(userId: randomBytes(16), clientDataHash: randomBytes(32))
            params[8] = .byteString([])
            params[9] = CBORValue(ctx.pinProtocol)
            let response = try ctx.send(
                CTAPCommand.makeCredential,
                .map(params),
                touch: "makeCredential with an empty pinUvAuthParam"
            )
            try ctx.expect(
                response,
                ctx.info.hasPIN ? CTAPStatusCode.pinInvalid : CTAPStatusCode.pinNotSet,
                "a zero-length pinUvAuthParam"
            )
        },
        ConformanceCheck(
            "make-credential.denied",
            .makeCredential,
            "CTAP 2.1 §6.1.2",
            "a refused touch gets CTAP2_ERR_OPERATION_DENIED",
            requires: [.automaticOperator]
        ) { ctx in
            try ctx.deviceOperator.refuseNextTouch()
            try ctx.expect(try ctx.makeCredential().response, CTAPStatusCode.operationDenied, "the user refuses")
        },
        ConformanceCheck(
            "make-credential.discoverable",
            .makeCredential,
            "CTAP 2.1 §6.1.2",
            "rk=true makes a credential found without an allow list",
            requires: [.destructive]
        ) { ctx in
            let made = try ctx.makeVerifiedCredential("rk1", rpId: rkRpId, discoverable: true)
            let assertion = try ctx.getAssertion(rpId: rkRpId)
            let result = try ctx.verifiedAssertion(
                assertion.response,
                rpId: rkRpId,
                clientDataHash: assertion.clientDataHash,
                from: [made.credential]
            )
            try ctx.require(
                result.map[4]?.mapValue?[.textString("id")]?.bytesValue == made.credential.userId,
                "the user ID comes back (0x04)",
                expected: Hex.string(made.credential.userId),
                actual: "\(result.map[4] ?? .null)"
            )
        },
    ]

    static let getAssertion: [ConformanceCheck] = [
        ConformanceCheck(
            "get-assertion.allow-list",
            .getAssertion,
            "CTAP 2.1 §6.2; WebAuthn §6.1",
            "an assertion over an allow list verifies with the credential key"
        ) { ctx in
            let basic = try ctx.credential("basic")
            let assertion = try ctx.getAssertion(allow: [randomBytes(48), basic.id])
            let result = try ctx.verifiedAssertion(
                assertion.response,
                clientDataHash: assertion.clientDataHash,
                from: [basic]
            )
            try ctx.require(result.authData.userPresent, "the UP flag is set")
        },
        ConformanceCheck(
            "get-assertion.counter",
            .getAssertion,
            "WebAuthn §6.1.1",
            "the signature counter increases from one assertion to the next"
        ) { ctx in
            let basic = try ctx.credential("basic")
            var counts: [UInt32] = []
            for _ in 0..<2 {
                let assertion = try ctx.getAssertion(allow: [basic.id])
                counts.append(
                    try ctx.verifiedAssertion(
                        assertion.response,
                        clientDataHash: assertion.clientDataHash,
                        from: [basic]
                    ).authData.signCount
                )
            }
            try ctx.require(
                counts[1] > counts[0] || counts == [0, 0],
                "a larger counter each time (or always 0)",
                actual: "\(counts)"
            )
        },
        ConformanceCheck(
            "get-assertion.up-false",
            .getAssertion,
            "CTAP 2.1 §6.2.2",
            "up=false signs without a touch, UP flag clear"
        ) { ctx in
            let basic = try ctx.credential("basic")
            let assertion = try ctx.getAssertion(allow: [basic.id], up: false)
            let result = try ctx.verifiedAssertion(
                assertion.response,
                clientDataHash: assertion.clientDataHash,
                from: [basic]
            )
            try ctx.require(
                !result.authData.userPresent,
                "the UP flag is clear",
                actual: "flags 0x\(Hex.string(result.authData.flags))"
            )
        },
        ConformanceCheck(
            "get-assertion.unknown",
            .getAssertion,
            "CTAP 2.1 §6.2.2",
            "an allow list of unknown credentials gets CTAP2_ERR_NO_CREDENTIALS"
        ) { ctx in
            try ctx.expect(
                try ctx.getAssertion(allow: [randomBytes(64), randomBytes(16)]).response,
                CTAPStatusCode.noCredentials,
                "random credential IDs"
            )
        },
        ConformanceCheck(
            "get-assertion.other-rp",
            .getAssertion,
            "CTAP 2.1 §6.2.2",
            "a credential asked for under another RP ID gets CTAP2_ERR_NO_CREDENTIALS"
        ) { ctx in
            let basic = try ctx.credential("basic")
            try ctx.expect(
                try ctx.getAssertion(rpId: ConformanceContext.otherRpId, allow: [basic.id]).response,
                CTAPStatusCode.noCredentials,
                "another RP"
            )
        },
        ConformanceCheck(
            "get-assertion.missing",
            .getAssertion,
            "CTAP 2.1 §6.2.2",
            "rpId or clientDataHash left out gets CTAP2_ERR_MISSING_PARAMETER"
        ) { ctx in
            try ctx.expect(
                try ctx.send(CTAPCommand.getAssertion, .map([2: .byteString(randomBytes(32))])),
                CTAPStatusCode.missingParameter,
                "no rpId"
            )
            try ctx.expect(
                try ctx.send(CTAPCommand.getAssertion, .map([1: .textString(ConformanceContext.rpId)])),
                CTAPStatusCode.missingParameter,
                "no clientDataHash"
            )
        },
        ConformanceCheck(
            "get-assertion.no-discoverable",
            .getAssertion,
            "CTAP 2.1 §6.2.2",
            "no allow list and no discoverable credential gets CTAP2_ERR_NO_CREDENTIALS"
        ) { ctx in
            try ctx.expect(
                try ctx.getAssertion(rpId: "nobody.fidosim.test").response,
                CTAPStatusCode.noCredentials,
                "an RP with no discoverable credential"
            )
        },
        ConformanceCheck(
            "get-assertion.next-without",
            .getAssertion,
            "CTAP 2.1 §6.3",
            "getNextAssertion with no assertion under way gets CTAP2_ERR_NOT_ALLOWED"
        ) { ctx in
            _ = try ctx.client.getInfo()
            try ctx.expect(
                try ctx.send(CTAPCommand.getNextAssertion, nil),
                CTAPStatusCode.notAllowed,
                "getNextAssertion after getInfo"
            )
        },
        ConformanceCheck(
            "get-assertion.next",
            .getAssertion,
            "CTAP 2.1 §6.2.2, §6.3",
            "two discoverable credentials: numberOfCredentials 2, getNextAssertion gives the other, then NOT_ALLOWED",
            requires: [.destructive]
        ) { ctx in
            let rpId = "two.fidosim.test"
            let first = try ctx.makeVerifiedCredential("two-1", rpId: rpId, discoverable: true).credential
            let second = try ctx.makeVerifiedCredential("two-2", rpId: rpId, discoverable: true).credential
            let clientDataHash = randomBytes(32)
            let assertion = try ctx.getAssertion(rpId: rpId, clientDataHash: clientDataHash)
            let a = try ctx.verifiedAssertion(
                assertion.response,
                rpId: rpId,
                clientDataHash: clientDataHash,
                from: [first, second]
            )
            try ctx.require(a.map[5]?.intValue == 2, "numberOfCredentials (0x05) is 2", actual: "\(a.map[5] ?? .null)")
            let next = try ctx.send(CTAPCommand.getNextAssertion, nil)
            let b = try ctx.verifiedAssertion(next, rpId: rpId, clientDataHash: clientDataHash, from: [first, second])
            try ctx.require(a.credential.id != b.credential.id, "the next assertion is the other credential")
            try ctx.require(
                a.credential.id == second.id,
                "the most recently made credential comes first",
                expected: Hex.string(second.id.prefix(8)),
                actual: Hex.string(a.credential.id.prefix(8))
            )
            try ctx.expect(
                try ctx.send(CTAPCommand.getNextAssertion, nil),
                CTAPStatusCode.notAllowed,
                "a third getNextAssertion"
            )
        },
        ConformanceCheck(
            "get-assertion.denied",
            .getAssertion,
            "CTAP 2.1 §6.2.2",
            "a refused touch gets CTAP2_ERR_OPERATION_DENIED",
            requires: [.automaticOperator]
        ) { ctx in
            let basic = try ctx.credential("basic")
            try ctx.deviceOperator.refuseNextTouch()
            try ctx.expect(
                try ctx.getAssertion(allow: [basic.id]).response,
                CTAPStatusCode.operationDenied,
                "the user refuses"
            )
        },
    ]

    static let selection: [ConformanceCheck] = [
        ConformanceCheck(
            "selection.touch",
            .selection,
            "CTAP 2.1 §6.9",
            "authenticatorSelection answers CTAP2_OK after a touch",
            requires: [.version("FIDO_2_1")]
        ) { ctx in
            try ctx.expectOK(try ctx.send(CTAPCommand.selection, nil, touch: "authenticatorSelection"), "selection")
        },
        ConformanceCheck(
            "selection.denied",
            .selection,
            "CTAP 2.1 §6.9",
            "a refused touch gets CTAP2_ERR_OPERATION_DENIED",
            requires: [.version("FIDO_2_1"), .automaticOperator]
        ) { ctx in
            try ctx.deviceOperator.refuseNextTouch()
            try ctx.expect(try ctx.send(CTAPCommand.selection, nil), CTAPStatusCode.operationDenied, "the user refuses")
        },
    ]
}
