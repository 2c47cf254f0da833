import CTAPCBOR
import FIDOClient

/// U2F checks (FIDO U2F Raw Message Formats v1.2; CTAP 2.1 §11.2.9.1.1 carries them in CTAPHID_MSG).
enum U2FChecks {
    static let appId = OpenSSLVerifier.sha256(Array("https://u2f.fidosim.test".utf8))

    struct Registered {
        var keyHandle: [UInt8]
        var publicKey: COSEPublicKey
    }

    static func register(_ ctx: ConformanceContext) throws -> Registered {
        let challenge = randomBytes(32)
        let answer = try ctx.u2fWithTouch(
            U2FMessage.apdu(ins: U2FMessage.register, p1: 0x03, data: challenge + appId),
            what: "U2F register"
        )
        try expectWord(answer.status, U2FMessage.noError, "U2F_REGISTER")
        let registration = try U2FMessage.Registration(answer.data)
        let certificate = try X509Certificate(der: registration.certificate)
        let signed = [0x00] + appId + challenge + registration.keyHandle + registration.publicKey
        guard
            try OpenSSLVerifier.verify(
                spki: certificate.publicKeySPKI(),
                message: signed,
                signature: registration.signature
            )
        else {
            throw CheckFailure("the registration signature verifies with the attestation certificate's key (OpenSSL)")
        }
        return Registered(
            keyHandle: registration.keyHandle,
            publicKey: try COSEPublicKey(uncompressedP256: registration.publicKey)
        )
    }

    static func registered(_ ctx: ConformanceContext) throws -> Registered {
        if let made = ctx.credentials["u2f"] {
            return Registered(keyHandle: made.id, publicKey: made.publicKey)
        }
        let fresh = try register(ctx)
        ctx.credentials["u2f"] = MadeCredential(
            rpId: "u2f",
            id: fresh.keyHandle,
            publicKey: fresh.publicKey,
            userId: [],
            signCount: 0,
            discoverable: false
        )
        return fresh
    }

    static func expectWord(_ actual: UInt16, _ expected: UInt16, _ what: String) throws {
        guard actual == expected else {
            throw CheckFailure(
                what,
                expected: "SW \(String(expected, radix: 16))",
                actual: "SW \(String(actual, radix: 16))"
            )
        }
    }

