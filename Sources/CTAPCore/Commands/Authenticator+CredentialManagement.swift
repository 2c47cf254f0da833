import CTAPCBOR
import Crypto

/// Subcommands of authenticatorCredentialManagement (CTAP 2.1 §6.8).
enum CredentialManagementSubcommand: Int {
    case getCredsMetadata = 0x01
    case enumerateRPsBegin = 0x02
    case enumerateRPsGetNextRP = 0x03
    case enumerateCredentialsBegin = 0x04
    case enumerateCredentialsGetNextCredential = 0x05
    case deleteCredential = 0x06
    case updateUserInformation = 0x07
}

/// What credential management remembers between a Begin and its GetNext subcommands.
enum CredentialEnumeration: Sendable {
    case relyingParties(ArraySlice<(rpId: String, rpIdHash: [UInt8])>)
    case credentials(ArraySlice<ResidentCredential>)
}

extension Authenticator {
    /// authenticatorCredentialManagement (0x0A) and its preview command (0x41), which behaves the same.
    ///
    /// `raw` is the CBOR parameter map as received: pinUvAuthParam authenticates the subCommandParams bytes,
    /// so the request must be canonical CBOR for the re-encoded parameters to match what the platform signed.
    /// `preview`: the request came as 0x41, which takes a getPinToken token where the profile says so.
    mutating func credentialManagement(
        _ raw: ArraySlice<UInt8>,
        preview: Bool,
        now: Duration
    ) throws(CTAPError) -> AuthenticatorOutcome {
        let params = try RequestParameters(cbor: raw)
        guard let number = try params.int(0x01, "subCommand") else {
            throw CTAPError(.missingParameter, "subCommand missing")
        }
        let subParams = try params.subMap(0x02, "subCommandParams")
        let pinUvAuthParam = try params.bytes(0x04, "pinUvAuthParam")
        let protocolNumber = try params.int(0x03, "pinUvAuthProtocol")
        guard let subcommand = CredentialManagementSubcommand(rawValue: number) else {
            credentialEnumeration = nil
            throw CTAPError(.invalidSubcommand, "unknown credential management subcommand \(number)")
        }
        let emptySuccess =
            configuration.profile.behaviour.credentialManagementWhenEmpty == .emptySuccess
            && storage.discoverableCount == 0 && subcommand != .getCredsMetadata
        let next: Set<CredentialManagementSubcommand> = [
            .enumerateRPsGetNextRP, .enumerateCredentialsGetNextCredential,
        ]
        if emptySuccess && next.contains(subcommand) {
            credentialEnumeration = nil
            return .response([CTAPStatus.ok.rawValue])
        }
        switch subcommand {
        case .enumerateRPsGetNextRP:
            return .response(Self.success(.map(try nextRelyingParty())))
        case .enumerateCredentialsGetNextCredential:
            return .response(Self.success(.map(try nextCredential())))
        default:
            break
        }
        credentialEnumeration = nil
        guard CBORDecoder.isCanonical(raw) else {
            throw CTAPError(.invalidCBOR, "credential management parameters are not canonical CBOR")
        }
        // Every other subcommand needs a token with the cm permission that authenticates subCommand | params.
        guard isProtectedByUV else { throw CTAPError(.pinNotSet, "credential management needs a PIN") }
        let (param, proto) = try requireAuthParameters(pinUvAuthParam, protocolNumber)
        let message = [UInt8(number)] + (subParams.map { CBORValue.map($0).encoded() } ?? [])
        let readOnly: Set<CredentialManagementSubcommand> = [
            .getCredsMetadata, .enumerateRPsBegin, .enumerateCredentialsBegin,
        ]
        let boundRP: String?
        if readOnly.contains(subcommand), let persistent = storage.persistentToken,
            proto.verify(key: persistent, message: message, signature: param)
        {
            // The persistent token (pcmr): reading, never changing, and for every RP.
            boundRP = nil
        } else {
            try verifyToken(param, proto: proto, message: message, now: now)
            // FIDO_2_1_PRE platforms authorise 0x41 with a getPinToken token, which has no cm permission.
            let previewToken = preview && previewAcceptsGetPinToken && pinUv.token.fromGetPinToken
            guard previewToken || pinUv.token.authorises(.credentialManagement) else {
                throw CTAPError(.pinAuthInvalid, "the pinUvAuthToken lacks the cm permission")
            }
            boundRP = previewToken ? nil : pinUv.token.rpId
        }
        // A profile's key with nothing stored answers success with no data (solo 1).
        if emptySuccess { return .response([CTAPStatus.ok.rawValue]) }

        switch subcommand {
        case .getCredsMetadata:
            if boundRP != nil { throw CTAPError(.pinAuthInvalid, "the token is bound to an RP") }
            return .response(
                Self.success([
                    0x01: CBORValue(storage.discoverableCount),
                    0x02: CBORValue(remainingDiscoverableCredentials),
                ])
            )
        case .enumerateRPsBegin:
            if boundRP != nil { throw CTAPError(.pinAuthInvalid, "the token is bound to an RP") }
            var seen: Set<String> = []
            let rps = storage.residentCredentials
                .filter(\.discoverable)
                .sorted { $0.creationSerial < $1.creationSerial }
                .filter { seen.insert($0.rpId).inserted }
                .map { (rpId: $0.rpId, rpIdHash: $0.rpIdHash) }
            guard !rps.isEmpty else { throw CTAPError(.noCredentials, "no discoverable credentials") }
            credentialEnumeration = .relyingParties(rps[...])
            var response = try nextRelyingParty()
            response[0x05] = CBORValue(rps.count)
            return .response(Self.success(.map(response)))
        case .enumerateCredentialsBegin:
            guard let hash = try subParams?.bytesMember(0x01, "rpIDHash") else {
                throw CTAPError(.missingParameter, "rpIDHash missing")
            }
            if let boundRP, Array(SHA256.hash(data: Array(boundRP.utf8))) != hash {
                throw CTAPError(.pinAuthInvalid, "the token is bound to another RP")
            }
            let credentials = storage.residentCredentials(rpIdHash: hash)
                .filter(\.discoverable)
                .sorted { $0.creationSerial > $1.creationSerial }
            guard !credentials.isEmpty else { throw CTAPError(.noCredentials, "no credentials for this RP") }
            credentialEnumeration = .credentials(credentials[...])
            var response = try nextCredential()
            response[0x09] = CBORValue(credentials.count)
            return .response(Self.success(.map(response)))
        case .deleteCredential:
            let credential = try managedCredential(subParams, boundRP: boundRP)
            try storage.deleteResident(id: credential.id)
            return .response([CTAPStatus.ok.rawValue])
        case .updateUserInformation:
            var credential = try managedCredential(subParams, boundRP: boundRP)
            guard let userMap = try subParams?.mapMember(0x03, "user") else {
                throw CTAPError(.missingParameter, "user missing")
            }
            guard let userId = try userMap.optionalBytes("id") else {
                throw CTAPError(.missingParameter, "user.id missing")
            }
            guard userId == credential.user.id else {
                throw CTAPError(.invalidParameter, "user.id differs from the credential's")
            }
            // Absent or empty fields are removed (CTAP 2.1 §6.8.7).
            func field(_ name: String) throws(CTAPError) -> String? {
                guard let text = try userMap.optionalText(name), !text.isEmpty else { return nil }
                return text
            }
            credential.user.name = try field("name")
            credential.user.displayName = try field("displayName")
            try storage.storeResident(credential)
            return .response([CTAPStatus.ok.rawValue])
        case .enumerateRPsGetNextRP, .enumerateCredentialsGetNextCredential:
            return .response([CTAPStatus.other.rawValue])  // handled above
        }
    }

