import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing

/// A failure of a test helper: thrown so that the calling test stops with a message.
struct HarnessFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}

/// A deterministic authenticator and the time the test is at.
///
/// The entropy is seeded, the storage is a ``MemoryStorage`` with a fixed secret, and every request is
/// handled at ``now``, which the test moves forward by hand.
struct Harness {
    /// The device secret of the authenticator under test.
    static let deviceSecret: [UInt8] = (0..<32).map { UInt8($0) &* 11 &+ 5 }
    /// A device secret for a second, unrelated authenticator.
    static let foreignSecret: [UInt8] = (0..<32).map { UInt8($0) &* 13 &+ 200 }
    /// An AAGUID that differs from the default, so tests see that the configuration is used.
    static let aaguid: [UInt8] = [
        0x0A, 0x0B, 0x0C, 0x0D, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0,
    ]
    /// The configuration of the authenticator under test: every value differs from the default.
    static let configuration = AuthenticatorConfiguration(
        aaguid: aaguid,
        maxResidentCredentials: 25,
        maxMessageSize: 3072,
        firmwareVersion: 7
    )

    var authenticator: Authenticator
    /// The time passed with every request and answer.
    var now: Duration

    init(
        configuration: AuthenticatorConfiguration = Harness.configuration,
        deviceSecret: [UInt8] = Harness.deviceSecret,
        seed: UInt64 = 0x5EED,
        now: Duration = .zero
    ) throws {
        self.authenticator = try Authenticator(
            configuration: configuration,
            storage: MemoryStorage(deviceSecret: deviceSecret),
            entropy: EntropySource(SeededGenerator(seed: seed)),
            now: now
        )
        self.now = now
    }

    /// Sends a CTAP2 command with its parameters (none when nil).
    mutating func cbor(_ command: CTAPCommand, _ parameters: [CBORValue: CBORValue]? = nil) -> AuthenticatorOutcome {
        cbor(raw: [command.rawValue] + (parameters.map { CBORValue.map($0).encoded() } ?? []))
    }

    /// Sends a raw CTAPHID_CBOR message.
    mutating func cbor(raw message: [UInt8]) -> AuthenticatorOutcome {
        authenticator.handleCBOR(message, now: now)
    }

    /// Sends a U2F request APDU.
    mutating func u2f(_ apdu: [UInt8]) -> AuthenticatorOutcome {
        authenticator.handleU2F(apdu, now: now)
    }

    /// Answers the pending presence request.
    mutating func resume(_ answer: PresenceResult) -> AuthenticatorOutcome {
        authenticator.resume(answer, now: now)
    }

