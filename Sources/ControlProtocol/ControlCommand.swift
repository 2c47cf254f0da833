/// A structured error of the control protocol: a stable code for programs and a message for people.
package struct ControlError: Error, Equatable, Sendable, CustomStringConvertible {
    package enum Code: String, Sendable, CaseIterable {
        /// The line is not JSON.
        case parseError = "parse-error"
        /// JSON, but not a request object with an id and a command.
        case invalidRequest = "invalid-request"
        /// The command is not one of the protocol's.
        case unknownCommand = "unknown-command"
        /// A parameter is missing, unknown, of the wrong type or out of range.
        case invalidParams = "invalid-params"
        /// The line is longer than ``ControlLineBuffer/maxLineLength``.
        case tooLarge = "too-large"
        /// The command names something the key does not have (a credential id, for example).
        case notFound = "not-found"
        /// The command was understood but the key could not carry it out.
        case failed = "failed"
        /// The peer is not the user who runs the simulator.
        case permissionDenied = "permission-denied"
    }

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { "\(code.rawValue): \(message)" }
}

/// A credential as WebDriver's virtual-authenticator extension describes it (the Credential Parameters of
/// WebAuthn Level 3 §11.1).
package struct CredentialParameters: Equatable, Sendable {
    package var credentialId: [UInt8]
    package var isResidentCredential: Bool
    package var rpId: String
    /// A PKCS#8 DER private key: P-256 (ES256) or Ed25519 (EdDSA).
    package var privateKey: [UInt8]
    package var userHandle: [UInt8]?
    package var signCount: UInt32
    package var userName: String?
    package var userDisplayName: String?
    /// The credential's large blob (WebDriver `largeBlob`), resident credentials only.
    package var largeBlob: [UInt8]?
    /// WebAuthn Level 3 backup eligibility and state (WebDriver `backupEligibility`, `backupState`); nil: the key's
    /// defaults.
    package var backupEligibility: Bool?
    package var backupState: Bool?

    package init(
        credentialId: [UInt8],
        isResidentCredential: Bool,
        rpId: String,
        privateKey: [UInt8],
        userHandle: [UInt8]? = nil,
        signCount: UInt32 = 0,
        userName: String? = nil,
        userDisplayName: String? = nil,
        largeBlob: [UInt8]? = nil,
        backupEligibility: Bool? = nil,
        backupState: Bool? = nil
    ) {
        self.largeBlob = largeBlob
        self.backupEligibility = backupEligibility
        self.backupState = backupState
        self.credentialId = credentialId
        self.isResidentCredential = isResidentCredential
        self.rpId = rpId
        self.privateKey = privateKey
        self.userHandle = userHandle
        self.signCount = signCount
        self.userName = userName
        self.userDisplayName = userDisplayName
    }
}

/// How the simulated user answers the next requests for user presence.
package enum PresenceSetting: Equatable, Sendable {
    case approve(delayMilliseconds: Int)
    case deny(delayMilliseconds: Int)
    /// Wait for a `touch` command (or Enter on the terminal); time out after 30 s.
    case prompt
    /// Approve the next request only, then return to the mode before.
    case approveNext(delayMilliseconds: Int)
}

/// Run options that `setOption` changes.
package struct OptionChanges: Equatable, Sendable {
    package var resetWindow: Bool?
    package var alwaysUv: Bool?
    package var fingerprintSensor: Bool?

    package init(resetWindow: Bool? = nil, alwaysUv: Bool? = nil, fingerprintSensor: Bool? = nil) {
        self.resetWindow = resetWindow
        self.alwaysUv = alwaysUv
        self.fingerprintSensor = fingerprintSensor
    }
}

/// The requests a fault may target.
package enum FaultTarget: String, Equatable, Sendable, CaseIterable {
    case any, u2f, makeCredential, getAssertion, getInfo, clientPIN, reset, getNextAssertion
    case credentialManagement, selection, bioEnrollment, largeBlobs, config

    /// The CTAP2 command byte(s) this target covers; empty for ``any`` and ``u2f``.
    package var commandBytes: [UInt8] {
        switch self {
        case .any, .u2f: []
        case .makeCredential: [0x01]
        case .getAssertion: [0x02]
        case .getInfo: [0x04]
        case .clientPIN: [0x06]
        case .reset: [0x07]
        case .getNextAssertion: [0x08]
        case .bioEnrollment: [0x09, 0x40]
        case .credentialManagement: [0x0A, 0x41]
        case .selection: [0x0B]
        case .largeBlobs: [0x0C]
        case .config: [0x0D]
        }
    }
}

