/// The persistent state of a key: everything that survives a power cycle.
///
/// Implementations commit each mutation before returning, so that a caller can rely on the order of
/// persistence (a signature counter is committed before the signature that carries it is released).
package protocol AuthenticatorStorage: Sendable {
    /// The 32-byte secret that seals credential ids; replaced by ``wipe(newDeviceSecret:)``.
    var deviceSecret: [UInt8] { get }
    /// The current value of the global signature counter.
    var signCounter: UInt32 { get }
    /// All stored credentials (discoverable, and non-discoverable ones the control plane imported), in no
    /// particular order. A storage may decode them on each call: the request paths use the narrower queries below.
    var residentCredentials: [ResidentCredential] { get }
    /// How many credentials are stored.
    var residentCount: Int { get }
    /// How many of the stored credentials are discoverable.
    var discoverableCount: Int { get }
    /// The largest ``ResidentCredential/creationSerial`` stored; 0 when none is.
    var newestCreationSerial: UInt64 { get }
    /// The stored credentials of the relying party with this rpIdHash, in no particular order.
    func residentCredentials(rpIdHash: [UInt8]) -> [ResidentCredential]
    /// The stored discoverable credential of this relying party and user, if any: the one a new discoverable
    /// credential for them replaces.
    func discoverableCredential(rpIdHash: [UInt8], userId: [UInt8]) -> ResidentCredential?
    /// The U2F attestation key (raw P-256 scalar) and its DER certificate, if provisioned.
    var u2fAttestation: (privateKey: [UInt8], certificate: [UInt8])? { get }
    /// The enterprise attestation key (raw P-256 scalar) and its DER certificate, if provisioned.
    var enterpriseAttestationKey: (privateKey: [UInt8], certificate: [UInt8])? { get }
    /// The batch attestation key and certificates, once provisioned (`fidosim attestation provision`).
    var batchAttestation: BatchAttestationKey? { get }
    /// How many more discoverable credentials of typical size fit in the storage.
    var remainingDiscoverableCredentials: Int { get }
    /// The stored discoverable credential with this id, if any.
    func residentCredential(id: [UInt8]) -> ResidentCredential?
    /// The PIN, if one is set.
    var pin: StoredPIN? { get }
    /// PIN attempts left before the PIN blocks; ``StoredPIN/maxRetries`` when no PIN is set.
    var pinRetries: Int { get }
    /// What authenticatorConfig has set.
    var settings: AuthenticatorSettings { get }
    /// The serialized large-blob array; ``LargeBlobArray/initial`` on a new key.
    var largeBlobArray: [UInt8] { get }
    /// The enrolled fingerprints of the simulated sensor.
    var fingerprints: [FingerprintTemplate] { get }
    /// Built-in user verification attempts left; ``StoredPIN/maxUvRetries`` on a new key.
    var uvRetries: Int { get }
    /// The persistent pinUvAuthToken of CTAP 2.2 (32 bytes; pcmr), nil until one is made.
    var persistentToken: [UInt8]? { get }
    /// What the last mount found damaged in persistent memory (flipped bits corrected, records not read), one
    /// line each; empty for a storage without persistent memory.
    var damage: [String] { get }

    /// Increments the signature counter, commits it, and returns the new value.
    mutating func incrementSignCounter() throws(CTAPError) -> UInt32
    /// Raises the signature counter to `value` when it is lower (never lowers it), and commits it.
    mutating func raiseSignCounter(to value: UInt32) throws(CTAPError)
    /// Stores a credential, replacing the one with the same id, or the discoverable one with the same rpIdHash and
    /// user id (see ``ResidentCredential/replaces(_:)``).
    mutating func storeResident(_ credential: ResidentCredential) throws(CTAPError)
    /// Deletes a discoverable credential by id; returns whether one was deleted.
    @discardableResult mutating func deleteResident(id: [UInt8]) throws(CTAPError) -> Bool
    /// Stores the U2F attestation key and certificate.
    mutating func setU2FAttestation(privateKey: [UInt8], certificate: [UInt8]) throws(CTAPError)
    /// Stores the enterprise attestation key and certificate (kept across reset, like the U2F ones).
    mutating func setEnterpriseAttestationKey(privateKey: [UInt8], certificate: [UInt8]) throws(CTAPError)
    /// Stores a batch attestation key and its certificates (kept across reset).
    mutating func setBatchAttestation(_ key: BatchAttestationKey) throws(CTAPError)
    /// Sets the PIN and restores the retries to ``StoredPIN/maxRetries``, in one commit.
    mutating func setPIN(_ pin: StoredPIN) throws(CTAPError)
    /// Commits the number of PIN attempts left.
    mutating func setPinRetries(_ retries: Int) throws(CTAPError)
    /// Commits new settings.
    mutating func setSettings(_ settings: AuthenticatorSettings) throws(CTAPError)
    /// Replaces the large-blob array as one commit: a power cut leaves the old array or the new one.
    mutating func setLargeBlobArray(_ array: [UInt8]) throws(CTAPError)
    /// Commits the list of enrolled fingerprints.
    mutating func setFingerprints(_ templates: [FingerprintTemplate]) throws(CTAPError)
    /// Commits the number of built-in user verification attempts left.
    mutating func setUvRetries(_ retries: Int) throws(CTAPError)
    /// Commits a new persistent pinUvAuthToken.
    mutating func setPersistentToken(_ token: [UInt8]) throws(CTAPError)
    /// Deletes every credential, the PIN, the large blobs and the settings, and installs a new device secret
    /// (authenticatorReset).
    mutating func wipe(newDeviceSecret: [UInt8]) throws(CTAPError)
}

