import Synchronization

/// The switch of a ``FaultInjectingStorage``: how many of the next writes fail. Shared by reference, so the
/// control plane can arm it while the authenticator owns the storage.
package final class StorageFaults: Sendable {
    let failingWrites = Atomic<Int>(0)

    package init() {}

    /// Makes the next `count` writes fail (0 disarms).
    package func failNextWrites(_ count: Int) {
        failingWrites.store(max(0, count), ordering: .relaxed)
    }

    /// Writes that will still fail.
    package var pendingFailures: Int { failingWrites.load(ordering: .relaxed) }

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
package struct FaultInjectingStorage: AuthenticatorStorage {
    package private(set) var base: any AuthenticatorStorage
    package let faults: StorageFaults

    package init(_ base: any AuthenticatorStorage, faults: StorageFaults = StorageFaults()) {
        self.base = base
        self.faults = faults
    }

    func check() throws(CTAPError) {
        if faults.consume() { throw CTAPError(.other, "injected flash write failure") }
    }

    package var deviceSecret: [UInt8] { base.deviceSecret }
    package var signCounter: UInt32 { base.signCounter }
    package var residentCredentials: [ResidentCredential] { base.residentCredentials }
    package var u2fAttestation: (privateKey: [UInt8], certificate: [UInt8])? { base.u2fAttestation }
    package var enterpriseAttestationKey: (privateKey: [UInt8], certificate: [UInt8])? { base.enterpriseAttestationKey }
    package var batchAttestation: BatchAttestationKey? { base.batchAttestation }
    package var remainingDiscoverableCredentials: Int { base.remainingDiscoverableCredentials }
    package func residentCredential(id: [UInt8]) -> ResidentCredential? { base.residentCredential(id: id) }
    package var residentCount: Int { base.residentCount }
    package var discoverableCount: Int { base.discoverableCount }
    package var newestCreationSerial: UInt64 { base.newestCreationSerial }
    package func residentCredentials(rpIdHash: [UInt8]) -> [ResidentCredential] {
        base.residentCredentials(rpIdHash: rpIdHash)
    }
    package func discoverableCredential(rpIdHash: [UInt8], userId: [UInt8]) -> ResidentCredential? {
        base.discoverableCredential(rpIdHash: rpIdHash, userId: userId)
    }
    package var pin: StoredPIN? { base.pin }
    package var pinRetries: Int { base.pinRetries }
    package var settings: AuthenticatorSettings { base.settings }
    package var largeBlobArray: [UInt8] { base.largeBlobArray }
    package var fingerprints: [FingerprintTemplate] { base.fingerprints }
    package var uvRetries: Int { base.uvRetries }
    package var persistentToken: [UInt8]? { base.persistentToken }
    package var damage: [String] { base.damage }

    package mutating func incrementSignCounter() throws(CTAPError) -> UInt32 {
        try check()
        return try base.incrementSignCounter()
    }

    package mutating func raiseSignCounter(to value: UInt32) throws(CTAPError) {
        try check()
        try base.raiseSignCounter(to: value)
    }

    package mutating func storeResident(_ credential: ResidentCredential) throws(CTAPError) {
        try check()
        try base.storeResident(credential)
    }

    package mutating func deleteResident(id: [UInt8]) throws(CTAPError) -> Bool {
        try check()
        return try base.deleteResident(id: id)
    }

    package mutating func setU2FAttestation(privateKey: [UInt8], certificate: [UInt8]) throws(CTAPError) {
        try check()
        try base.setU2FAttestation(privateKey: privateKey, certificate: certificate)
    }

    package mutating func setEnterpriseAttestationKey(privateKey: [UInt8], certificate: [UInt8]) throws(CTAPError) {
        try check()
        try base.setEnterpriseAttestationKey(privateKey: privateKey, certificate: certificate)
    }

    package mutating func setBatchAttestation(_ key: BatchAttestationKey) throws(CTAPError) {
        try check()
        try base.setBatchAttestation(key)
    }

    package mutating func setPIN(_ pin: StoredPIN) throws(CTAPError) {
        try check()
        try base.setPIN(pin)
    }

    package mutating func setPinRetries(_ retries: Int) throws(CTAPError) {
        try check()
        try base.setPinRetries(retries)
    }

    package mutating func setSettings(_ settings: AuthenticatorSettings) throws(CTAPError) {
        try check()
        try base.setSettings(settings)
    }

    package mutating func setLargeBlobArray(_ array: [UInt8]) throws(CTAPError) {
        try check()
        try base.setLargeBlobArray(array)
    }

    package mutating func setFingerprints(_ templates: [FingerprintTemplate]) throws(CTAPError) {
        try check()
        try base.setFingerprints(templates)
    }

    package mutating func setUvRetries(_ retries: Int) throws(CTAPError) {
        try check()
        try base.setUvRetries(retries)
    }

    package mutating func setPersistentToken(_ token: [UInt8]) throws(CTAPError) {
        try check()
        try base.setPersistentToken(token)
    }

    package mutating func wipe(newDeviceSecret: [UInt8]) throws(CTAPError) {
        try check()
        try base.wipe(newDeviceSecret: newDeviceSecret)
    }
}
