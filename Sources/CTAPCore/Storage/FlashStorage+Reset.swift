import FlashStore

// What the mount found damaged, and the reset that can be done in steps on a full store (the mount itself is
// FlashStorage's initialiser).
extension FlashStorage {
    package var damage: [String] {
        store.recovery.damage.map(\.description)
            + damagedCredentials.map {
                "credential record 0x\(String($0, radix: 16, uppercase: true)) is damaged: that credential is not used"
            }
            + (Self.largeBlobDamaged(store)
                ? ["the large-blob array is damaged: the initial (empty) array is served until the next write"] : [])
    }

    /// Whether the mount found the large-blob header or a chunk damaged beyond correction.
    static func largeBlobDamaged(_ store: FlashKVStore<Device>) -> Bool {
        store.recovery.damagedKeys.contains { $0 == StorageKey.largeBlobHeader || StorageKey.isLargeBlobChunk($0) }
    }

    /// What authenticatorReset removes: every credential record (also one that did not decode at mount: it may
    /// still hold a private key), the PIN and its retries, the settings, the large-blob array, the fingerprints,
    /// the UV retries and the persistent token.
    static func keysReset(_ store: FlashKVStore<Device>) -> [UInt16] {
        let settings: Set<UInt16> = [
            StorageKey.pin, StorageKey.pinRetries, StorageKey.settings, StorageKey.largeBlobHeader,
            StorageKey.fingerprints, StorageKey.uvRetries, StorageKey.persistentToken,
        ]
        return store.keys.filter { key in
            (key >= StorageKey.firstCredential && key <= StorageKey.lastCredential) || settings.contains(key)
                || StorageKey.isLargeBlobChunk(key)
        }
    }

    /// Resets the store's state: one transaction when it fits. On a store too full for it (its removals take one
    /// descriptor each), the reset is done in steps that each fit in the reserve: the first removes 3 records and
    /// marks the reset as begun (``StorageKey/resetInProgress``), the next remove 4 records each until the rest
    /// fits, and the last removes the rest and the mark and writes the new device secret. A mount that finds the
    /// mark finishes the reset, so a power cut leaves the state before the reset or after it.
    static func reset(_ store: inout FlashKVStore<Device>, newDeviceSecret: [UInt8]) throws(StoreError) {
        var removals = keysReset(store)
        func last() -> [StoreUpdate] {
            removals.map { .remove(key: $0) }
                + [
                    .remove(key: StorageKey.resetInProgress),
                    .insert(key: StorageKey.deviceSecret, value: newDeviceSecret),
                ]
        }
        if store.canApply(last()) != nil && !store.contains(StorageKey.resetInProgress) {
            let first = removals.prefix(3)
            try store.apply(first.map { .remove(key: $0) } + [.insert(key: StorageKey.resetInProgress, value: [1])])
            removals.removeFirst(first.count)
        }
        while !removals.isEmpty, store.canApply(last()) != nil {
            let step = removals.prefix(4)
            try store.apply(step.map { .remove(key: $0) })
            removals.removeFirst(step.count)
        }
        try store.apply(last())
    }
}
