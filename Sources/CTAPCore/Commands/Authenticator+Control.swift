package import CTAPCBOR
import Crypto

extension Authenticator {
    /// The most non-discoverable credentials made through CTAP that the key remembers for ``managedCredentials``.
    package static let createdCredentialMemory = 1000

    /// Every credential the control plane can see: the stored ones (discoverable, and imported non-discoverable
    /// ones) and the non-discoverable ones made since the key started (their ids hold their keys).
    package func managedCredentials() throws(CTAPError) -> [ManagedCredential] {
        var out: [ManagedCredential] = []
        let entries = largeBlobEntries()
        for c in storage.residentCredentials.sorted(by: { $0.creationSerial < $1.creationSerial }) {
            out.append(
                ManagedCredential(
                    id: c.id,
                    rpId: c.rpId,
                    discoverable: c.discoverable,
                    privateKey: try PrivateKeyEncoding.encode(key: c.privateKey, algorithm: c.algorithm),
                    algorithm: c.algorithm,
                    userHandle: c.user.id.isEmpty && !c.discoverable ? nil : c.user.id,
                    userName: c.user.name,
                    userDisplayName: c.user.displayName,
                    signCount: countersRemoved.contains(c.id) ? 0 : storage.signCounter,
                    largeBlob: c.largeBlobKey.flatMap { key in
                        entries.lazy.compactMap { Self.openBlob($0, key: key) }.first
                    },
                    backupEligible: c.backupEligible,
                    backupState: c.backupState
                )
            )
        }
        for made in createdCredentials {
            let hash = Array(SHA256.hash(data: Array(made.rpId.utf8)))
            guard let contents = CredentialID.open(made.id, rpIdHash: hash, key: sealingKey) else { continue }
            out.append(
                ManagedCredential(
                    id: made.id,
                    rpId: made.rpId,
                    discoverable: false,
                    privateKey: try PrivateKeyEncoding.encode(key: contents.privateKey, algorithm: contents.algorithm),
                    algorithm: contents.algorithm,
                    signCount: countersRemoved.contains(made.id) ? 0 : storage.signCounter,
                    backupEligible: contents.backupEligible,
                    backupState: backupStates[made.id] ?? contents.backupState
                )
            )
        }
        return out
    }

    /// Stores a credential given by the control plane. It replaces a stored credential with the same id, and a
    /// discoverable one of the same RP and user. A signCount above the key's counter raises the counter.
    package mutating func importCredential(_ credential: ManagedCredential) throws(CTAPError) {
        let (rawKey, algorithm) = try PrivateKeyEncoding.decode(pkcs8: credential.privateKey)
        if credential.backupState && !credential.backupEligible {
            throw CTAPError(.invalidParameter, "only a backup-eligible credential can be backed up")
        }
        let rpIdHash = Array(SHA256.hash(data: Array(credential.rpId.utf8)))
        if credential.largeBlob != nil && !credential.discoverable {
            throw CTAPError(.invalidParameter, "a large blob needs a discoverable credential")
        }
        let largeBlobKey = credential.largeBlob.map { _ in entropy.bytes(32) }
        let record = ResidentCredential(
            id: credential.id,
            rpId: credential.rpId,
            rpIdHash: rpIdHash,
            user: UserEntity(
                id: credential.userHandle ?? [],
                name: credential.userName,
                displayName: credential.userDisplayName
            ),
            privateKey: rawKey,
            creationSerial: storage.newestCreationSerial + 1,
            algorithm: algorithm,
            largeBlobKey: largeBlobKey,
            discoverable: credential.discoverable,
            backupEligible: credential.backupEligible,
            backupState: credential.backupState
        )
        let replaced =
            (storage.residentCredential(id: record.id).map { [$0] } ?? [])
            + storage.residentCredentials(rpIdHash: rpIdHash).filter { $0.id != record.id && $0.replaces(record) }
        if credential.discoverable && configuration.maxResidentCredentials == 0 {
            throw CTAPError(.unsupportedOption, "this key stores no discoverable credentials (rk false)")
        }
        // A non-discoverable credential needs only the store's room: the key's limit counts discoverable ones (a
        // key without resident keys still takes WebDriver's non-resident credentials).
        let room = credential.discoverable ? remainingDiscoverableCredentials : storage.remainingDiscoverableCredentials
        if replaced.isEmpty && room <= 0 {
            throw CTAPError(.keyStoreFull, "no room for another credential")
        }
        // The blob goes in before the credential: if the array is full, nothing is stored. (A credential that then
        // fails to store leaves an entry no key opens, which platforms garbage-collect.)
        if let blob = credential.largeBlob, let largeBlobKey { try addLargeBlob(blob, key: largeBlobKey) }
        for old in replaced where old.id != record.id { try storage.deleteResident(id: old.id) }
        try storage.storeResident(record)
        createdCredentials.removeAll { $0.id == record.id }
        // Given again by the control plane: a credential removed earlier is the key's once more.
        revokedCredentials.remove(record.id)
        try storage.raiseSignCounter(to: credential.signCount)
    }

