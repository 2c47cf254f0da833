import CTAPCBOR
import Conformance
import ControlProtocol
import FIDOClient

/// `fidosim profile capture --allow-destructive`: what a key does where a PIN or a reset is needed
/// (firmware-spec/profiles.md, "What --allow-destructive adds"). The key is reset (after a power cycle, as the
/// operator does it), given a PIN, made to block it, filled with discoverable credentials, and reset again at the
/// end: it is left blank.
///
/// Every answer recorded is a status byte, a count, the members of a map or an answer that holds nothing random,
/// so that two keys that behave alike give equal records.
final class DestructiveCapture {
    let ctx: ConformanceContext
    /// How many discoverable credentials the capacity probe makes at most.
    let capacityLimit: Int
    /// How many discoverable credentials this capture made on the key.
    var discoverable = 0

    init(ctx: ConformanceContext, capacityLimit: Int) {
        self.ctx = ctx
        self.capacityLimit = capacityLimit
    }

    static let pin = "31415926"
    static let rpId = "capture.fidosim.test"
    static let capacityRpId = "capacity.fidosim.test"
    /// A user name and a display name longer than the 64 bytes a key may keep (CTAP 2.1 §6.1.2).
    static let longName = String(repeating: "n", count: 80)
    static let longDisplayName = String(repeating: "d", count: 80)
    static let firstUser = Array("first user".utf8)
    static let secondUser = Array("second user".utf8)

    func run() throws -> JSONValue {
        defer { try? ctx.deviceOperator.restore() }
        var out: [String: JSONValue] = [:]
        try ctx.powerCycle()
        let reset = try ResetChecks.reset(ctx)
        guard reset.ok else {
            throw CaptureStopped(
                "authenticatorReset after a power cycle answered \(CTAPStatusCode.describe(reset.status)); the "
                    + "destructive capture starts from a blank key (a touch within the power-up window)"
            )
        }
        out["reset"] = status(reset)
        try ctx.refreshInfo()
        ctx.pin = nil
        ctx.credentials = [:]
        if ctx.info.supportsPIN {
            let version = ctx.pinProtocol
            out["pinUvAuthProtocol"] = .integer(Int64(version))
            out["pin"] = .object(try pinRules(version))
            out["token"] = .object(try tokenRules(version))
        }
        if let management = try credentialManagement() { out["credentialManagement"] = .object(management) }
        out["user"] = try storedUser()
        out["capacity"] = .object(try capacity())
        try ctx.powerCycle()
        out["resetAtEnd"] = status(try ResetChecks.reset(ctx))
        ctx.pin = nil
        try ctx.refreshInfo()
        return .object(out)
    }

    func status(_ response: CTAPResponse) -> JSONValue { .string(Hex.string(response.status)) }

    func client(_ version: Int) -> ClientPIN { ClientPIN(client: ctx.client, version: version) }

    func retries(_ version: Int) throws -> JSONValue {
        let answer = try client(version).retries()
        guard answer.ok, let count = try answer.map()[3]?.intValue else { return status(answer) }
        return .integer(Int64(count))
    }