/// A fault to inject into the key.
package enum Fault: Equatable, Sendable {
    /// Answer the next `count` requests of `target` with `status` (a CTAP2 status byte; for U2F a status word).
    case status(target: FaultTarget, status: UInt16, count: Int)
    /// Answer KEY_STORE_FULL to a new discoverable credential once `credentials` are stored.
    case keyStoreFull(afterCredentials: Int)
    /// Make the next `count` writes to flash fail (the request answers an error and nothing is stored).
    case flashWriteFailure(count: Int)
    /// Drop the next `count` HID reports: from the host (`inbound`) or to it.
    case dropReports(inbound: Bool, count: Int)
    /// Chromium's response override bits: the next `count` makeCredential and getAssertion answers (every one until
    /// cleared when nil) carry a zero signature, a clear UP flag and/or a clear UV flag.
    case responseOverride(bogusSignature: Bool, badUP: Bool, badUV: Bool, count: Int?)
}

/// A command of the control protocol.
package enum ControlCommand: Equatable, Sendable {
    /// The largest signCount the control plane sets: half the 32-bit counter, so that a key set there still signs
    /// two billion times (a counter at 2³²−1 is exhausted, and the key can never sign again).
    package static let maxSignCount = Int64(Int32.max)

    case addCredential(CredentialParameters)
    case getCredentials
    case removeCredential(id: [UInt8])
    /// WebDriver's Set Credential Properties: the backup state of a credential (its eligibility cannot change).
    case setCredentialProperties(id: [UInt8], backupEligibility: Bool?, backupState: Bool?, signCount: Int64? = nil)
    case removeAllCredentials
    case setUserVerified(Bool)
    case setAutomaticPresenceSimulation(Bool)
    /// With `offMilliseconds`: unplugged now, plugged back after that long or at the next powerCycle.
    case powerCycle(offMilliseconds: Int?)
    case presence(PresenceSetting)
    case touch
    /// A touch held this long (a reset with longTouchForReset needs a long one).
    case heldTouch(milliseconds: Int)
    /// The person refuses the request waiting for the user (as `n` at the terminal).
    case refuse
    case status
    case setOption(OptionChanges)
    case injectFault(Fault)
    case clearFaults
    case subscribe
    case unsubscribe
    /// The hub socket's commands (`serve --hub`): WebDriver's Add and Remove Virtual Authenticator, and the list of
    /// the keys the process serves.
    case addVirtualAuthenticator(VirtualAuthenticatorOptions)
    case removeVirtualAuthenticator(id: String)
    case listVirtualAuthenticators
    /// Start writing a trace to a path (format `jsonl` or `pcapng`, default from the extension), or stop (nil).
    case trace(path: String?, format: String?)
    /// Install a batch attestation identity: a PKCS#8 P-256 key, its leaf certificate and root certificate (DER),
    /// and optionally the device's enterprise attestation key (PKCS#8) and certificate issued by the same root.
    case setAttestation(
        privateKey: [UInt8],
        certificate: [UInt8],
        rootCertificate: [UInt8],
        enterprise: EnterpriseAttestation?
    )

    /// An enterprise attestation key (PKCS#8 P-256) and its certificate (DER).
    package struct EnterpriseAttestation: Sendable, Equatable {
        package var privateKey: [UInt8]
        package var certificate: [UInt8]
    }

    /// Every command name, as requests spell them.
    package static let names = [
        "addCredential", "getCredentials", "removeCredential", "removeAllCredentials", "setCredentialProperties",
        "setUserVerified",
        "setAutomaticPresenceSimulation", "powerCycle", "presence", "touch", "refuse", "status", "setOption",
        "injectFault",
        "clearFaults", "subscribe", "unsubscribe", "setAttestation", "trace", "addVirtualAuthenticator",
        "removeVirtualAuthenticator", "listVirtualAuthenticators",
    ]

    /// The commands of the hub socket; the others are a key's.
    package var isHubCommand: Bool {
        switch self {
        case .addVirtualAuthenticator, .removeVirtualAuthenticator, .listVirtualAuthenticators: true
        default: false
        }
    }
}