    /// The stored credential named by subCommandParams' credentialID, allowed for the token's RP.
    func managedCredential(
        _ subParams: [CBORValue: CBORValue]?,
        boundRP: String?
    ) throws(CTAPError) -> ResidentCredential {
        guard let descriptor = try subParams?.mapMember(0x02, "credentialID") else {
            throw CTAPError(.missingParameter, "credentialID missing")
        }
        guard let id = try descriptor.optionalBytes("id") else {
            throw CTAPError(.missingParameter, "credentialID.id missing")
        }
        _ = try descriptor.optionalText("type")
        guard let credential = storage.residentCredential(id: id) else {
            throw CTAPError(.noCredentials, "no such discoverable credential")
        }
        if let boundRP, boundRP != credential.rpId {
            throw CTAPError(.pinAuthInvalid, "the token is bound to another RP")
        }
        return credential
    }

    /// The next relying party of an enumeration: `{3: rp, 4: rpIDHash}`.
    mutating func nextRelyingParty() throws(CTAPError) -> [CBORValue: CBORValue] {
        guard case .relyingParties(var rest) = credentialEnumeration, let rp = rest.popFirst() else {
            credentialEnumeration = nil
            throw CTAPError(.notAllowed, "no relying party enumeration to continue")
        }
        credentialEnumeration = rest.isEmpty ? nil : .relyingParties(rest)
        return [0x03: ["id": .textString(rp.rpId)], 0x04: .byteString(rp.rpIdHash)]
    }

    /// The next credential of an enumeration: user, credential id, public key, credProtect, largeBlobKey.
    mutating func nextCredential() throws(CTAPError) -> [CBORValue: CBORValue] {
        guard case .credentials(var rest) = credentialEnumeration, let credential = rest.popFirst() else {
            credentialEnumeration = nil
            throw CTAPError(.notAllowed, "no credential enumeration to continue")
        }
        credentialEnumeration = rest.isEmpty ? nil : .credentials(rest)
        var user: [CBORValue: CBORValue] = ["id": .byteString(credential.user.id)]
        if let name = credential.user.name { user["name"] = .textString(name) }
        if let displayName = credential.user.displayName { user["displayName"] = .textString(displayName) }
        if let icon = credential.user.icon { user["icon"] = .textString(icon) }
        var response: [CBORValue: CBORValue] = [
            0x06: .map(user),
            0x07: ["id": .byteString(credential.id), "type": "public-key"],
            0x08: try Self.publicKey(of: credential.privateKey, algorithm: credential.algorithm),
            0x0A: CBORValue(Int(credential.credProtect.rawValue)),
        ]
        if let key = credential.largeBlobKey { response[0x0B] = .byteString(key) }
        response[0x0C] = .boolean(credential.thirdPartyPayment)
        return response
    }
}

extension Dictionary where Key == CBORValue, Value == CBORValue {
    /// An integer-keyed member that must be a byte string if present.
    func bytesMember(_ key: Int, _ name: String) throws(CTAPError) -> [UInt8]? {
        guard let v = self[CBORValue(key)] else { return nil }
        guard let b = v.bytesValue else { throw CTAPError(.cborUnexpectedType, "\(name) is not a byte string") }
        return b
    }

    /// An integer-keyed member that must be a map if present.
    func mapMember(_ key: Int, _ name: String) throws(CTAPError) -> [CBORValue: CBORValue]? {
        guard let v = self[CBORValue(key)] else { return nil }
        guard let m = v.mapValue else { throw CTAPError(.cborUnexpectedType, "\(name) is not a map") }
        return m
    }
}
