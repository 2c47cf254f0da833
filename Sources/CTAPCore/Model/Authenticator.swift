import CTAPCBOR
import Crypto
import _CryptoExtras

/// What the bridge must do next for a request.
package enum AuthenticatorOutcome: Equatable, Sendable {
    /// The complete response: a CTAP2 status byte and CBOR, or U2F response data and status word.
    case response([UInt8])
    /// The request waits for a touch; call ``Authenticator/resume(_:now:)`` with the user's answer.
    case needsUserPresence(PresencePrompt)
}

/// What the user is asked to approve with a touch, for prompts and logs.
package struct PresencePrompt: Equatable, Sendable {
    package enum Kind: Equatable, Sendable { case ctap2, u2f }
    /// What the user does: touch the key, or put an enrolled finger on the simulated sensor (approving is a
    /// matching finger, denying a finger that does not match).
    /// A touch, a long touch (reset with longTouchForReset), or a finger on the sensor.
    package enum Gesture: Equatable, Sendable { case touch, longTouch, fingerprint }
    package var command: String
    package var rpId: String?
    package var userName: String?
    package var protocolKind: Kind
    package var gesture: Gesture

    package init(
        command: String,
        rpId: String? = nil,
        userName: String? = nil,
        protocolKind: Kind = .ctap2,
        gesture: Gesture = .touch
    ) {
        self.command = command
        self.rpId = rpId
        self.userName = userName
        self.protocolKind = protocolKind
        self.gesture = gesture
    }
}

/// The user's answer to a presence request.
package enum PresenceResult: Equatable, Sendable {
    case approved
    case denied
    case timedOut
    case cancelled
}

/// CTAP2 command bytes.
package enum CTAPCommand: UInt8, Sendable {
    case makeCredential = 0x01
    case getAssertion = 0x02
    case getInfo = 0x04
    case clientPIN = 0x06
    case reset = 0x07
    case getNextAssertion = 0x08
    case credentialManagement = 0x0A
    case selection = 0x0B
    case bioEnrollment = 0x09
    case largeBlobs = 0x0C
    case config = 0x0D
    /// The prototype bio enrollment command of CTAP 2.1 previews.
    case bioEnrollmentPreview = 0x40
    /// The prototype credential management command of CTAP 2.1 previews, still sent by some platforms.
    case credentialManagementPreview = 0x41
}