extension AuthenticatorStorage {
    package var damage: [String] { [] }

    // Scans of `residentCredentials`, for storages without an index (storages with one answer without a scan).

    package func residentCredential(id: [UInt8]) -> ResidentCredential? {
        residentCredentials.first { $0.id == id }
    }

    package var residentCount: Int { residentCredentials.count }

    package var discoverableCount: Int { residentCredentials.count(where: \.discoverable) }

    package var newestCreationSerial: UInt64 { residentCredentials.map(\.creationSerial).max() ?? 0 }

    package func residentCredentials(rpIdHash: [UInt8]) -> [ResidentCredential] {
        residentCredentials.filter { $0.rpIdHash == rpIdHash }
    }

    package func discoverableCredential(rpIdHash: [UInt8], userId: [UInt8]) -> ResidentCredential? {
        residentCredentials.first { $0.discoverable && $0.rpIdHash == rpIdHash && $0.user.id == userId }
    }
}

/// A batch attestation identity as the key keeps it.
package struct BatchAttestationKey: Sendable, Equatable {
    /// The raw P-256 scalar that signs attestation statements.
    package var privateKey: [UInt8]
    /// The leaf certificate (DER), sent in x5c.
    package var certificate: [UInt8]
    /// The root certificate (DER) that signed the leaf, for metadata statements.
    package var rootCertificate: [UInt8]

    package init(privateKey: [UInt8], certificate: [UInt8], rootCertificate: [UInt8]) {
        self.privateKey = privateKey
        self.certificate = certificate
        self.rootCertificate = rootCertificate
    }
}

/// A PIN as the key keeps it: never the PIN itself.
package struct StoredPIN: Sendable, Equatable {
    /// The most PIN attempts: after this many wrong PINs in a row the PIN blocks until reset.
    package static let maxRetries = 8
    /// The most built-in user verification attempts (fingerprint mismatches) before UV blocks.
    package static let maxUvRetries = 5

    /// The left 16 bytes of SHA-256 of the PIN's UTF-8 bytes.
    package var hash: [UInt8]
    /// The PIN's length in Unicode code points (checked against a raised minimum PIN length).
    package var codePoints: Int

    package init(hash: [UInt8], codePoints: Int) {
        self.hash = hash
        self.codePoints = codePoints
    }
}