    /// WebDriver's Set Credential Properties: changes a credential's backup state; its backup eligibility was fixed
    /// when it was made (asking for another is INVALID_PARAMETER). Returns whether the key has the credential.
    /// The control plane's setCredentialProperties: the backup flags (a credential's eligibility is fixed), and its
    /// signature counter: -1 removes it (its assertions report 0, as WebDriver's signCount -1), a number raises the
    /// key's one counter to it (it never goes back: every credential shares it, as on most hardware keys). Returns
    /// whether the key has the credential; nothing changes when it has not, or when a value is refused.
    package mutating func setCredentialProperties(
        id: [UInt8],
        backupEligible: Bool?,
        backupState: Bool?,
        signCount: Int64? = nil
    ) throws(CTAPError) -> Bool {
        // The credential first (an unknown one is not found, whatever the values), then every value checked before
        // anything is written.
        guard storage.residentCredential(id: id) != nil || createdCredentials.contains(where: { $0.id == id }) else {
            return false
        }
        if let signCount, signCount >= 0, signCount < Int64(storage.signCounter) {
            throw CTAPError(
                .invalidParameter,
                "the key's counter is at \(storage.signCounter) and never goes back (one counter for every credential)"
            )
        }
        guard try setBackupProperties(id: id, backupEligible: backupEligible, backupState: backupState) else {
            return false
        }
        if let signCount {
            if signCount < 0 {
                countersRemoved.insert(id)
            } else {
                countersRemoved.remove(id)
                try storage.raiseSignCounter(to: UInt32(signCount))
            }
        }
        return true
    }

    mutating func setBackupProperties(
        id: [UInt8],
        backupEligible: Bool?,
        backupState: Bool?
    ) throws(CTAPError) -> Bool {
        func check(_ eligible: Bool) throws(CTAPError) {
            if let backupEligible, backupEligible != eligible {
                throw CTAPError(.invalidParameter, "a credential's backup eligibility is fixed when it is made")
            }
        }
        if backupState == true && backupEligible == false {
            throw CTAPError(.invalidParameter, "only a backup-eligible credential can be backed up")
        }
        if var stored = storage.residentCredential(id: id) {
            try check(stored.backupEligible)
            if backupState == true && !stored.backupEligible {
                throw CTAPError(.invalidParameter, "only a backup-eligible credential can be backed up")
            }
            guard let backupState, backupState != stored.backupState else { return true }
            stored.backupState = backupState
            try storage.storeResident(stored)
            return true
        }
        guard let made = createdCredentials.first(where: { $0.id == id }),
            let contents = CredentialID.open(
                id,
                rpIdHash: Array(SHA256.hash(data: Array(made.rpId.utf8))),
                key: sealingKey
            )
        else { return false }
        try check(contents.backupEligible)
        if backupState == true && !contents.backupEligible {
            throw CTAPError(.invalidParameter, "only a backup-eligible credential can be backed up")
        }
        if let backupState { backupStates[id] = backupState }
        return true
    }

    /// Deletes a credential by id; returns whether the key had it. A non-discoverable one made since start is
    /// revoked: its id, which holds its key, is refused from then on.
    package mutating func removeCredential(id: [UInt8]) throws(CTAPError) -> Bool {
        let remembered =
            createdCredentials.contains { $0.id == id } || createdU2F.contains(id)
        createdCredentials.removeAll { $0.id == id }
        createdU2F.removeAll { $0 == id }
        if remembered { revoke(id) }
        return try storage.deleteResident(id: id) || remembered
    }

    /// Deletes every stored credential and revokes the non-discoverable ones made since start (U2F registrations
    /// included).
    package mutating func removeAllCredentials() throws(CTAPError) -> Int {
        let ids = storage.residentCredentials.map(\.id)
        for id in ids { try storage.deleteResident(id: id) }
        let made = createdCredentials.map(\.id) + createdU2F
        for id in made { revoke(id) }
        createdCredentials.removeAll()
        createdU2F.removeAll()
        return ids.count + made.count
    }

    mutating func revoke(_ id: [UInt8]) {
        revokedCredentials.insert(id)
        openedIds.removeAll()
        signingKeys.removeAll()
    }

    /// Changes run options from the control plane.
    package mutating func setOptions(
        resetWindow: Bool? = nil,
        alwaysUv: Bool? = nil,
        fingerprintSensor: Bool? = nil
    ) throws(CTAPError) {
        if let alwaysUv, alwaysUv != storage.settings.alwaysUv || !storage.settings.alwaysUvChosen {
            var settings = storage.settings
            settings.alwaysUv = alwaysUv
            settings.alwaysUvChosen = true
            try storage.setSettings(settings)
        }
        if let resetWindow { configuration.resetWindowEnabled = resetWindow }
        if let fingerprintSensor { configuration.fingerprintSensor = fingerprintSensor }
    }

    mutating func rememberCreated(id: [UInt8], rpId: String) {
        createdCredentials.append(CreatedCredential(id: id, rpId: rpId))
        if createdCredentials.count > Self.createdCredentialMemory { createdCredentials.removeFirst() }
    }

    mutating func rememberU2F(keyHandle: [UInt8]) {
        createdU2F.append(keyHandle)
        if createdU2F.count > Self.createdCredentialMemory { createdU2F.removeFirst() }
    }
}

/// A non-discoverable credential made through CTAP since the key started.
struct CreatedCredential: Sendable, Equatable {
    var id: [UInt8]
    var rpId: String
}

extension Authenticator {
    /// The authenticatorGetInfo map as a host would read it now (the control plane's status).
    package mutating func info() -> CBORValue { getInfo() }

    /// The number of discoverable credentials stored.
    package var discoverableCredentialCount: Int { storage.discoverableCount }

    /// How many more credentials the key accepts.
    package var remainingCredentialCapacity: Int { remainingDiscoverableCredentials }
}
