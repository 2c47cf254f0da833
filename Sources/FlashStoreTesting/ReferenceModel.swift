package import FlashStore

/// What the store should contain: a dictionary with the store's transaction semantics.
package struct ReferenceModel: Hashable, Sendable {
    /// The expected contents.
    package var entries: [UInt16: [UInt8]] = [:]

    /// An empty model.
    package init() {}

    /// Applies a transaction as ``FlashKVStore/apply(_:clearingFirst:)`` does.
    package mutating func apply(_ updates: [StoreUpdate], clearingFirst: Bool = false) {
        if clearingFirst { entries.removeAll() }
        for update in updates {
            switch update {
            case .insert(let key, let value): entries[key] = value
            case .remove(let key): entries[key] = nil
            }
        }
    }

    /// The model after a transaction.
    package func applying(_ updates: [StoreUpdate], clearingFirst: Bool = false) -> ReferenceModel {
        var copy = self
        copy.apply(updates, clearingFirst: clearingFirst)
        return copy
    }
}