    /// Checks that `outcome` asks for user presence, then answers it with `answer`.
    mutating func answer(
        _ outcome: AuthenticatorOutcome,
        with answer: PresenceResult,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> AuthenticatorOutcome {
        guard case .needsUserPresence = outcome else {
            Issue.record("expected a request for user presence, got \(outcome)", sourceLocation: sourceLocation)
            return outcome
        }
        return resume(answer)
    }

    /// Checks that `outcome` asks for user presence, then approves it.
    mutating func approve(
        _ outcome: AuthenticatorOutcome,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> AuthenticatorOutcome {
        answer(outcome, with: .approved, sourceLocation: sourceLocation)
    }

    /// Makes a credential with a touch and parses the response.
    mutating func register(
        _ parameters: [CBORValue: CBORValue] = Request.makeCredential(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Registration {
        let outcome = approve(cbor(.makeCredential, parameters), sourceLocation: sourceLocation)
        return try Registration(responseMap(outcome, sourceLocation: sourceLocation))
    }

    /// Gets an assertion (with a touch unless the request says up=false) and parses the response.
    mutating func getAssertion(
        _ parameters: [CBORValue: CBORValue],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Assertion {
        var outcome = cbor(.getAssertion, parameters)
        if case .needsUserPresence = outcome { outcome = resume(.approved) }
        return try Assertion(responseMap(outcome, sourceLocation: sourceLocation))
    }

    /// The current value of the global signature counter.
    var signCounter: UInt32 { authenticator.storage.signCounter }

    /// The discoverable credentials in storage, oldest first.
    var residentCredentials: [ResidentCredential] {
        authenticator.storage.residentCredentials.sorted { $0.creationSerial < $1.creationSerial }
    }
}

// MARK: - Requests

/// Parameter maps of valid requests, for tests to take apart (CTAPCoreTesting's builders).
typealias Request = CTAPRequests

extension Dictionary where Key == CBORValue, Value == CBORValue {
    /// A copy with `key` set to `value`, or removed when `value` is nil.
    func setting(_ key: Int, _ value: CBORValue?) -> Self {
        var copy = self
        copy[CBORValue(key)] = value
        return copy
    }
}

// MARK: - Responses

/// The CTAP status of a complete response; nil while the request waits for presence (or if the first byte
/// is not a CTAP status at all).
func status(of outcome: AuthenticatorOutcome) -> CTAPStatus? {
    guard case .response(let bytes) = outcome, let first = bytes.first else { return nil }
    return CTAPStatus(rawValue: first)
}

/// Whether `outcome` asks for user presence.
func needsPresence(_ outcome: AuthenticatorOutcome) -> Bool {
    if case .needsUserPresence = outcome { true } else { false }
}

/// The bytes of a complete response; nil while the request waits for presence.
func responseBytes(_ outcome: AuthenticatorOutcome) -> [UInt8]? {
    if case .response(let bytes) = outcome { bytes } else { nil }
}

/// The status word (last two bytes) of a U2F response; nil while the request waits for presence.
func statusWord(of outcome: AuthenticatorOutcome) -> UInt16? {
    guard case .response(let bytes) = outcome, bytes.count >= 2 else { return nil }
    return UInt16(bytes[bytes.count - 2]) << 8 | UInt16(bytes[bytes.count - 1])
}

/// Requires a successful CTAP2 response and decodes its CBOR map, which must be canonical.
func responseMap(
    _ outcome: AuthenticatorOutcome,
    sourceLocation: SourceLocation = #_sourceLocation
) throws
    -> CBORValue
{
    guard case .response(let bytes) = outcome else {
        throw HarnessFailure("expected a response, got \(outcome)")
    }
    guard bytes.first == CTAPStatus.ok.rawValue else {
        throw HarnessFailure(
            "expected status 0x00, got \(bytes.prefix(1)) (\(status(of: outcome).map { "\($0)" } ?? "?"))"
        )
    }
    let body = Array(bytes.dropFirst())
    let value = try CBORDecoder.decode(body)
    #expect(CBORDecoder.isCanonical(body), "response is not canonical CBOR", sourceLocation: sourceLocation)
    guard value.mapValue != nil else { throw HarnessFailure("response is not a map: \(value)") }
    return value
}

/// Whether `signature` (DER) is a valid ES256 signature of `data` by `key`.
func verifiesES256(_ signature: [UInt8], over data: [UInt8], with key: P256.Signing.PublicKey) -> Bool {
    guard let parsed = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
    return key.isValidSignature(parsed, for: data)
}

/// SHA-256 of the UTF-8 of `text` (an rpIdHash or U2F application parameter).
func sha256(_ text: String) -> [UInt8] {
    Array(SHA256.hash(data: Array(text.utf8)))
}

/// A parsed authenticatorMakeCredential response.
struct Registration {
    var response: CBORValue
    var authData: ParsedAuthData
    var credential: ParsedAuthData.AttestedCredential

    init(_ response: CBORValue) throws {
        self.response = response
        guard let bytes = response[2]?.bytesValue else { throw HarnessFailure("no authData in \(response)") }
        authData = try ParsedAuthData(bytes)
        guard let credential = authData.attestedCredential else {
            throw HarnessFailure("authData has no attested credential")
        }
        self.credential = credential
    }

    var credentialId: [UInt8] { credential.credentialId }
    var publicKey: P256.Signing.PublicKey { credential.publicKey }
}

/// A parsed authenticatorGetAssertion or authenticatorGetNextAssertion response.
struct Assertion {
    var response: CBORValue
    var credentialId: [UInt8]
    var authData: ParsedAuthData
    var signature: [UInt8]

    init(_ response: CBORValue) throws {
        self.response = response
        guard let id = response[1]?["id"]?.bytesValue else { throw HarnessFailure("no credential id in \(response)") }
        guard let data = response[2]?.bytesValue else { throw HarnessFailure("no authData in \(response)") }
        guard let signature = response[3]?.bytesValue else { throw HarnessFailure("no signature in \(response)") }
        credentialId = id
        authData = try ParsedAuthData(data)
        self.signature = signature
    }

    /// The user map (key 4), if any.
    var user: CBORValue? { response[4] }

    /// Whether the signature is valid over authData || clientDataHash.
    func verifies(with key: P256.Signing.PublicKey, clientDataHash: [UInt8] = Request.clientDataHash) -> Bool {
        verifiesES256(signature, over: authData.bytes + clientDataHash, with: key)
    }
}