/// One request: the client's id (a string or an integer, echoed in the response) and the command.
package struct ControlRequest: Equatable, Sendable {
    package var id: JSONValue
    package var command: ControlCommand

    /// The most a delay of the presence command may be.
    package static let maxDelayMilliseconds = 600_000

    /// Parses one request line. On failure, the error comes with the request's id when one could be read.
    package static func parse(_ line: [UInt8]) -> Result<ControlRequest, ControlFailure> {
        let value: JSONValue
        do {
            value = try JSONParser.parse(line)
        } catch {
            return .failure(ControlFailure(id: nil, error: ControlError(.parseError, error.description)))
        }
        guard case .object(let members) = value else {
            return .failure(ControlFailure(id: nil, error: ControlError(.invalidRequest, "a request is a JSON object")))
        }
        let id = members["id"]
        switch id {
        case .string?, .integer?: break
        case nil:
            return .failure(ControlFailure(id: nil, error: ControlError(.invalidRequest, "the request has no \"id\"")))
        default:
            return .failure(
                ControlFailure(id: nil, error: ControlError(.invalidRequest, "\"id\" must be a string or an integer"))
            )
        }
        for key in members.keys where !["id", "command", "params"].contains(key) {
            return .failure(ControlFailure(id: id, error: ControlError(.invalidRequest, "unknown member \"\(key)\"")))
        }
        guard let name = members["command"]?.stringValue else {
            return .failure(
                ControlFailure(id: id, error: ControlError(.invalidRequest, "\"command\" must be a string"))
            )
        }
        let params: [String: JSONValue]
        switch members["params"] {
        case nil, .null?: params = [:]
        case .object(let o)?: params = o
        default:
            return .failure(
                ControlFailure(id: id, error: ControlError(.invalidRequest, "\"params\" must be an object"))
            )
        }
        do {
            let command = try parseCommand(name, Parameters(values: params))
            return .success(ControlRequest(id: id ?? .null, command: command))
        } catch {
            return .failure(ControlFailure(id: id, error: error))
        }
    }

    static func parseCommand(_ name: String, _ p: Parameters) throws(ControlError) -> ControlCommand {
        let command: ControlCommand
        switch name {
        case "addCredential":
            let resident = try p.bool("isResidentCredential")
            let userHandle = try p.optionalBytes("userHandle")
            if resident && userHandle == nil {
                throw ControlError(.invalidParams, "a resident credential needs \"userHandle\"")
            }
            if let userHandle, userHandle.isEmpty || userHandle.count > 64 {
                throw ControlError(.invalidParams, "\"userHandle\" must be 1 to 64 bytes")
            }
            let id = try p.bytes("credentialId")
            guard (1...1023).contains(id.count) else {
                throw ControlError(.invalidParams, "\"credentialId\" must be 1 to 1023 bytes")
            }
            let rpId = try p.string("rpId")
            guard !rpId.isEmpty, rpId.utf8.count <= 255 else {
                throw ControlError(.invalidParams, "\"rpId\" must be 1 to 255 bytes")
            }
            let largeBlob = try p.optionalBytes("largeBlob")
            if largeBlob != nil && !resident {
                throw ControlError(.invalidParams, "\"largeBlob\" needs a resident credential")
            }
            let signCount = try p.optionalInteger("signCount", in: 0...ControlCommand.maxSignCount) ?? 0
            command = .addCredential(
                CredentialParameters(
                    credentialId: id,
                    isResidentCredential: resident,
                    rpId: rpId,
                    privateKey: try p.bytes("privateKey"),
                    userHandle: userHandle,
                    signCount: UInt32(signCount),
                    userName: try p.optionalString("userName"),
                    userDisplayName: try p.optionalString("userDisplayName"),
                    largeBlob: largeBlob,
                    backupEligibility: try p.optionalBool("backupEligibility"),
                    backupState: try p.optionalBool("backupState")
                )
            )
        case "setCredentialProperties":
            let id = try p.bytes("credentialId")
            let eligibility = try p.optionalBool("backupEligibility")
            let state = try p.optionalBool("backupState")
            // Chromium's: -1 removes the credential's counter.
            let signCount = try p.optionalInteger("signCount", in: -1...ControlCommand.maxSignCount)
            guard eligibility != nil || state != nil || signCount != nil else {
                throw ControlError(
                    .invalidParams,
                    "give \"backupEligibility\", \"backupState\" and/or \"signCount\""
                )
            }
            command = .setCredentialProperties(
                id: id,
                backupEligibility: eligibility,
                backupState: state,
                signCount: signCount
            )
        case "getCredentials": command = .getCredentials
        case "removeCredential": command = .removeCredential(id: try p.bytes("credentialId"))
        case "removeAllCredentials": command = .removeAllCredentials
        case "setUserVerified": command = .setUserVerified(try p.bool("isUserVerified"))
        case "setAutomaticPresenceSimulation": command = .setAutomaticPresenceSimulation(try p.bool("enabled"))
        case "powerCycle":
            command = .powerCycle(offMilliseconds: try p.optionalInteger("offMs", in: 0...600_000).map { Int($0) })
        case "presence":
            let delay = Int(try p.optionalInteger("delayMs", in: 0...Int64(maxDelayMilliseconds)) ?? 200)
            switch try p.string("mode") {
            case "approve": command = .presence(.approve(delayMilliseconds: delay))
            case "deny": command = .presence(.deny(delayMilliseconds: delay))
            case "prompt": command = .presence(.prompt)
            case "approveNext": command = .presence(.approveNext(delayMilliseconds: delay))
            case let other:
                throw ControlError(
                    .invalidParams,
                    "unknown presence mode \"\(other)\": use approve, deny, prompt or approveNext"
                )
            }
        case "touch":
            if let held = try p.optionalInteger("durationMs", in: 0...600_000) {
                command = .heldTouch(milliseconds: Int(held))
            } else {
                command = .touch
            }
        case "refuse": command = .refuse
        case "status": command = .status
        case "setOption":
            let changes = OptionChanges(
                resetWindow: try p.optionalBool("resetWindow"),
                alwaysUv: try p.optionalBool("alwaysUv"),
                fingerprintSensor: try p.optionalBool("fingerprintSensor")
            )
            guard changes != OptionChanges() else {
                throw ControlError(.invalidParams, "name at least one of resetWindow, alwaysUv, fingerprintSensor")
            }
            command = .setOption(changes)
        case "injectFault": return .injectFault(try parseFault(p))
        case "clearFaults": command = .clearFaults
        case "subscribe": command = .subscribe
        case "unsubscribe": command = .unsubscribe
        case "trace":
            let path = try p.optionalString("path")
            let format = try p.optionalString("format")
            if let format, format != "jsonl" && format != "pcapng" {
                throw ControlError(.invalidParams, "\"format\" must be jsonl or pcapng")
            }
            if let path, path.isEmpty || path.utf8.count > 4096 {
                throw ControlError(.invalidParams, "\"path\" must be 1 to 4096 bytes")
            }
            command = .trace(path: path, format: format)
        case "setAttestation":
            let enterpriseKey = try p.optionalBytes("enterprisePrivateKey")
            let enterpriseCertificate = try p.optionalBytes("enterpriseCertificate")
            guard (enterpriseKey == nil) == (enterpriseCertificate == nil) else {
                throw ControlError(
                    .invalidParams,
                    "\"enterprisePrivateKey\" and \"enterpriseCertificate\" come together"
                )
            }
            command = .setAttestation(
                privateKey: try p.bytes("privateKey"),
                certificate: try p.bytes("certificate"),
                rootCertificate: try p.bytes("rootCertificate"),
                enterprise: enterpriseKey.flatMap { key in
                    enterpriseCertificate.map { ControlCommand.EnterpriseAttestation(privateKey: key, certificate: $0) }
                }
            )
        case "addVirtualAuthenticator": command = .addVirtualAuthenticator(try VirtualAuthenticatorOptions.parse(p))
        case "removeVirtualAuthenticator":
            let id = try p.string("authenticatorId")
            guard (1...64).contains(id.utf8.count) else {
                throw ControlError(.invalidParams, "\"authenticatorId\" must be 1 to 64 bytes")
            }
            command = .removeVirtualAuthenticator(id: id)
        case "listVirtualAuthenticators": command = .listVirtualAuthenticators
        default:
            throw ControlError(.unknownCommand, "unknown command \"\(name)\"")
        }
        // Every command takes exactly the parameters it read (injectFault checks its own).
        try p.only(p.read)
        return command
    }

    static func parseFault(_ p: Parameters) throws(ControlError) -> Fault {
        let fault: Fault
        switch try p.string("kind") {
        case "status":
            let targetName = try p.string("command")
            guard let target = FaultTarget(rawValue: targetName) else {
                throw ControlError(
                    .invalidParams,
                    "unknown command \"\(targetName)\": use one of \(FaultTarget.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
            let status = try p.integer("status", in: 0...(target == .u2f ? 0xFFFF : 0xFF))
            fault = .status(
                target: target,
                status: UInt16(status),
                count: Int(try p.optionalInteger("count", in: 1...1_000_000) ?? 1)
            )
        case "keyStoreFull":
            fault = .keyStoreFull(afterCredentials: Int(try p.integer("afterCredentials", in: 0...100_000)))
        case "flashWriteFailure":
            fault = .flashWriteFailure(count: Int(try p.optionalInteger("count", in: 1...1_000_000) ?? 1))
        case "dropReports":
            let direction = try p.optionalString("direction") ?? "in"
            guard direction == "in" || direction == "out" else {
                throw ControlError(.invalidParams, "\"direction\" must be \"in\" or \"out\"")
            }
            fault = .dropReports(
                inbound: direction == "in",
                count: Int(try p.optionalInteger("count", in: 1...1_000_000) ?? 1)
            )
        case "responseOverride":
            let bogus = try p.optionalBool("isBogusSignature") ?? false
            let badUP = try p.optionalBool("isBadUP") ?? false
            let badUV = try p.optionalBool("isBadUV") ?? false
            guard bogus || badUP || badUV else {
                throw ControlError(.invalidParams, "set at least one of isBogusSignature, isBadUP, isBadUV")
            }
            fault = .responseOverride(
                bogusSignature: bogus,
                badUP: badUP,
                badUV: badUV,
                count: try p.optionalInteger("count", in: 1...1_000_000).map { Int($0) }
            )
        case let other:
            throw ControlError(
                .invalidParams,
                "unknown fault kind \"\(other)\": use status, keyStoreFull, flashWriteFailure, dropReports or "
                    + "responseOverride"
            )
        }
        try p.only(p.read)
        return fault
    }
}

/// A request that could not be carried out, with its id when the request had a readable one.
package struct ControlFailure: Error, Equatable, Sendable {
    package var id: JSONValue?
    package var error: ControlError

    package init(id: JSONValue?, error: ControlError) {
        self.id = id
        self.error = error
    }
}

/// Typed access to a request's parameters; records which it read so the rest can be refused.
final class Parameters {
    let values: [String: JSONValue]
    var read: [String] = []

    init(values: [String: JSONValue]) { self.values = values }

    func value(_ key: String) throws(ControlError) -> JSONValue {
        read.append(key)
        guard let value = values[key], value != .null else {
            throw ControlError(.invalidParams, "missing parameter \"\(key)\"")
        }
        return value
    }

    func optional(_ key: String) -> JSONValue? {
        read.append(key)
        guard let value = values[key], value != .null else { return nil }
        return value
    }

    func wrongType(_ key: String, _ expected: String, _ value: JSONValue) -> ControlError {
        ControlError(.invalidParams, "\"\(key)\" must be \(expected), not \(value.typeName)")
    }

    func bool(_ key: String) throws(ControlError) -> Bool {
        let v = try value(key)
        guard let b = v.boolValue else { throw wrongType(key, "a boolean", v) }
        return b
    }

    func optionalBool(_ key: String) throws(ControlError) -> Bool? {
        guard let v = optional(key) else { return nil }
        guard let b = v.boolValue else { throw wrongType(key, "a boolean", v) }
        return b
    }

    func string(_ key: String) throws(ControlError) -> String {
        let v = try value(key)
        guard let s = v.stringValue else { throw wrongType(key, "a string", v) }
        return s
    }

    func optionalString(_ key: String) throws(ControlError) -> String? {
        guard let v = optional(key) else { return nil }
        guard let s = v.stringValue else { throw wrongType(key, "a string", v) }
        return s
    }

    func integer(_ key: String, in range: ClosedRange<Int64>) throws(ControlError) -> Int64 {
        try checked(key, try value(key), range)
    }

    func optionalInteger(_ key: String, in range: ClosedRange<Int64>) throws(ControlError) -> Int64? {
        guard let v = optional(key) else { return nil }
        return try checked(key, v, range)
    }

    func checked(_ key: String, _ v: JSONValue, _ range: ClosedRange<Int64>) throws(ControlError) -> Int64 {
        guard let i = v.integerValue else { throw wrongType(key, "an integer", v) }
        guard range.contains(i) else {
            throw ControlError(.invalidParams, "\"\(key)\" must be \(range.lowerBound) to \(range.upperBound)")
        }
        return i
    }

    func bytes(_ key: String) throws(ControlError) -> [UInt8] {
        let v = try value(key)
        guard let s = v.stringValue else { throw wrongType(key, "a base64url string", v) }
        guard let b = Base64URL.decode(s) else { throw ControlError(.invalidParams, "\"\(key)\" is not base64url") }
        return b
    }

    func optionalBytes(_ key: String) throws(ControlError) -> [UInt8]? {
        guard optional(key) != nil else { return nil }
        return try bytes(key)
    }

    /// Refuses parameters other than `allowed`.
    func only(_ allowed: [String]) throws(ControlError) {
        for key in values.keys.sorted() where !allowed.contains(key) {
            throw ControlError(.invalidParams, "unknown parameter \"\(key)\"")
        }
    }
}
