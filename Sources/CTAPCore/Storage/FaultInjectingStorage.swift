import Synchronization

/// The switch of a ``FaultInjectingStorage``: how many of the next writes fail. Shared by reference, so the
/// control plane can arm it while the authenticator owns the storage.
public final class StorageFaults: Sendable {
    let failingWrites = Atomic<Int>(0)

    public init() {}

    /// Makes the next `count` writes fail (0 disarms).
    public func failNextWrites(_ count: Int) {
        failingWrites.store(max(0, count), ordering: .relaxed)
    }

    /// Writes that will still fail.
    public var pendingFailures: Int { failingWrites.load(ordering: .relaxed) }

    /// Spends one armed failure; true when this write must fail.
    func consume() -> Bool {
        while true {
            let current = failingWrites.load(ordering: .relaxed)
            guard current > 0 else { return false }
            if failingWrites.compareExchange(expected: current, desired: current - 1, ordering: .relaxed).exchanged {
                return true
            }
        }
    }
}

/// A storage that passes everything to another one, except that an armed write fails before it reaches the
/// flash: the request answers CTAP2_ERR_OTHER (a failed flash write on a real key) and nothing changes.
public struct FaultInjectingStorage: AuthenticatorStorage {
    public private(set) var base: any AuthenticatorStorage
    public let faults: StorageFaults

    public init(_ base: any AuthenticatorStorage, faults: StorageFaults = StorageFaults()) {
        self.base = base
        self.faults = faults
    }

    func check() throws(CTAPError) {
        if faults.consume() { throw CTAPError(.other, "injected flash write failure") }
    }

    public var deviceSecret: [UInt8] { base.deviceSecret }
    public var signCounter: UInt32 { base.signCounter }
    public var residentCredentials: [ResidentCredential] { base.residentCredentials }
    public var u2fAttestation: (privateKey: [UInt8], certificate: [UInt8])? { base.u2fAttestation }
    public var enterpriseAttestationKey: (privateKey: [UInt8], certificate: [UInt8])? { base.enterpriseAttestationKey }
    public var batchAttestation: BatchAttestationKey? { base.batchAttestation }
    public var remainingDiscoverableCredentials: Int { base.remainingDiscoverableCredentials }
    public func residentCredential(id: [UInt8]) -> ResidentCredential? { base.residentCredential(id: id) }
    public var residentCount: Int { base.residentCount }
    public var discoverableCount: Int { base.discoverableCount }
    public var newestCreationSerial: UInt64 { base.newestCreationSerial }
    public func residentCredentials(rpIdHash: [UInt8]) -> [ResidentCredential] {
        base.residentCredentials(rpIdHash: rpIdHash)
    }
    public func discoverableCredential(rpIdHash: [UInt8], userId: [UInt8]) -> ResidentCredential? {
        base.discoverableCredential(rpIdHash: rpIdHash, userId: userId)
    }
    public var pin: StoredPIN? { base.pin }
    public var pinRetries: Int { base.pinRetries }
    public var settings: AuthenticatorSettings { base.settings }
    public var largeBlobArray: [UInt8] { base.largeBlobArray }
    public var fingerprints: [FingerprintTemplate] { base.fingerprints }
    public var uvRetries: Int { base.uvRetries }
    public var persistentToken: [UInt8]? { base.persistentToken }
    public var damage: [String] { base.damage }

    public mutating func incrementSignCounter() throws(CTAPError) -> UInt32 {
        try check()
        return try base.incrementSignCounter()
    }

    public mutating func raiseSignCounter(to value: UInt32) throws(CTAPError) {
        try check()
        try base.raiseSignCounter(to: value)
    }

    public mutating func storeResident(_ credential: ResidentCredential) throws(CTAPError) {
        try check()
        try base.storeResident(credential)
    }

    public mutating func deleteResident(id: [UInt8]) throws(CTAPError) -> Bool {
        try check()
        return try base.deleteResident(id: id)
    }

    public mutating func setU2FAttestation(privateKey: [UInt8], certificate: [UInt8]) throws(CTAPError) {
        try check()
        try base.setU2FAttestation(privateKey: privateKey, certificate: certificate)
    }

    public mutating func setEnterpriseAttestationKey(privateKey: [UInt8], certificate: [UInt8]) throws(CTAPError) {
        try check()
        try base.setEnterpriseAttestationKey(privateKey: privateKey, certificate: certificate)
    }

    public mutating func setBatchAttestation(_ key: BatchAttestationKey) throws(CTAPError) {
        try check()
        try base.setBatchAttestation(key)
    }

    public mutating func setPIN(_ pin: StoredPIN) throws(CTAPError) {
        try check()
        try base.setPIN(pin)
    }

    public mutating func setPinRetries(_ retries: Int) throws(CTAPError) {
        try check()
        try base.setPinRetries(retries)
    }

    public mutating func setSettings(_ settings: AuthenticatorSettings) throws(CTAPError) {
        try check()
        try base.setSettings(settings)
    }

    public mutating func setLargeBlobArray(_ array: [UInt8]) throws(CTAPError) {
        try check()
        try base.setLargeBlobArray(array)
    }

    public mutating func setFingerprints(_ templates: [FingerprintTemplate]) throws(CTAPError) {
        try check()
        try base.setFingerprints(templates)
    }

    public mutating func setUvRetries(_ retries: Int) throws(CTAPError) {
        try check()
        try base.setUvRetries(retries)
    }

    public mutating func setPersistentToken(_ token: [UInt8]) throws(CTAPError) {
        try check()
        try base.setPersistentToken(token)
    }

    public mutating func wipe(newDeviceSecret: [UInt8]) throws(CTAPError) {
        try check()
        try base.wipe(newDeviceSecret: newDeviceSecret)
    }
}
