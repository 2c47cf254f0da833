/// What RAM keeps of the stored credentials, kept in step with the store by ``FlashStorage``: a summary per record
/// key, the key of each credential id, the key of each discoverable credential by its RP and user, the newest
/// creation serial, and where a free record key is looked for from.
struct CredentialIndex {
    /// The summary of each stored credential, by record key.
    var residents: [UInt16: ResidentSummary] = [:]
    /// The record key of each stored credential by its id: a lookup by id needs no scan of the credentials.
    var keysById: [[UInt8]: UInt16] = [:]
    /// The record key of each discoverable credential by its RP and user.
    var owners = OwnerIndex()
    /// The largest creation serial stored.
    var newestSerial: UInt64 = 0
    /// Every credential record key below this one holds a record (this one may too): a free key is looked for from
    /// here, so that filling the store does not probe every taken key again for each new credential.
    var freeKeyHint = StorageKey.firstCredential

    /// A credential the mount found in record `key` (when two records hold one id, the first keeps it).
    mutating func load(_ credential: ResidentCredential, key: UInt16) {
        let summary = ResidentSummary(credential)
        residents[key] = summary
        owners.insert(summary, key: key)
        if keysById[credential.id] == nil { keysById[credential.id] = key }
        newestSerial = max(newestSerial, credential.creationSerial)
    }

    /// `credential` was written under `key`; the records in `gone` (the key itself when it held another
    /// credential, and `replaced`, the discoverable credential of the same RP and user under another key) were
    /// overwritten or removed in the same operation. `tookFreeKey`: `key` was the first free key from the hint.
    mutating func stored(
        _ credential: ResidentCredential,
        key: UInt16,
        gone: [(key: UInt16, id: [UInt8]?)],
        replaced: UInt16?,
        tookFreeKey: Bool
    ) {
        // The new serial first: replacing the newest record (the same user registering again) then leaves forget
        // nothing to recompute, where it would scan every record.
        newestSerial = max(newestSerial, credential.creationSerial)
        for old in gone { forget(key: old.key, id: old.id) }
        let summary = ResidentSummary(credential)
        residents[key] = summary
        owners.insert(summary, key: key)
        keysById[credential.id] = key
        // `key` is taken again; only a replaced credential under another key leaves its key free.
        if let replaced, replaced != key { freeKeyHint = min(freeKeyHint, replaced) }
        // A free key was the first free one from the hint: every key up to it is taken now.
        if tookFreeKey { freeKeyHint = min(key + 1, StorageKey.lastCredential) }
        // Again, in case an imported credential's serial was below the one forget just gave up.
        newestSerial = max(newestSerial, credential.creationSerial)
    }

    /// The credential `id` in record `key` was deleted: its key is free.
    mutating func deleted(key: UInt16, id: [UInt8]) {
        forget(key: key, id: id)
        freeKeyHint = min(freeKeyHint, key)
        keysById[id] = nil
    }

    /// Drops the record in `key` (holding credential `id`) from the index, once the store no longer has it.
    mutating func forget(key: UInt16, id: [UInt8]?) {
        guard let old = residents.removeValue(forKey: key) else { return }
        owners.remove(old, key: key)
        if let id, keysById[id] == key { keysById[id] = nil }
        if old.creationSerial == newestSerial { newestSerial = residents.values.map(\.creationSerial).max() ?? 0 }
    }
}

/// A stored credential as RAM keeps it: tags to find it by RP and user (confirmed against the decoded record), and
/// what counts and ordering need. About 40 bytes, against nearly a kilobyte for a decoded credential.
struct ResidentSummary {
    /// The first 8 bytes of the rpIdHash.
    var rpTag: UInt64
    /// A hash of the user id.
    var userTag: Int
    var creationSerial: UInt64
    var discoverable: Bool

    init(_ credential: ResidentCredential) {
        rpTag = Self.tag(credential.rpIdHash)
        userTag = Self.tag(user: credential.user.id)
        creationSerial = credential.creationSerial
        discoverable = credential.discoverable
    }

    static func tag(_ rpIdHash: [UInt8]) -> UInt64 {
        rpIdHash.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    static func tag(user id: [UInt8]) -> Int {
        var hasher = Hasher()
        hasher.combine(id)
        return hasher.finalize()
    }
}

/// The record key of each discoverable credential by a tag of its RP and user: at most one discoverable credential
/// of an RP and user is stored, so a new one finds the one it replaces without a scan. Candidates are confirmed
/// against the decoded record; if two live records ever share a tag, a miss is no longer proof of absence.
struct OwnerIndex {
    struct Tag: Hashable {
        var rp: UInt64
        var user: Int
    }

    var keys: [Tag: UInt16] = [:]
    /// Set once two live records shared a tag (from then on lookups that miss fall back to a scan).
    var collided = false

    mutating func insert(_ summary: ResidentSummary, key: UInt16) {
        guard summary.discoverable else { return }
        let tag = Tag(rp: summary.rpTag, user: summary.userTag)
        if let other = keys[tag], other != key { collided = true }
        keys[tag] = key
    }

    mutating func remove(_ summary: ResidentSummary, key: UInt16) {
        let tag = Tag(rp: summary.rpTag, user: summary.userTag)
        if keys[tag] == key { keys[tag] = nil }
    }
}