    static func authenticate(_ ctx: ConformanceContext, _ key: Registered) throws -> UInt32 {
        let challenge = randomBytes(32)
        let answer = try ctx.u2fWithTouch(
            U2FMessage.apdu(
                ins: U2FMessage.authenticate,
                p1: U2FMessage.enforcePresence,
                data: challenge + appId + [UInt8(key.keyHandle.count)] + key.keyHandle
            ),
            what: "U2F authenticate"
        )
        try expectWord(answer.status, U2FMessage.noError, "U2F_AUTHENTICATE with enforce-user-presence")
        try ctx.require(answer.data.count > 5, "an authentication answer of flags, counter and signature")
        try ctx.require(
            answer.data[0] & 0x01 == 1,
            "the user-presence bit is set",
            actual: "0x\(Hex.string(answer.data[0]))"
        )
        let signed = appId + Array(answer.data[0..<5]) + challenge
        guard try OpenSSLVerifier.verify(spki: key.publicKey.spki, message: signed, signature: Array(answer.data[5...]))
        else {
            throw CheckFailure("the authentication signature verifies with the registered key (OpenSSL)")
        }
        return answer.data[1..<5].reduce(0) { $0 << 8 | UInt32($1) }
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "u2f.version",
            .u2f,
            "U2F Raw Message Formats §6.1",
            "U2F_VERSION answers U2F_V2",
            requires: [.u2fTransport]
        ) { ctx in
            let answer = try ctx.client.u2f(U2FMessage.apdu(ins: U2FMessage.version, data: []))
            try expectWord(answer.status, U2FMessage.noError, "U2F_VERSION")
            try ctx.require(
                answer.data == Array("U2F_V2".utf8),
                "the version string",
                expected: "U2F_V2",
                actual: Hex.string(answer.data)
            )
        },
        ConformanceCheck(
            "u2f.register",
            .u2f,
            "U2F Raw Message Formats §4.1, §4.3",
            "U2F_REGISTER answers a key, a key handle, a certificate and a valid signature",
            requires: [.u2fTransport, .u2fRegistration]
        ) { ctx in
            ctx.credentials["u2f"] = nil
            _ = try registered(ctx)
        },
        ConformanceCheck(
            "u2f.authenticate",
            .u2f,
            "U2F Raw Message Formats §5.1, §5.4",
            "U2F_AUTHENTICATE signs with the registered key and counts up",
            requires: [.u2fTransport, .u2fRegistration]
        ) { ctx in
            let key = try registered(ctx)
            let first = try authenticate(ctx, key)
            let second = try authenticate(ctx, key)
            try ctx.require(second > first, "the counter increases", actual: "\(first) then \(second)")
        },
        ConformanceCheck(
            "u2f.check-only",
            .u2f,
            "U2F Raw Message Formats §5.1",
            "check-only with a valid key handle gets SW_CONDITIONS_NOT_SATISFIED",
            requires: [.u2fTransport, .u2fRegistration]
        ) { ctx in
            let key = try registered(ctx)
            let answer = try ctx.client.u2f(
                U2FMessage.apdu(
                    ins: U2FMessage.authenticate,
                    p1: U2FMessage.checkOnly,
                    data: randomBytes(32) + appId + [UInt8(key.keyHandle.count)] + key.keyHandle
                )
            )
            try expectWord(answer.status, U2FMessage.conditionsNotSatisfied, "check-only on the key's own handle")
        },
        ConformanceCheck(
            "u2f.wrong-application",
            .u2f,
            "U2F Raw Message Formats §5.1",
            "a key handle under another application parameter gets SW_WRONG_DATA",
            requires: [.u2fTransport, .u2fRegistration]
        ) { ctx in
            let key = try registered(ctx)
            let answer = try ctx.client.u2f(
                U2FMessage.apdu(
                    ins: U2FMessage.authenticate,
                    p1: U2FMessage.checkOnly,
                    data: randomBytes(32) + randomBytes(32) + [UInt8(key.keyHandle.count)] + key.keyHandle
                )
            )
            try expectWord(answer.status, U2FMessage.wrongData, "check-only with another application parameter")
        },
        ConformanceCheck(
            "u2f.unknown-key-handle",
            .u2f,
            "U2F Raw Message Formats §5.1",
            "a key handle the key did not make gets SW_WRONG_DATA",
            requires: [.u2fTransport, .u2fRegistration]
        ) { ctx in
            let handle = randomBytes(64)
            let answer = try ctx.client.u2f(
                U2FMessage.apdu(
                    ins: U2FMessage.authenticate,
                    p1: U2FMessage.enforcePresence,
                    data: randomBytes(32) + appId + [UInt8(handle.count)] + handle
                )
            )
            try expectWord(answer.status, U2FMessage.wrongData, "a random key handle")
        },
        ConformanceCheck(
            "u2f.class",
            .u2f,
            "U2F Raw Message Formats §3.3",
            "a class byte other than 0 gets SW_CLA_NOT_SUPPORTED",
            requires: [.u2fTransport]
        ) { ctx in
            let answer = try ctx.client.u2f(U2FMessage.apdu(cla: 0x80, ins: U2FMessage.version, data: []))
            try expectWord(answer.status, U2FMessage.claNotSupported, "CLA 0x80")
        },
        ConformanceCheck(
            "u2f.instruction",
            .u2f,
            "U2F Raw Message Formats §3.3",
            "an unknown instruction gets SW_INS_NOT_SUPPORTED",
            requires: [.u2fTransport]
        ) { ctx in
            let answer = try ctx.client.u2f(U2FMessage.apdu(ins: 0x55, data: []))
            try expectWord(answer.status, U2FMessage.insNotSupported, "INS 0x55")
        },
        ConformanceCheck(
            "u2f.length",
            .u2f,
            "U2F Raw Message Formats §4.1",
            "a registration request that is not 64 bytes gets SW_WRONG_LENGTH",
            requires: [.u2fTransport, .u2fRegistration]
        ) { ctx in
            let answer = try ctx.client.u2f(U2FMessage.apdu(ins: U2FMessage.register, data: randomBytes(63)))
            try expectWord(answer.status, U2FMessage.wrongLength, "63 bytes of registration data")
        },
    ]
}
