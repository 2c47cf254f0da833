import CTAPCBOR
import Crypto
package import FlashStore

/// A problem with the persistent state that stops the key from starting, with a message for the user.
package struct StorageError: Error, CustomStringConvertible, Sendable {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Record keys of the authenticator's state in the flash store (firmware-spec/storage.md, "Records").
package enum StorageKey {
    /// Format of the records below: 1 byte, currently 1.
    package static let recordFormat: UInt16 = 0x0001
    /// The 32-byte device secret that seals credential ids.
    package static let deviceSecret: UInt16 = 0x0002
    /// The signature counter, 4 bytes big endian.
    package static let signCounter: UInt16 = 0x0003
    /// The U2F attestation private key (32 bytes) and certificate (DER).
    package static let u2fAttestationKey: UInt16 = 0x0004
    package static let u2fAttestationCertificate: UInt16 = 0x0005
    /// The device serial, 8 bytes, made once and kept across resets (the uhid serial number).
    package static let serial: UInt16 = 0x0006
    /// The enterprise attestation private key (32 bytes) and certificate (DER), kept across resets.
    package static let enterpriseAttestationKey: UInt16 = 0x0007
    package static let enterpriseAttestationCertificate: UInt16 = 0x0008
    /// The batch attestation private key (32 bytes), its leaf certificate and root certificate (DER), kept across
    /// resets.
    package static let batchAttestationKey: UInt16 = 0x0009
    package static let batchAttestationCertificate: UInt16 = 0x000A
    package static let batchAttestationRoot: UInt16 = 0x000B
    /// The PIN: the left 16 bytes of SHA-256(PIN) followed by its length in code points (1 byte).
    package static let pin: UInt16 = 0x0010
    /// PIN attempts left, 1 byte.
    package static let pinRetries: UInt16 = 0x0011
    /// The large-blob array's header: the slot that holds it (1 byte, 0 or 1) and its length (4 bytes big endian).
    package static let largeBlobHeader: UInt16 = 0x0012
    /// The settings of authenticatorConfig (``AuthenticatorSettings/encoded``).
    package static let settings: UInt16 = 0x0013
    /// The enrolled fingerprints (``FingerprintTemplate/encode(_:)``).
    package static let fingerprints: UInt16 = 0x0014
    /// Built-in user verification attempts left, 1 byte; absent means the maximum.
    package static let uvRetries: UInt16 = 0x0015
    /// The persistent pinUvAuthToken (CTAP 2.2), 32 bytes.
    package static let persistentToken: UInt16 = 0x0016
    /// Present (1 byte) while a reset that had to be done in steps (a full store) is not finished; mount finishes it.
    package static let resetInProgress: UInt16 = 0x0017
    /// Large-blob chunks: slot 0 in 0x0100...0x017F, slot 1 in 0x0180...0x01FF, chunk i at the slot's base + i.
    package static let largeBlobSlots: [UInt16] = [0x0100, 0x0180]
    package static let largeBlobChunksPerSlot: UInt16 = 0x80

    /// Whether `key` holds a large-blob chunk (of either slot).
    static func isLargeBlobChunk(_ key: UInt16) -> Bool {
        largeBlobSlots.contains { key >= $0 && key < $0 + largeBlobChunksPerSlot }
    }
    /// Discoverable credentials, one record each, in keys 0x1000...0xFFFE.
    package static let firstCredential: UInt16 = 0x1000
    package static let lastCredential: UInt16 = 0xFFFE
}

/// The authenticator's persistent state in a log-structured flash store.
///
/// Every mutation is committed to flash before the method returns; a replaced discoverable credential is
/// rewritten under its record key in one store operation, so a power cut leaves the old or the new one.
package struct FlashStorage<Device: FlashDevice>: AuthenticatorStorage {
    package private(set) var store: FlashKVStore<Device>
    package private(set) var deviceSecret: [UInt8]
    package private(set) var signCounter: UInt32
    package private(set) var serial: [UInt8]
    /// What RAM keeps of the stored credentials; a credential itself is decoded from its record when a request
    /// needs it.
    var index = CredentialIndex()
    /// The summary of each stored credential, by record key.
    var residents: [UInt16: ResidentSummary] { index.residents }
    var attestation: (privateKey: [UInt8], certificate: [UInt8])?
    package private(set) var enterpriseAttestationKey: (privateKey: [UInt8], certificate: [UInt8])?
    package private(set) var batchAttestation: BatchAttestationKey?
    package private(set) var pin: StoredPIN?
    package private(set) var pinRetries: Int
    package private(set) var settings = AuthenticatorSettings()
    package private(set) var largeBlobArray = LargeBlobArray.initial
    package private(set) var fingerprints: [FingerprintTemplate] = []
    package private(set) var uvRetries = StoredPIN.maxUvRetries
    package private(set) var persistentToken: [UInt8]?
    /// The slot of the current large-blob array; nil while it is the initial one.
    var largeBlobSlot: Int?

    static var recordFormatVersion: UInt8 { 1 }

    /// Mounts the store in `device` (repairing an interrupted operation) and loads the state; a blank flash
    /// is initialised with a new device secret and serial from `entropy`.
    package init(device: Device, entropy: inout EntropySource) throws(StorageError) {
        var store: FlashKVStore<Device>
        do {
            store = try FlashKVStore(mounting: device)
        } catch {
            throw StorageError("the flash image cannot be mounted: \(error)")
        }
        func read(_ key: UInt16) throws(StorageError) -> [UInt8]? {
            do throws(StoreError) {
                return try store.get(key)
            } catch  where error.code == .damaged {
                // The key's state cannot be known: refuse to run rather than guess (a counter that went back, a PIN
                // or its retries forgotten). `fidosim flash inspect` lists what the mount found.
                throw StorageError(
                    "record 0x\(String(key, radix: 16, uppercase: true)) of the key's state is damaged beyond "
                        + "correction (\(error.detail)); the key does not start with it: see fidosim flash inspect"
                )
            } catch {
                throw StorageError("reading record \(key): \(error)")
            }
        }
        if let format = try read(StorageKey.recordFormat), format != [Self.recordFormatVersion] {
            throw StorageError("the flash holds records of format \(format), this build reads format 1")
        }
        var initial: [StoreUpdate] = []
        if try read(StorageKey.recordFormat) == nil {
            initial.append(.insert(key: StorageKey.recordFormat, value: [Self.recordFormatVersion]))
        }
        var secret = try read(StorageKey.deviceSecret) ?? []
        if secret.count != 32 {
            secret = entropy.bytes(32)
            initial.append(.insert(key: StorageKey.deviceSecret, value: secret))
        }
        var serial = try read(StorageKey.serial) ?? []
        if serial.count != 8 {
            serial = entropy.bytes(8)
            initial.append(.insert(key: StorageKey.serial, value: serial))
        }
        if !initial.isEmpty {
            do { try store.apply(initial) } catch { throw StorageError("initialising the flash: \(error)") }
        }
        if store.contains(StorageKey.resetInProgress) {
            // A reset done in steps was cut: finish it, with a new device secret.
            secret = entropy.bytes(32)
            do {
                try Self.reset(&store, newDeviceSecret: secret)
            } catch {
                throw StorageError("finishing an interrupted reset: \(error)")
            }
        }
        let counterBytes = try read(StorageKey.signCounter) ?? [0, 0, 0, 0]
        guard counterBytes.count == 4 else { throw StorageError("the signature counter record is corrupt") }
        self.signCounter = counterBytes.reduce(0) { $0 << 8 | UInt32($1) }
        if let key = try read(StorageKey.u2fAttestationKey),
            let certificate = try read(StorageKey.u2fAttestationCertificate)
        {
            attestation = (key, certificate)
        }
        if let key = try read(StorageKey.enterpriseAttestationKey),
            let certificate = try read(StorageKey.enterpriseAttestationCertificate)
        {
            enterpriseAttestationKey = (key, certificate)
        }
        if let key = try read(StorageKey.batchAttestationKey),
            let certificate = try read(StorageKey.batchAttestationCertificate),
            let root = try read(StorageKey.batchAttestationRoot)
        {
            guard key.count == 32 else { throw StorageError("the batch attestation key record is corrupt") }
            batchAttestation = BatchAttestationKey(privateKey: key, certificate: certificate, rootCertificate: root)
        }
        if let bytes = try read(StorageKey.pin) {
            guard bytes.count == 17 else { throw StorageError("the PIN record is corrupt") }
            pin = StoredPIN(hash: Array(bytes.prefix(16)), codePoints: Int(bytes[16]))
        }
        if let bytes = try read(StorageKey.pinRetries) {
            guard bytes.count == 1, Int(bytes[0]) <= StoredPIN.maxRetries else {
                throw StorageError("the PIN retries record is corrupt")
            }
            pinRetries = Int(bytes[0])
        } else {
            pinRetries = StoredPIN.maxRetries
        }
        if let bytes = try read(StorageKey.settings) {
            guard let decoded = AuthenticatorSettings(encoded: bytes) else {
                throw StorageError("the settings record is corrupt")
            }
            settings = decoded
        }
        if let bytes = try read(StorageKey.fingerprints) {
            guard let templates = FingerprintTemplate.decode(bytes) else {
                throw StorageError("the fingerprint record is corrupt")
            }
            fingerprints = templates
        }
        if let bytes = try read(StorageKey.uvRetries) {
            guard bytes.count == 1, Int(bytes[0]) <= StoredPIN.maxUvRetries else {
                throw StorageError("the UV retries record is corrupt")
            }
            uvRetries = Int(bytes[0])
        }
        if let bytes = try read(StorageKey.persistentToken) {
            guard bytes.count == 32 else { throw StorageError("the persistent token record is corrupt") }
            persistentToken = bytes
        }
        if let header = try read(StorageKey.largeBlobHeader), !Self.largeBlobDamaged(store) {
            guard header.count == 5, header[0] <= 1 else { throw StorageError("the large-blob header is corrupt") }
            let slot = Int(header[0])
            let length = header[1...].reduce(0) { $0 << 8 | Int($1) }
            var array: [UInt8] = []
            var index: UInt16 = 0
            while array.count < length, index < StorageKey.largeBlobChunksPerSlot,
                let chunk = try read(StorageKey.largeBlobSlots[slot] + index)
            {
                array += chunk
                index += 1
            }
            guard array.count == length else { throw StorageError("the large-blob array is incomplete") }
            largeBlobArray = array
            largeBlobSlot = slot
        }
        // Chunks of the other slot are left from a write that a power cut interrupted: drop them.
        let inUse = largeBlobSlot.map { StorageKey.largeBlobSlots[$0] }
        let stale: [StoreUpdate] = store.keys.filter { key in
            StorageKey.largeBlobSlots.contains { base in
                key >= base && key < base + StorageKey.largeBlobChunksPerSlot && base != inUse
            }
        }.map { .remove(key: $0) }
        // At most 4 keys per removal: what the store guarantees to fit after any recovery (storage.md, "The
        // reserve"); on a small geometry a 4 KiB array has more than 4 chunks.
        for start in stride(from: 0, to: stale.count, by: 4) {
            do {
                try store.apply(Array(stale[start..<min(stale.count, start + 4)]))
            } catch {
                throw StorageError("cleaning an interrupted large-blob write: \(error)")
            }
        }
        var index = CredentialIndex()
        var damagedCredentials: [UInt16] = []
        for key in store.keys where key >= StorageKey.firstCredential && key <= StorageKey.lastCredential {
            // A credential whose record fails its check is not used (it answers as absent) and is kept.
            let bytes: [UInt8]?
            do throws(StoreError) {
                bytes = try store.get(key)
            } catch  where error.code == .damaged {
                damagedCredentials.append(key)
                continue
            } catch {
                throw StorageError("reading record \(key): \(error)")
            }
            guard let bytes, let credential = CredentialRecord.decode(bytes) else { continue }
            index.load(credential, key: key)
        }
        self.index = index
        self.damagedCredentials = damagedCredentials
        self.deviceSecret = secret
        self.serial = serial
        self.store = store
    }

    /// Credential records that fail their integrity check: not used, kept (reset removes them).
    var damagedCredentials: [UInt16] = []

    /// Decodes every stored credential from flash.
    package var residentCredentials: [ResidentCredential] { residents.keys.compactMap(credential(at:)) }

    package var residentCount: Int { residents.count }

    package var discoverableCount: Int { residents.values.count(where: \.discoverable) }

    package var newestCreationSerial: UInt64 { index.newestSerial }

    package func residentCredential(id: [UInt8]) -> ResidentCredential? {
        index.keysById[id].flatMap(credential(at:))
    }

    package func residentCredentials(rpIdHash: [UInt8]) -> [ResidentCredential] {
        let tag = ResidentSummary.tag(rpIdHash)
        return residents.compactMap { key, summary in
            guard summary.rpTag == tag, let credential = credential(at: key), credential.rpIdHash == rpIdHash else {
                return nil
            }
            return credential
        }
    }

    package func discoverableCredential(rpIdHash: [UInt8], userId: [UInt8]) -> ResidentCredential? {
        discoverableKey(rpIdHash: rpIdHash, userId: userId).flatMap(credential(at:))
    }

    /// The record key of the stored discoverable credential of this RP and user, if any.
    func discoverableKey(rpIdHash: [UInt8], userId: [UInt8]) -> UInt16? {
        let tag = OwnerIndex.Tag(rp: ResidentSummary.tag(rpIdHash), user: ResidentSummary.tag(user: userId))
        func holds(_ key: UInt16) -> Bool {
            guard let stored = credential(at: key) else { return false }
            return stored.discoverable && stored.rpIdHash == rpIdHash && stored.user.id == userId
        }
        if let key = index.owners.keys[tag], holds(key) { return key }
        // Two records have shared a tag since the mount: a miss proves nothing, so every candidate is checked.
        guard index.owners.collided else { return nil }
        return residents.first { key, summary in
            summary.discoverable && summary.rpTag == tag.rp && summary.userTag == tag.user && holds(key)
        }?.key
    }

    /// The credential in record `key`, decoded from flash (nil if the record went unreadable since the mount).
    func credential(at key: UInt16) -> ResidentCredential? {
        guard residents[key] != nil, let bytes = try? store.get(key) else { return nil }
        return CredentialRecord.decode(bytes)
    }

    /// Gives the flash device to `body` (tests arm power cuts through it).
    package mutating func withDevice<R>(_ body: (inout Device) throws -> R) rethrows -> R {
        try store.withDevice(body)
    }

    package var u2fAttestation: (privateKey: [UInt8], certificate: [UInt8])? { attestation }

    /// How many more discoverable credentials of typical size fit: a record of 270 bytes is a credential with a
    /// 64-byte user id and name for a short rpId.
    package var remainingDiscoverableCredentials: Int {
        store.capacity.remaining(valueLength: 270)
    }

    package mutating func incrementSignCounter() throws(CTAPError) -> UInt32 {
        guard signCounter < UInt32.max else { throw CTAPError(.other, "signature counter exhausted") }
        let next = signCounter + 1
        try write([.insert(key: StorageKey.signCounter, value: AuthenticatorData.bigEndian(next))])
        signCounter = next
        return next
    }

    package mutating func raiseSignCounter(to value: UInt32) throws(CTAPError) {
        guard value > signCounter else { return }
        try write([.insert(key: StorageKey.signCounter, value: AuthenticatorData.bigEndian(value))])
        signCounter = value
    }

    package mutating func storeResident(_ credential: ResidentCredential) throws(CTAPError) {
        let sameId = index.keysById[credential.id]
        let replaced =
            credential.discoverable ? discoverableKey(rpIdHash: credential.rpIdHash, userId: credential.user.id) : nil
        guard let key = sameId ?? replaced ?? freeCredentialKey() else {
            throw CTAPError(.keyStoreFull, "no record key left")
        }
        // The credential goes in under its own id's record, else the replaced one's, else a free one; a replaced
        // credential under another record goes in the same operation.
        var updates: [StoreUpdate] = [.insert(key: key, value: CredentialRecord.encode(credential))]
        if let replaced, replaced != key { updates.append(.remove(key: replaced)) }
        let gone = Set([key, replaced].compactMap { $0 }).filter { residents[$0] != nil }
            .map { (key: $0, id: self.credential(at: $0)?.id) }
        try write(updates, fullIs: .keyStoreFull)
        index.stored(
            credential,
            key: key,
            gone: gone,
            replaced: replaced,
            tookFreeKey: sameId == nil && replaced == nil
        )
    }

    @discardableResult
    package mutating func deleteResident(id: [UInt8]) throws(CTAPError) -> Bool {
        guard let key = index.keysById[id] else { return false }
        try write([.remove(key: key)])
        index.deleted(key: key, id: id)
        return true
    }

    package mutating func setU2FAttestation(privateKey: [UInt8], certificate: [UInt8]) throws(CTAPError) {
        try write([
            .insert(key: StorageKey.u2fAttestationKey, value: privateKey),
            .insert(key: StorageKey.u2fAttestationCertificate, value: certificate),
        ])
        attestation = (privateKey, certificate)
    }

    package mutating func setBatchAttestation(_ key: BatchAttestationKey) throws(CTAPError) {
        try write([
            .insert(key: StorageKey.batchAttestationKey, value: key.privateKey),
            .insert(key: StorageKey.batchAttestationCertificate, value: key.certificate),
            .insert(key: StorageKey.batchAttestationRoot, value: key.rootCertificate),
        ])
        batchAttestation = key
    }

    package mutating func setPIN(_ pin: StoredPIN) throws(CTAPError) {
        try write([
            .insert(key: StorageKey.pin, value: pin.hash + [UInt8(clamping: pin.codePoints)]),
            .insert(key: StorageKey.pinRetries, value: [UInt8(StoredPIN.maxRetries)]),
        ])
        self.pin = pin
        pinRetries = StoredPIN.maxRetries
    }

    package mutating func setPinRetries(_ retries: Int) throws(CTAPError) {
        try write([.insert(key: StorageKey.pinRetries, value: [UInt8(clamping: retries)])])
        pinRetries = retries
    }

    package mutating func setSettings(_ settings: AuthenticatorSettings) throws(CTAPError) {
        try write([.insert(key: StorageKey.settings, value: settings.encoded)])
        self.settings = settings
    }

    /// Writes the new array's chunks into the free slot (several store operations), then switches the header to
    /// it in one operation, then drops the old slot's chunks. A cut before the switch leaves the old array (the
    /// new chunks are dropped at the next mount); a cut after it, the new one.
    package mutating func setLargeBlobArray(_ array: [UInt8]) throws(CTAPError) {
        let slot = largeBlobSlot == 0 ? 1 : 0
        let base = StorageKey.largeBlobSlots[slot]
        let chunkSize = min(1024, store.maxValueLength)
        let chunks = stride(from: 0, to: array.count, by: chunkSize).map {
            Array(array[$0..<min(array.count, $0 + chunkSize)])
        }
        guard chunks.count <= Int(StorageKey.largeBlobChunksPerSlot) else {
            throw CTAPError(.largeBlobStorageFull, "the array needs \(chunks.count) chunks")
        }
        do {
            for (i, chunk) in chunks.enumerated() {
                try write([.insert(key: base + UInt16(i), value: chunk)], fullIs: .largeBlobStorageFull)
            }
            let length = UInt32(array.count)
            try write([
                .insert(
                    key: StorageKey.largeBlobHeader,
                    value: [UInt8(slot)] + AuthenticatorData.bigEndian(length)
                )
            ])
        } catch {
            // Best effort: the chunks written so far are not referenced; free their space now.
            let written = store.keys.filter { $0 >= base && $0 < base + StorageKey.largeBlobChunksPerSlot }
            try? write(written.map { .remove(key: $0) })
            throw error
        }
        let old = largeBlobSlot
        largeBlobArray = array
        largeBlobSlot = slot
        if let old {
            let oldBase = StorageKey.largeBlobSlots[old]
            let stale = store.keys.filter { $0 >= oldBase && $0 < oldBase + StorageKey.largeBlobChunksPerSlot }
            try write(stale.map { .remove(key: $0) })
        }
    }

    package mutating func setEnterpriseAttestationKey(privateKey: [UInt8], certificate: [UInt8]) throws(CTAPError) {
        try write([
            .insert(key: StorageKey.enterpriseAttestationKey, value: privateKey),
            .insert(key: StorageKey.enterpriseAttestationCertificate, value: certificate),
        ])
        enterpriseAttestationKey = (privateKey, certificate)
    }

    package mutating func setFingerprints(_ templates: [FingerprintTemplate]) throws(CTAPError) {
        try write([.insert(key: StorageKey.fingerprints, value: FingerprintTemplate.encode(templates))])
        fingerprints = templates
    }

    package mutating func setUvRetries(_ retries: Int) throws(CTAPError) {
        try write([.insert(key: StorageKey.uvRetries, value: [UInt8(clamping: retries)])])
        uvRetries = retries
    }

    package mutating func setPersistentToken(_ token: [UInt8]) throws(CTAPError) {
        try write([.insert(key: StorageKey.persistentToken, value: token)])
        persistentToken = token
    }

    package mutating func wipe(newDeviceSecret: [UInt8]) throws(CTAPError) {
        do {
            try Self.reset(&store, newDeviceSecret: newDeviceSecret)
        } catch {
            if error.code == .full || error.code == .transactionTooLarge {
                throw CTAPError(.keyStoreFull, "flash store: \(error)")
            }
            if error.code == .flashFailure { recoverFromFailedWrite() }
            throw CTAPError(.other, "flash store: \(error)")
        }
        settings = AuthenticatorSettings()
        largeBlobArray = LargeBlobArray.initial
        largeBlobSlot = nil
        fingerprints = []
        uvRetries = StoredPIN.maxUvRetries
        persistentToken = nil
        index = CredentialIndex()
        pin = nil
        pinRetries = StoredPIN.maxRetries
        deviceSecret = newDeviceSecret
    }

    /// The lowest credential record key that holds nothing: not a credential, and not a record that did not decode
    /// at mount either, which a new credential would otherwise overwrite without a word.
    func freeCredentialKey() -> UInt16? {
        var key = index.freeKeyHint
        while key <= StorageKey.lastCredential {
            if !store.contains(key) { return key }  // every credential in `residents` has its record in the store
            key += 1
        }
        return nil
    }

    mutating func write(_ updates: [StoreUpdate], fullIs status: CTAPStatus = .other) throws(CTAPError) {
        do {
            try store.apply(updates)
        } catch {
            if error.code == .full || error.code == .transactionTooLarge || error.code == .valueTooLarge {
                throw CTAPError(status == .other ? .keyStoreFull : status, "flash store: \(error)")
            }
            if error.code == .flashFailure { recoverFromFailedWrite() }
            throw CTAPError(.other, "flash store: \(error)")
        }
    }

    /// After the device refused a write (an image file on a full disk), its flash is as a power cut during that
    /// write would leave it: mount it again and reload the state, so the key goes on with what was acknowledged
    /// and later writes work again once the device takes them. When that fails too, the store stays stale and
    /// every write fails until the key restarts.
    mutating func recoverFromFailedWrite() {
        var entropy = EntropySource.system
        if let again = try? FlashStorage(device: store.device, entropy: &entropy) { self = again }
    }
}