    /// setPIN's and changePIN's length rules, the retry counter, and the lockout after three wrong PINs in a row
    /// (CTAP 2.1 §6.5.5.5-7, §6.5.2.2). Ends with the key's PIN `Self.pin`, not blocked.
    func pinRules(_ version: Int) throws -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        out["setShort"] = status(try client(version).setPIN("123"))
        out["setLong"] = status(try client(version).setPIN(String(repeating: "7", count: 64)))
        out["set"] = status(try client(version).setPIN(Self.pin))
        out["setAgain"] = status(try client(version).setPIN("27182818"))
        out["retries"] = try retries(version)
        var wrong: [JSONValue] = []
        for _ in 0..<3 { wrong.append(status(try client(version).token(pin: "00000000").response)) }
        out["wrong"] = .array(wrong)
        out["retriesAfterWrong"] = try retries(version)
        out["rightWhileBlocked"] = status(try client(version).token(pin: Self.pin).response)
        try ctx.powerCycle()
        out["rightAfterPowerCycle"] = status(try client(version).token(pin: Self.pin).response)
        out["retriesAfterRight"] = try retries(version)
        out["changeShort"] = status(try client(version).changePIN(from: Self.pin, to: "123"))
        out["changeWrongOld"] = status(try client(version).changePIN(from: "00000000", to: "27182818"))
        out["retriesAfterChange"] = try retries(version)
        ctx.pin = Self.pin
        try ctx.refreshInfo()
        return out
    }

    /// Which clientPIN subcommands exist, whether getPinToken gives one token per power-up, whether a makeCredential
    /// needs a token once a PIN is set, and whether a getPinToken token is spent by its first use.
    func tokenRules(_ version: Int) throws -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        out["unknownSubcommand"] = status(try client(version).request(0x7F))
        var subcommands: [String: JSONValue] = [:]
        for number in [6, 7, 9] { subcommands[String(number)] = status(try client(version).request(number)) }
        out["subcommands"] = .object(subcommands)
        let first = try client(version).token(pin: Self.pin)
        let second = try client(version).token(pin: Self.pin)
        if let a = first.token, let b = second.token {
            out["getPinTokenTwice"] = a == b ? "same" : "different"
        } else {
            out["getPinTokenTwice"] = status(first.token == nil ? first.response : second.response)
        }
        // makeCredential (not discoverable) without pinUvAuthParam on a key with a PIN.
        let hash = randomBytes(32)
        let plain = ctx.makeCredentialParameters(rpId: Self.rpId, userId: randomBytes(16), clientDataHash: hash)
        out["makeCredentialWithoutToken"] = status(
            try ctx.send(CTAPCommand.makeCredential, .map(plain), touch: "makeCredential without a PIN token")
        )
        // The same getPinToken token for two makeCredentials.
        if let token = try client(version).token(pin: Self.pin).token {
            var uses: [JSONValue] = []
            for _ in 0..<2 {
                let hash = randomBytes(32)
                var params = ctx.makeCredentialParameters(
                    rpId: Self.rpId,
                    userId: randomBytes(16),
                    clientDataHash: hash
                )
                params[8] = .byteString(PlatformPinProtocol.authenticate(version: version, key: token, hash))
                params[9] = CBORValue(version)
                uses.append(
                    status(try ctx.send(CTAPCommand.makeCredential, .map(params), touch: "makeCredential with a token"))
                )
            }
            out["sameTokenTwice"] = .array(uses)
        }
        // The preview's credential management with a getPinToken token.
        if ctx.info.versions.contains("FIDO_2_1_PRE"), let token = try client(version).token(pin: Self.pin).token {
            let request: [CBORValue: CBORValue] = [
                1: 1, 3: CBORValue(version),
                4: .byteString(PlatformPinProtocol.authenticate(version: version, key: token, [0x01])),
            ]
            out["previewWithPinToken"] = status(try ctx.send(0x41, .map(request)))
        }
        return out
    }

    /// Credential management's answers on a key without discoverable credentials and with one (0x0A on a FIDO_2_1
    /// key with credMgmt, else the preview's 0x41); nil on a key without it.
    func credentialManagement() throws -> [String: JSONValue]? {
        let command: UInt8
        if ctx.info.versions.contains("FIDO_2_1") && ctx.info.options["credMgmt"] == true {
            command = CTAPCommand.credentialManagement
        } else if ctx.info.options["credentialMgmtPreview"] == true {
            command = 0x41
        } else {
            return nil
        }
        func manage(_ subCommand: Int, _ params: CBORValue? = nil) throws -> CTAPResponse {
            try ManagementChecks.subcommandRequest(
                ctx,
                command: command,
                prefix: [],
                permission: ClientPIN.Permission.credentialManagement,
                subCommand,
                params,
                authenticate: subCommand != 3 && subCommand != 5,
                override: nil
            )
        }
        func whole(_ response: CTAPResponse) -> JSONValue { .string(Hex.string([response.status] + response.body)) }
        var out: [String: JSONValue] = ["command": .integer(Int64(command))]
        out["metadataEmpty"] = whole(try manage(1))
        out["enumerateRPsEmpty"] = whole(try manage(2))
        let made = try makeDiscoverable(rpId: Self.rpId, userId: Self.firstUser)
        out["makeCredential"] = status(made)
        out["metadata"] = whole(try manage(1))
        out["enumerateRPs"] = whole(try manage(2))
        let credentials = try manage(4, .map([1: .byteString(OpenSSLVerifier.sha256(Array(Self.rpId.utf8)))]))
        out["enumerateCredentials"] = status(credentials)
        if credentials.ok {
            let map = try credentials.map()
            out["credentialMembers"] = .array(map.keys.sorted().map { .integer(Int64($0)) })
            if let user = map[6]?.mapValue { out["credentialUser"] = Self.describe(user) }
        }
        return out
    }

    /// A discoverable credential for `rpId` with the long user name and display name (a token for each).
    func makeDiscoverable(rpId: String, userId: [UInt8]) throws -> CTAPResponse {
        let hash = randomBytes(32)
        var params = ctx.makeCredentialParameters(rpId: rpId, userId: userId, clientDataHash: hash, discoverable: true)
        params[3] = .map(
            [
                "id": .byteString(userId), "name": .textString(Self.longName),
                "displayName": .textString(Self.longDisplayName),
            ]
        )
        for (key, value) in try ctx.userVerification(
            permission: ClientPIN.Permission.makeCredential,
            rpId: rpId,
            clientDataHash: hash
        ) {
            params[key] = value
        }
        let answer = try ctx.send(
            CTAPCommand.makeCredential,
            .map(params),
            touch: "makeCredential (discoverable) for \(rpId)"
        )
        if answer.ok { discoverable += 1 }
        return answer
    }

    /// The users a verified getAssertion without an allow list answers for two discoverable credentials of
    /// `Self.rpId`: with more than one, a key without a display returns what it stored of each user (CTAP 2.1
    /// §6.2.2), so this shows whether it keeps the name and display name, and how much of them.
    func storedUser() throws -> JSONValue {
        let managed = ctx.info.options["credMgmt"] == true || ctx.info.options["credentialMgmtPreview"] == true
        // Credential management made the first one.
        for userId in (managed ? [] : [Self.firstUser]) + [Self.secondUser] {
            let made = try makeDiscoverable(rpId: Self.rpId, userId: userId)
            guard made.ok else { return ["makeCredential": status(made)] }
        }
        let hash = randomBytes(32)
        var params: [CBORValue: CBORValue] = [1: .textString(Self.rpId), 2: .byteString(hash)]
        for (key, value) in try ctx.userVerification(
            permission: ClientPIN.Permission.getAssertion,
            rpId: Self.rpId,
            clientDataHash: hash
        ) {
            params[CBORValue(key.intValue == 8 ? 6 : 7)] = value
        }
        let answer = try ctx.send(CTAPCommand.getAssertion, .map(params), touch: "getAssertion for \(Self.rpId)")
        guard answer.ok else { return ["getAssertion": status(answer)] }
        let map = try answer.map()
        var out: [String: JSONValue] = ["getAssertion": "00"]
        out["numberOfCredentials"] = map[5]?.intValue.map { .integer(Int64($0)) } ?? .null
        out["user"] = map[4]?.mapValue.map(Self.describe) ?? .null
        return .object(out)
    }

    /// A user entity as its members and the length in bytes of each text member.
    static func describe(_ user: [CBORValue: CBORValue]) -> JSONValue {
        var out: [String: JSONValue] = [:]
        for (key, value) in user {
            guard let name = key.textValue else { continue }
            out[name] = value.textValue.map { .integer(Int64($0.utf8.count)) } ?? .boolean(true)
        }
        return .object(out)
    }

    /// Discoverable credentials made until the key refuses one (or `capacityLimit` are made): how many, and the
    /// status of the one refused, beside those made before (`existing`).
    func capacity() throws -> [String: JSONValue] {
        let existing = discoverable
        var made = 0
        var last: CTAPResponse?
        while made < capacityLimit {
            var userId = Array("user".utf8)
            withUnsafeBytes(of: UInt32(made).bigEndian) { userId += $0 }
            let answer = try makeDiscoverable(rpId: Self.capacityRpId, userId: userId)
            guard answer.ok else {
                last = answer
                break
            }
            made += 1
        }
        var out: [String: JSONValue] = [
            "limit": .integer(Int64(capacityLimit)), "made": .integer(Int64(made)),
            "existing": .integer(Int64(existing)),
        ]
        if let last { out["refused"] = status(last) }
        try ctx.refreshInfo()
        if let remaining = ctx.info.raw[0x14]?.intValue {
            out["remainingAfter"] = .integer(Int64(remaining))
        }
        return out
    }
}

/// Why a destructive capture stopped before it could record anything.
package struct CaptureStopped: Error, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}