/// The authenticator: CTAP2 and U2F commands over whole messages.
///
/// Pure: time arrives as an argument (a monotonic offset since the process started), randomness comes
/// from an injected ``EntropySource``, and persistent state lives in an injected ``AuthenticatorStorage``.
/// A request that needs user presence returns ``AuthenticatorOutcome/needsUserPresence(_:)``; the owner
/// asks the user and calls ``resume(_:now:)``.
package struct Authenticator: Sendable {
    package internal(set) var configuration: AuthenticatorConfiguration

    /// The transport the next request arrives on (`usb` or `nfc`): reset is allowed only over transportsForReset.
    package mutating func setTransport(_ transport: String) { configuration.transport = transport }
    package var storage: any AuthenticatorStorage
    var entropy: EntropySource
    var sealingKey: SymmetricKey
    var credRandoms: CredRandomDeriver
    var powerUpTime: Duration
    /// What requests leave for the next ones; a power cycle and a reset forget it (``forgetVolatileState()``).
    var volatile = VolatileState()
    var pinUv: PinUvState
    /// Non-discoverable credentials made since start, oldest first (for the control plane).
    var createdCredentials: [CreatedCredential] = []
    /// Key handles U2F registrations made since start, oldest first (the key knows only their application's hash,
    /// so the control plane cannot list them; removing all credentials revokes them).
    var createdU2F: [[UInt8]] = []
    /// Non-discoverable credentials the control plane removed: their ids hold their keys, so they are refused by id
    /// (``lookUp(_:rpIdHash:)``) for the key's life, as a WebDriver authenticator forgets a credential it removed; a
    /// reset, which changes the sealing key, makes this list moot and empties it.
    var revokedCredentials: Set<[UInt8]> = []
    /// The credential the last request made or used, if any (for the control plane's events).
    package internal(set) var lastActivity: CredentialActivity?
    /// The signing keys of the credentials used last (RAM only).
    var signingKeys = SigningKeyCache()
    /// Credential ids opened last (RAM only).
    var openedIds = OpenedIdCache()
    /// The rpIdHash of the last rpId a request named (a test suite sends one RP's requests in a row).
    var lastRpIdHash: (rpId: String, hash: [UInt8])?
    /// The faults the control plane armed in the authenticator itself (RAM only).
    package var faults = AuthenticatorFaults()
    /// Backup states the control plane set on non-discoverable credentials whose ids hold their keys (the key keeps
    /// nothing else of them), by credential id; forgotten by a reset and when the process ends.
    var backupStates: [[UInt8]: Bool] = [:]
    /// The credentials whose signature counter the control plane removed (WebDriver's signCount -1): their
    /// assertions report 0 and leave the key's counter alone; forgotten by a reset and when the process ends.
    var countersRemoved: Set<[UInt8]> = []

    package init(
        configuration: AuthenticatorConfiguration = .init(),
        storage: any AuthenticatorStorage,
        entropy: EntropySource,
        now: Duration
    ) throws(CTAPError) {
        self.configuration = configuration
        self.storage = storage
        self.entropy = entropy
        self.sealingKey = CredentialID.sealingKey(deviceSecret: storage.deviceSecret)
        self.credRandoms = CredRandomDeriver(deviceSecret: storage.deviceSecret)
        self.powerUpTime = now
        self.pinUv = PinUvState(entropy: &self.entropy)
        if self.storage.u2fAttestation == nil {
            try provisionSelfSignedU2FAttestation()
        }
        if self.storage.persistentToken == nil {
            try self.storage.setPersistentToken(self.entropy.bytes(32))
        }
        if configuration.fingerprintSensor && self.storage.fingerprints.isEmpty
            && configuration.preEnrolledFingerprints > 0
        {
            try self.storage.setFingerprints(
                (1...min(configuration.preEnrolledFingerprints, Self.maxFingerprints)).map {
                    FingerprintTemplate(id: [0x00, UInt8($0)], name: "finger \($0)")
                }
            )
        }
    }

    /// Simulates removing and re-inserting the key: volatile state is cleared, persistent state kept.
    package mutating func powerCycle(now: Duration) {
        forgetVolatileState()
        powerUpTime = now
    }

    /// Forgets everything a power cycle loses: the session state, the RAM caches of keys (wiped) and the PIN/UV
    /// state with its tokens and key agreement key.
    mutating func forgetVolatileState() {
        volatile = VolatileState()
        signingKeys.removeAll()
        openedIds.removeAll()
        pinUv = PinUvState(entropy: &entropy)
    }

    // The session fields, each kept in ``volatile``.
    var pending: PendingOperation? {
        get { volatile.pending }
        set { volatile.pending = newValue }
    }
    var nextAssertion: NextAssertionState? {
        get { volatile.nextAssertion }
        set { volatile.nextAssertion = newValue }
    }
    var credentialEnumeration: CredentialEnumeration? {
        get { volatile.credentialEnumeration }
        set { volatile.credentialEnumeration = newValue }
    }
    var largeBlobWrite: LargeBlobWrite? {
        get { volatile.largeBlobWrite }
        set { volatile.largeBlobWrite = newValue }
    }
    var enrollment: FingerprintEnrollment? {
        get { volatile.enrollment }
        set { volatile.enrollment = newValue }
    }

    /// The prompt of the request waiting for user presence, if any.
    package var pendingPrompt: PresencePrompt? { pending?.prompt }

    /// Handles one CTAPHID_CBOR message: a command byte followed by CBOR parameters.
    package mutating func handleCBOR(_ message: [UInt8], now: Duration) -> AuthenticatorOutcome {
        lastActivity = nil
        if let canned = configuration.profile.cannedAnswers[message] { return .response(canned) }
        guard let first = message.first else { return .response([CTAPStatus.invalidLength.rawValue]) }
        pending = nil
        let params = message.dropFirst()
        guard let command = CTAPCommand(rawValue: first) else {
            nextAssertion = nil
            credentialEnumeration = nil
            return .response([CTAPStatus.invalidCommand.rawValue])
        }
        guard configuration.profile.allows(command) else {
            nextAssertion = nil
            credentialEnumeration = nil
            return .response([CTAPStatus.invalidCommand.rawValue])
        }
        if let forced = configuration.profile.forcedStatus[first] { return .response([forced]) }
        if command != .getNextAssertion { nextAssertion = nil }
        if command != .credentialManagement && command != .credentialManagementPreview {
            credentialEnumeration = nil
        }
        do {
            switch command {
            case .getInfo: return .response(Self.success(getInfo()))
            case .makeCredential: return try makeCredential(RequestParameters(cbor: params), now: now)
            case .getAssertion: return try getAssertion(RequestParameters(cbor: params), now: now)
            case .getNextAssertion: return try getNextAssertion(now: now)
            case .reset: return try reset(now: now)
            case .selection: return askPresence(.selection, PresencePrompt(command: "selection"))
            case .clientPIN: return try clientPIN(RequestParameters(cbor: params), now: now)
            case .credentialManagement, .credentialManagementPreview:
                // On a key without FIDO_2_1, 0x0A (where the profile serves it) is the preview command by another byte.
                let preview = command == .credentialManagementPreview || !configuration.profile.ctap21
                return try credentialManagement(params, preview: preview, now: now)
            case .largeBlobs: return try largeBlobs(RequestParameters(cbor: params), now: now)
            case .bioEnrollment, .bioEnrollmentPreview:
                guard configuration.fingerprintSensor else {
                    return .response([CTAPStatus.invalidCommand.rawValue])
                }
                return try bioEnrollment(params, preview: command == .bioEnrollmentPreview, now: now)
            case .config: return try authenticatorConfig(params, now: now)
            }
        } catch {
            return .response([error.status.rawValue])
        }
    }

    /// Continues the pending request with the user's answer.
    package mutating func resume(_ presence: PresenceResult, now: Duration) -> AuthenticatorOutcome {
        guard let operation = pending else {
            return .response([CTAPStatus.other.rawValue])
        }
        pending = nil
        if operation.prompt.gesture == .fingerprint {
            do {
                return .response(try finishFingerprint(operation, presence, now: now))
            } catch {
                return .response([error.status.rawValue])
            }
        }
        let isU2F = operation.prompt.protocolKind == .u2f
        if presence != .approved {
            if isU2F { return .response(U2FStatus.conditionsNotSatisfied.bytes) }
            switch presence {
            case .approved, .denied: return .response([CTAPStatus.operationDenied.rawValue])
            case .timedOut: return .response([CTAPStatus.userActionTimeout.rawValue])
            case .cancelled: return .response([CTAPStatus.keepaliveCancel.rawValue])
            }
        }
        do {
            return .response(try finish(operation, now: now))
        } catch {
            return .response(isU2F ? U2FStatus.wrongData.bytes : [error.status.rawValue])
        }
    }

    /// Ends the pending request because the host cancelled it; returns its response, if one was pending.
    package mutating func cancel() -> [UInt8]? {
        guard pending != nil else { return nil }
        if case .response(let bytes) = resume(.cancelled, now: powerUpTime) { return bytes }
        return nil
    }

    /// Drops the pending request without a response (the host resynchronised its channel).
    package mutating func abort() {
        pending = nil
    }

    /// A request came from another channel than the one before: with `nextFromAnotherChannel: notAllowed`, the
    /// getNextAssertion state and a credential enumeration end, so a "next" from there is CTAP2_ERR_NOT_ALLOWED.
    package mutating func requestFromAnotherChannel() {
        guard configuration.profile.behaviour.nextFromAnotherChannel == .notAllowed else { return }
        nextAssertion = nil
        credentialEnumeration = nil
    }

    // MARK: - Internals

    mutating func askPresence(_ operation: PendingOperation.Kind, _ prompt: PresencePrompt) -> AuthenticatorOutcome {
        pending = PendingOperation(kind: operation, prompt: prompt)
        return .needsUserPresence(prompt)
    }

    mutating func finish(_ operation: PendingOperation, now: Duration) throws(CTAPError) -> [UInt8] {
        switch operation.kind {
        case .makeCredential(let plan):
            consumeTokenFlags()
            return Self.success(try finishMakeCredential(plan))
        case .excluded: return [CTAPStatus.credentialExcluded.rawValue]
        case .noCredentials: return [CTAPStatus.noCredentials.rawValue]
        case .pinProbe: return [storage.pin == nil ? CTAPStatus.pinNotSet.rawValue : CTAPStatus.pinInvalid.rawValue]
        case .getAssertion(let plan):
            consumeTokenFlags()
            return try finishGetAssertion(plan, now: now)
        case .reset: return try finishReset()
        case .selection: return [CTAPStatus.ok.rawValue]
        case .u2fRegister(let request): return try finishU2FRegister(request)
        case .u2fAuthenticate(let request): return try finishU2FAuthenticate(request, userPresent: true)
        case .uvToken, .enrollSample: return [CTAPStatus.other.rawValue]  // fingerprint operations: finishFingerprint
        }
    }

    static func success(_ value: CBORValue) -> [UInt8] {
        var out = [CTAPStatus.ok.rawValue]
        out.reserveCapacity(256)
        CBOREncoder.encode(value, appendingTo: &out)
        return out
    }

    mutating func provisionSelfSignedU2FAttestation() throws(CTAPError) {
        let key = newPrivateKey()
        var serial = entropy.bytes(8)
        serial[0] &= 0x7F
        let certificate = try SelfSignedCertificate.make(
            key: key,
            commonName: "fidosim U2F self attestation",
            serial: serial
        )
        try storage.setU2FAttestation(privateKey: Array(key.rawRepresentation), certificate: certificate)
    }
}

/// A request waiting for user presence.
struct PendingOperation: Sendable {
    enum Kind: Sendable {
        case makeCredential(MakeCredentialPlan)
        case excluded
        /// A getAssertion whose built-in UV came first and then found no credential.
        case noCredentials
        case pinProbe
        case getAssertion(AssertionPlan)
        case reset
        case selection
        case u2fRegister(U2FRegisterRequest)
        case u2fAuthenticate(U2FAuthenticateRequest)
        case uvToken(UVTokenRequest)
        case enrollSample(templateId: [UInt8], first: Bool)
    }
    var kind: Kind
    var prompt: PresencePrompt
}

/// The state one request leaves for the next ones (a touch being waited for, getNextAssertion, a credential
/// enumeration, a large-blob write in fragments, a fingerprint enrollment): RAM only, forgotten as a whole.
struct VolatileState: Sendable {
    var pending: PendingOperation?
    var nextAssertion: NextAssertionState?
    var credentialEnumeration: CredentialEnumeration?
    var largeBlobWrite: LargeBlobWrite?
    var enrollment: FingerprintEnrollment?
}