/// Storage held in memory: state survives a power cycle of the simulated key, not the process.
package struct MemoryStorage: AuthenticatorStorage {
    /// The most discoverable credentials this storage holds.
    package let capacity: Int
    package private(set) var deviceSecret: [UInt8]
    package private(set) var signCounter: UInt32 = 0
    package private(set) var residentCredentials: [ResidentCredential] = []
    package private(set) var pin: StoredPIN?
    package private(set) var pinRetries = StoredPIN.maxRetries
    package private(set) var settings = AuthenticatorSettings()
    package private(set) var largeBlobArray = LargeBlobArray.initial
    package private(set) var fingerprints: [FingerprintTemplate] = []
    package private(set) var uvRetries = StoredPIN.maxUvRetries
    package private(set) var persistentToken: [UInt8]?
    package private(set) var enterpriseAttestationKey: (privateKey: [UInt8], certificate: [UInt8])?
    package private(set) var batchAttestation: BatchAttestationKey?
    private var attestationKey: [UInt8]?
    private var attestationCertificate: [UInt8]?

    package init(deviceSecret: [UInt8], capacity: Int = 100) {
        precondition(deviceSecret.count == 32, "device secret must be 32 bytes")
        self.deviceSecret = deviceSecret
        self.capacity = capacity
    }

    package var remainingDiscoverableCredentials: Int { max(0, capacity - residentCredentials.count) }

    package var u2fAttestation: (privateKey: [UInt8], certificate: [UInt8])? {
        guard let attestationKey, let attestationCertificate else { return nil }
        return (attestationKey, attestationCertificate)
    }

    package mutating func incrementSignCounter() throws(CTAPError) -> UInt32 {
        guard signCounter < UInt32.max else { throw CTAPError(.other, "signature counter exhausted") }
        signCounter += 1
        return signCounter
    }

    package mutating func raiseSignCounter(to value: UInt32) throws(CTAPError) {
        signCounter = max(signCounter, value)
    }

    package mutating func storeResident(_ credential: ResidentCredential) throws(CTAPError) {
        let replaces = residentCredentials.contains { $0.id == credential.id || $0.replaces(credential) }
        guard replaces || residentCredentials.count < capacity else {
            throw CTAPError(.keyStoreFull, "memory storage holds \(capacity) credentials")
        }
        residentCredentials.removeAll { $0.id == credential.id || $0.replaces(credential) }
        residentCredentials.append(credential)
    }

    @discardableResult
    package mutating func deleteResident(id: [UInt8]) throws(CTAPError) -> Bool {
        let before = residentCredentials.count
        residentCredentials.removeAll { $0.id == id }
        return residentCredentials.count != before
    }

    package mutating func setU2FAttestation(privateKey: [UInt8], certificate: [UInt8]) throws(CTAPError) {
        attestationKey = privateKey
        attestationCertificate = certificate
    }

    package mutating func setBatchAttestation(_ key: BatchAttestationKey) throws(CTAPError) {
        batchAttestation = key
    }

    package mutating func setPIN(_ pin: StoredPIN) throws(CTAPError) {
        self.pin = pin
        pinRetries = StoredPIN.maxRetries
    }

    package mutating func setPinRetries(_ retries: Int) throws(CTAPError) {
        pinRetries = retries
    }

    package mutating func setSettings(_ settings: AuthenticatorSettings) throws(CTAPError) {
        self.settings = settings
    }

    package mutating func setLargeBlobArray(_ array: [UInt8]) throws(CTAPError) {
        largeBlobArray = array
    }

    package mutating func setFingerprints(_ templates: [FingerprintTemplate]) throws(CTAPError) {
        fingerprints = templates
    }

    package mutating func setEnterpriseAttestationKey(privateKey: [UInt8], certificate: [UInt8]) throws(CTAPError) {
        enterpriseAttestationKey = (privateKey, certificate)
    }

    package mutating func setUvRetries(_ retries: Int) throws(CTAPError) {
        uvRetries = retries
    }

    package mutating func setPersistentToken(_ token: [UInt8]) throws(CTAPError) {
        persistentToken = token
    }

    package mutating func wipe(newDeviceSecret: [UInt8]) throws(CTAPError) {
        residentCredentials.removeAll()
        settings = AuthenticatorSettings()
        largeBlobArray = LargeBlobArray.initial
        fingerprints = []
        uvRetries = StoredPIN.maxUvRetries
        persistentToken = nil
        pin = nil
        pinRetries = StoredPIN.maxRetries
        deviceSecret = newDeviceSecret
    }
}
