import Crypto

/// ISO 7816 status words used by U2F.
package enum U2FStatus: UInt16, Sendable {
    case noError = 0x9000
    case conditionsNotSatisfied = 0x6985
    case wrongData = 0x6A80
    case wrongLength = 0x6700
    case incorrectParameters = 0x6B00
    case insNotSupported = 0x6D00
    case claNotSupported = 0x6E00
    case commandNotAllowed = 0x6986

    package var bytes: [UInt8] { [UInt8(rawValue >> 8), UInt8(rawValue & 0xFF)] }
}

/// A parsed U2F REGISTER request.
struct U2FRegisterRequest: Sendable {
    var challenge: [UInt8]
    var application: [UInt8]
}

/// A parsed U2F AUTHENTICATE request whose key handle opened.
struct U2FAuthenticateRequest: Sendable {
    var challenge: [UInt8]
    var application: [UInt8]
    var keyHandle: [UInt8]
    var privateKey: [UInt8]
}

/// A command APDU in short or extended encoding.
struct APDU {
    var cla: UInt8
    var ins: UInt8
    var p1: UInt8
    var p2: UInt8
    var data: [UInt8]

    /// Parses an APDU; nil means the lengths do not add up (SW_WRONG_LENGTH).
    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 4 else { return nil }
        cla = bytes[0]
        ins = bytes[1]
        p1 = bytes[2]
        p2 = bytes[3]
        let rest = bytes[4...]
        if rest.isEmpty {
            data = []
        } else if rest.first == 0 && rest.count >= 3 {
            // Extended length: 00 Lc1 Lc2 data [Le1 Le2], or 00 Le1 Le2 alone.
            let lc = Int(rest[rest.startIndex + 1]) << 8 | Int(rest[rest.startIndex + 2])
            let body = rest.dropFirst(3)
            if body.isEmpty || (lc == 0 && body.count == 2) {
                data = []  // Le only, or an empty body with Le
            } else {
                guard lc > 0, body.count == lc || body.count == lc + 2 else { return nil }
                data = Array(body.prefix(lc))
            }
        } else if rest.count == 1 {
            data = []  // short Le only
        } else {
            let lc = Int(rest[rest.startIndex])
            let body = rest.dropFirst()
            guard lc > 0, body.count == lc || body.count == lc + 1 else { return nil }
            data = Array(body.prefix(lc))
        }
    }
}

extension Authenticator {
    /// Handles one CTAPHID_MSG message: a U2F (CTAP1) request APDU.
    package mutating func handleU2F(_ message: [UInt8], now: Duration) -> AuthenticatorOutcome {
        lastActivity = nil
        if let canned = configuration.profile.cannedU2FAnswers[message] { return .response(canned) }
        pending = nil
        nextAssertion = nil
        guard let apdu = APDU(message) else { return .response(U2FStatus.wrongLength.bytes) }
        guard apdu.cla == 0 else { return .response(U2FStatus.claNotSupported.bytes) }
        switch apdu.ins {
        // U2F cannot verify the user: with alwaysUv it is switched off (VERSION still answers).
        case 0x01:
            if storage.settings.alwaysUv { return .response(U2FStatus.commandNotAllowed.bytes) }
            return u2fRegister(apdu)
        case 0x02:
            if storage.settings.alwaysUv { return .response(U2FStatus.commandNotAllowed.bytes) }
            return u2fAuthenticate(apdu)
        case 0x03:
            guard apdu.data.isEmpty else { return .response(U2FStatus.wrongLength.bytes) }
            return .response(Array("U2F_V2".utf8) + U2FStatus.noError.bytes)
        default: return .response(U2FStatus.insNotSupported.bytes)
        }
    }

    mutating func u2fRegister(_ apdu: APDU) -> AuthenticatorOutcome {
        guard apdu.data.count == 64 else { return .response(U2FStatus.wrongLength.bytes) }
        let request = U2FRegisterRequest(challenge: Array(apdu.data[0..<32]), application: Array(apdu.data[32..<64]))
        return askPresence(.u2fRegister(request), PresencePrompt(command: "U2F register", protocolKind: .u2f))
    }

