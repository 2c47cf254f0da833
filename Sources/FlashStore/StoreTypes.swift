/// One change in a transaction.
public enum StoreUpdate: Hashable, Sendable {
    /// Associates `value` with `key`, replacing (and wiping) any previous value.
    case insert(key: UInt16, value: [UInt8])
    /// Removes `key` and wipes its value; no effect if the key is absent.
    case remove(key: UInt16)

    /// The key this update touches.
    public var key: UInt16 {
        switch self {
        case .insert(let key, _), .remove(let key): key
        }
    }
}

/// How full the store is. Byte counts are in the store's own unit: a value of `n` bytes costs
/// ``footprint(ofValueLength:)`` bytes (value rounded up to words plus a record header and commit word).
public struct StoreCapacity: Hashable, Sendable {
    /// What the live values may occupy at most, ignoring page fragmentation.
    public var totalBytes: Int
    /// What the live values occupy.
    public var usedBytes: Int
    /// Word size of the flash (for ``footprint(ofValueLength:)``).
    public var wordSize: Int
    /// Bytes still available (`totalBytes - usedBytes`, never negative). An estimate: records never span
    /// pages, so the real room can be a little smaller; ``FlashKVStore/canApply(_:clearingFirst:)`` is exact.
    public var freeBytes: Int { max(0, totalBytes - usedBytes) }

    /// Bytes one value of `length` bytes costs when inserted on its own.
    public func footprint(ofValueLength length: Int) -> Int {
        let round = { (n: Int) in (n + wordSize - 1) / wordSize * wordSize }
        return round(12) + round(length) + wordSize
    }

    /// An estimate of how many more values of `length` bytes fit, each inserted on its own.
    public func remaining(valueLength length: Int) -> Int { freeBytes / footprint(ofValueLength: length) }
}

/// Wear of the flash as the store tracks it (from the erase counts in its page headers).
public struct StoreLifetime: Hashable, Sendable {
    /// Fewest erases of a usable page.
    public var minEraseCount: Int
    /// Most erases of a usable page.
    public var maxEraseCount: Int
    /// Erases a page survives.
    public var endurance: Int
    /// Pages taken out of service because they wore out.
    public var retiredPages: Int
    /// Whether making room would now need an erase past endurance.
    public var isWornOut: Bool
}

/// What mounting had to repair: all zero after a clean shutdown.
public struct RecoveryReport: Hashable, Sendable, CustomStringConvertible {
    /// Pages erased: interrupted erases, pages left over by an interrupted compaction, torn page headers,
    /// garbage.
    public var erasedPages = 0
    /// Pages that could not be erased any more (worn out) and are no longer used.
    public var retiredPages = 0
    /// Dead values (replaced, removed or cleared) whose wipe had been interrupted, now zeroed.
    public var wipedValues = 0
    /// Records written but not committed when the power was cut, whose values had to be zeroed (the
    /// records themselves are ignored).
    public var rolledBackRecords = 0
    /// Torn bytes after the last record of a page, zeroed (the page is sealed).
    public var zeroedTails = 0

    /// Whether mounting found nothing to repair.
    public var isClean: Bool { self == RecoveryReport() }

    public var description: String {
        "erased \(erasedPages) page(s), retired \(retiredPages), wiped \(wipedValues) value(s), "
            + "rolled back \(rolledBackRecords) record(s), zeroed \(zeroedTails) torn tail(s)"
    }
}

/// One page as the store sees it (for inspection tools).
public struct PageSummary: Hashable, Sendable {
    /// Role of the page.
    public enum Role: Hashable, Sendable {
        /// Erased, ready to become the log tail.
        case free
        /// Part of the log, with its sequence number.
        case log(sequence: UInt32)
        /// Worn out and out of service.
        case retired
    }

    /// Page index.
    public var page: Int
    /// Role of the page.
    public var role: Role
    /// Erase count from the page header (an estimate when `eraseCountKnown` is false).
    public var eraseCount: Int
    /// Whether the erase count was read from the page header.
    public var eraseCountKnown: Bool
    /// Bytes of records written in the page (log pages), header included.
    public var usedBytes: Int
    /// Whether the page is the log tail (where the next record goes).
    public var isTail: Bool
}
