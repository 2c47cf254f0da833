/// One change in a transaction.
package enum StoreUpdate: Hashable, Sendable {
    /// Associates `value` with `key`, replacing (and wiping) any previous value.
    case insert(key: UInt16, value: [UInt8])
    /// Removes `key` and wipes its value; no effect if the key is absent.
    case remove(key: UInt16)

    /// The key this update touches.
    package var key: UInt16 {
        switch self {
        case .insert(let key, _), .remove(let key): key
        }
    }
}

/// How full the store is. Byte counts are in the store's own unit: a value of `n` bytes costs
/// ``footprint(ofValueLength:)`` bytes (value rounded up to words plus a record header and commit word).
package struct StoreCapacity: Hashable, Sendable {
    /// What the live values may occupy at most, ignoring page fragmentation.
    package var totalBytes: Int
    /// What the live values occupy.
    package var usedBytes: Int
    /// Word size of the flash (for ``footprint(ofValueLength:)``).
    package var wordSize: Int
    /// Bytes still available (`totalBytes - usedBytes`, never negative). An estimate: records never span
    /// pages, so the real room can be a little smaller; ``FlashKVStore/canApply(_:clearingFirst:)`` is exact.
    package var freeBytes: Int { max(0, totalBytes - usedBytes) }

    /// Bytes one value of `length` bytes costs when inserted on its own.
    package func footprint(ofValueLength length: Int) -> Int {
        let round = { (n: Int) in (n + wordSize - 1) / wordSize * wordSize }
        return round(20) + round(length) + wordSize
    }

    /// An estimate of how many more values of `length` bytes fit, each inserted on its own.
    package func remaining(valueLength length: Int) -> Int { freeBytes / footprint(ofValueLength: length) }
}

/// Wear of the flash as the store tracks it (from the erase counts in its page headers).
package struct StoreLifetime: Hashable, Sendable {
    /// Fewest erases of a usable page.
    package var minEraseCount: Int
    /// Most erases of a usable page.
    package var maxEraseCount: Int
    /// Erases a page survives.
    package var endurance: Int
    /// Pages taken out of service because they wore out.
    package var retiredPages: Int
    /// Whether making room would now need an erase past endurance.
    package var isWornOut: Bool
}

/// What mounting had to repair: all zero after a clean shutdown.
package struct RecoveryReport: Hashable, Sendable, CustomStringConvertible {
    /// Pages erased: interrupted erases, pages left over by an interrupted compaction, torn page headers,
    /// garbage.
    package var erasedPages = 0
    /// Pages that could not be erased any more (worn out) and are no longer used.
    package var retiredPages = 0
    /// Dead values (replaced, removed or cleared) whose wipe had been interrupted, now zeroed.
    package var wipedValues = 0
    /// Records written but not committed when the power was cut, whose values had to be zeroed (the
    /// records themselves are ignored).
    package var rolledBackRecords = 0
    /// Torn bytes after the last record of a page, zeroed (the page is sealed).
    package var zeroedTails = 0
    /// Bits found flipped in the flash (corrected) and what could not be read (kept as it is, not used).
    package var damage: [StoreDamage] = []

    /// Whether mounting found nothing to repair and nothing damaged.
    package var isClean: Bool { self == RecoveryReport() }

    /// What the damage cost: the keys whose values fail their checks (refused on reading).
    package var damagedKeys: [UInt16] {
        damage.compactMap { if case .valueDamaged(let key) = $0.kind { key } else { nil } }
    }

    /// Whether something could not be read (beyond corrected bits).
    package var hasUnreadableDamage: Bool { damage.contains { !$0.kind.isCorrected } }

    package var description: String {
        var text =
            "erased \(erasedPages) page(s), retired \(retiredPages), wiped \(wipedValues) value(s), "
            + "rolled back \(rolledBackRecords) record(s), zeroed \(zeroedTails) torn tail(s)"
        if !damage.isEmpty {
            let corrected = damage.count { $0.kind.isCorrected }
            text += ", \(corrected) flipped bit(s) corrected, \(damage.count - corrected) damaged place(s)"
        }
        return text
    }
}

/// A place in the flash where mounting found bits that are not what the store wrote.
package struct StoreDamage: Hashable, Sendable, CustomStringConvertible {
    package enum Kind: Hashable, Sendable {
        /// One flipped bit in a page's slot B, corrected on reading.
        case pageHeaderCorrected
        /// A page whose header is damaged beyond correction but that holds records: its place in the log is lost,
        /// so its records are not applied; the page is kept as it is and taken out of use.
        case pageUnreadable
        /// One flipped bit in a record header, corrected on reading.
        case recordHeaderCorrected
        /// One flipped bit in the value of `key`, corrected on every read until a compaction copies it.
        case valueCorrected(key: UInt16)
        /// The value of `key` fails its check: reading it is refused (``StoreError/Code/damaged``); the bytes are
        /// kept until the key is written or removed.
        case valueDamaged(key: UInt16)
        /// A record whose header is damaged beyond correction, stepped over: its changes are not applied (the keys
        /// it wrote keep their earlier values, which fail their checks if they were wiped).
        case recordUnreadable(length: Int)
        /// Bytes after the last readable record of a page that are neither a record nor erased.
        case bytesUnreadable(length: Int)

        /// Whether the damage was one flipped bit, corrected.
        package var isCorrected: Bool {
            switch self {
            case .pageHeaderCorrected, .recordHeaderCorrected, .valueCorrected: true
            case .pageUnreadable, .valueDamaged, .recordUnreadable, .bytesUnreadable: false
            }
        }
    }

    /// The page.
    package var page: Int
    /// Absolute byte offset in the flash.
    package var offset: Int
    package var kind: Kind

    package var description: String {
        let hex = { (key: UInt16) in "0x" + String(key, radix: 16, uppercase: true) }
        let place = "page \(page), offset \(offset)"
        return switch kind {
        case .pageHeaderCorrected: "\(place): one flipped bit in the page header, corrected"
        case .pageUnreadable: "page \(page): the page header is damaged; its records are kept, not applied"
        case .recordHeaderCorrected: "\(place): one flipped bit in a record header, corrected"
        case .valueCorrected(let key): "\(place): one flipped bit in the value of key \(hex(key)), corrected"
        case .valueDamaged(let key): "\(place): the value of key \(hex(key)) is damaged and is not used"
        case .recordUnreadable(let length):
            "\(place): a record of \(length) bytes whose header is damaged; its changes are not applied"
        case .bytesUnreadable(let length): "\(place): \(length) bytes that are not a record; kept, not used"
        }
    }
}

/// One page as the store sees it (for inspection tools).
package struct PageSummary: Hashable, Sendable {
    /// Role of the page.
    package enum Role: Hashable, Sendable {
        /// Erased, ready to become the log tail.
        case free
        /// Part of the log, with its sequence number.
        case log(sequence: UInt32)
        /// Worn out and out of service.
        case retired
    }

    /// Page index.
    package var page: Int
    /// Role of the page.
    package var role: Role
    /// Erase count from the page header (an estimate when `eraseCountKnown` is false).
    package var eraseCount: Int
    /// Whether the erase count was read from the page header.
    package var eraseCountKnown: Bool
    /// Bytes of records written in the page (log pages), header included.
    package var usedBytes: Int
    /// Whether the page is the log tail (where the next record goes).
    package var isTail: Bool
}