    mutating func u2fAuthenticate(_ apdu: APDU) -> AuthenticatorOutcome {
        guard apdu.data.count >= 65 else { return .response(U2FStatus.wrongLength.bytes) }
        let handleLength = Int(apdu.data[64])
        guard apdu.data.count == 65 + handleLength else { return .response(U2FStatus.wrongLength.bytes) }
        let application = Array(apdu.data[32..<64])
        let keyHandle = Array(apdu.data[65...])
        // U2F signs with P-256 and cannot verify the user: other keys, and credentials that require UV, are
        // not usable here.
        guard let found = lookUp(keyHandle, rpIdHash: application), found.algorithm == .es256,
            found.credProtect != .required
        else {
            return .response(U2FStatus.wrongData.bytes)
        }
        let request = U2FAuthenticateRequest(
            challenge: Array(apdu.data[0..<32]),
            application: application,
            keyHandle: keyHandle,
            privateKey: found.privateKey
        )
        switch apdu.p1 {
        case 0x07:  // check-only: a valid handle answers "conditions not satisfied"
            return .response(U2FStatus.conditionsNotSatisfied.bytes)
        case 0x03:  // enforce user presence
            return askPresence(
                .u2fAuthenticate(request),
                PresencePrompt(command: "U2F authenticate", protocolKind: .u2f)
            )
        case 0x08:  // don't enforce user presence
            do {
                return .response(try finishU2FAuthenticate(request, userPresent: false))
            } catch {
                return .response(U2FStatus.wrongData.bytes)
            }
        default:
            return .response(U2FStatus.incorrectParameters.bytes)
        }
    }

    mutating func finishU2FRegister(_ request: U2FRegisterRequest) throws(CTAPError) -> [UInt8] {
        // The key's batch certificate once provisioned, else fidosim's shared batch, else (self attestation) the
        // key's self-signed U2F certificate.
        guard
            let attestation = (storage.batchAttestation ?? configuration.defaultAttestation)
                .map({ (privateKey: $0.privateKey, certificate: $0.certificate) })
                ?? storage.u2fAttestation
        else { throw CTAPError(.other, "no U2F attestation") }
        let key = newPrivateKey()
        var rawKey = Array(key.rawRepresentation)
        defer { rawKey.wipe() }
        let keyHandle = try CredentialID.seal(
            .init(isResident: false, privateKey: rawKey),
            rpIdHash: request.application,
            key: sealingKey,
            nonce: entropy.bytes(12)
        )
        let publicKey = Array(key.publicKey.x963Representation)
        lastActivity = CredentialActivity(rpId: nil, credentialId: keyHandle)
        rememberU2F(keyHandle: keyHandle)
        let signed = [0x00] + request.application + request.challenge + keyHandle + publicKey
        let signature = try signingKeys.key(
            id: SigningKeyCache.u2fAttestationId,
            raw: attestation.privateKey,
            algorithm: .es256
        ).sign(signed)
        return [0x05] + publicKey + [UInt8(keyHandle.count)] + keyHandle + attestation.certificate + signature
            + U2FStatus.noError.bytes
    }

    mutating func finishU2FAuthenticate(
        _ request: U2FAuthenticateRequest,
        userPresent: Bool
    ) throws(CTAPError)
        -> [UInt8]
    {
        let counter = countersRemoved.contains(request.keyHandle) ? 0 : try storage.incrementSignCounter()
        lastActivity = CredentialActivity(rpId: nil, credentialId: request.keyHandle)
        let flags: UInt8 = userPresent ? 0x01 : 0x00
        let counterBytes = AuthenticatorData.bigEndian(counter)
        let signature = try signingKeys.key(id: request.keyHandle, raw: request.privateKey, algorithm: .es256)
            .sign(request.application + [flags] + counterBytes + request.challenge)
        return [flags] + counterBytes + signature + U2FStatus.noError.bytes
    }
}
