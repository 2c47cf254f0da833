/// A power-loss-safe key-value store on NOR flash: keys are `UInt16`, values are byte arrays of up to
/// ``maxValueLength`` bytes.
///
/// The store is a log of records spread over the pages of the flash; each record is one atomic transaction
/// made durable by a single commit word. Replaced, removed and cleared values are wiped (programmed to zero)
/// right after the commit. When space runs out, the oldest page is compacted: its live values are copied to
/// the log tail and it is erased. Pages are used round-robin, so their erase counts stay within one or two
/// of each other. See STORAGE.md for the format, the recovery procedure and the guarantees.
///
/// The store is a value that owns its device. A mutating call either succeeds, or throws and leaves the
/// store unchanged (``StoreError/Code/full`` and the other argument errors), or is interrupted by the
/// device (``StoreError/Code/powerCut``): then the value is stale and the device must be mounted again
/// with ``init(mounting:)``, which finishes or rolls back the interrupted operation.
package struct FlashKVStore<Device: FlashDevice>: Sendable {
    // The store's bookkeeping types do not depend on the device: declared outside this generic type, arrays and
    // dictionaries of them are specialized. Nested here, every page array access in unspecialized store code went
    // through generic metadata (counting the free pages before each write cost more than the write).
    typealias Location = StoreLocation
    typealias PageInfo = StorePageInfo
    typealias Transaction = StoreTransaction

    /// The flash the store lives in.
    package internal(set) var device: Device
    let format: StoreFormat
    var index: [UInt16: Location]
    var pages: [PageInfo]
    var tail: Int?
    var nextSequence: UInt32
    var headSequence: UInt32
    var usedBytes: Int
    var isStale = false
    /// What the mount that produced this store repaired.
    package internal(set) var recovery: RecoveryReport

    /// Gives `body` the device to change things the store does not see, such as arming a power cut.
    /// Changing the flash contents behind the store's back is undefined; mount again after that.
    package mutating func withDevice<R>(_ body: (inout Device) throws -> R) rethrows -> R {
        try body(&device)
    }

    // MARK: Limits

    /// Largest value the store accepts on `geometry`.
    package static func maxValueLength(for geometry: FlashGeometry) -> Int {
        StoreFormat(geometry: geometry).maxValueLength
    }

    /// Largest value this store accepts.
    package var maxValueLength: Int { format.maxValueLength }

    /// Largest transaction record (header, descriptors, word-rounded values and commit word) in bytes.
    package var maxTransactionSize: Int { format.maxTransactionSize }

    /// The flash geometry.
    package var geometry: FlashGeometry { format.geometry }

    // MARK: Reading

    /// The value of `key`, or `nil`.
    package func get(_ key: UInt16) throws(StoreError) -> [UInt8]? {
        try checkUsable()
        guard let location = index[key] else { return nil }
        switch try Self.readChecked(location, of: device) {
        case .intact(let value), .corrected(let value): return value
        case .damaged:
            throw StoreError(
                .damaged,
                "the value of key \(key) (page \(location.page), offset \(location.offset)) fails its check"
            )
        }
    }

    /// A value read and checked against its CRC-32 (one flipped bit corrected).
    static func readChecked(_ location: Location, of device: Device) throws(StoreError) -> StoreFormat.CheckedValue {
        do {
            return StoreFormat.checkedValue(
                try device.read(offset: location.offset, count: location.length),
                check: location.check
            )
        } catch {
            throw StoreError(flash: error)
        }
    }

    /// Whether `key` has a value.
    package func contains(_ key: UInt16) -> Bool { index[key] != nil }

    /// The length of the value of `key`, without reading it.
    package func valueLength(_ key: UInt16) -> Int? { index[key]?.length }

    /// All keys, in increasing order.
    package var keys: [UInt16] { index.keys.sorted() }

    /// Number of keys.
    package var count: Int { index.count }

    /// Every key with its value.
    package func entries() throws(StoreError) -> [UInt16: [UInt8]] {
        var result: [UInt16: [UInt8]] = [:]
        for key in index.keys { result[key] = try get(key) }
        return result
    }

    func checkUsable() throws(StoreError) {
        if isStale {
            throw StoreError(.needsRemount, "an earlier operation was interrupted; mount the device again")
        }
    }

    // MARK: Capacity and wear

    /// How full the store is.
    package var capacity: StoreCapacity {
        let usable = pages.count - Self.count(of: .retired, in: pages)
        let total = max(0, (usable - 1) * (format.payload - format.headReserve) - format.slack)
        return StoreCapacity(totalBytes: total, usedBytes: usedBytes, wordSize: format.wordSize)
    }

    /// How many of `pages` are of `kind` (a plain loop: the generic `count(where:)` was left unspecialized here).
    static func count(of kind: PageInfo.Kind, in pages: [PageInfo]) -> Int {
        var n = 0
        for i in pages.indices where pages[i].kind == kind { n += 1 }
        return n
    }

    /// Wear as recorded in the page headers.
    package var lifetime: StoreLifetime {
        let usable = pages.filter { $0.kind != .retired }
        let counts = usable.map(\.eraseCount)
        let oldest = oldestLogPage().map { pages[$0].eraseCount } ?? 0
        return StoreLifetime(
            minEraseCount: counts.min() ?? 0,
            maxEraseCount: counts.max() ?? 0,
            endurance: format.geometry.eraseEndurance,
            retiredPages: pages.count - usable.count,
            isWornOut: oldest >= format.geometry.eraseEndurance || usable.count < 3
        )
    }

    /// Every page as the store sees it.
    package var pageSummaries: [PageSummary] {
        pages.enumerated().map { page, info in
            let role: PageSummary.Role =
                switch info.kind {
                case .free: .free
                case .log: .log(sequence: info.sequence)
                case .retired: .retired
                }
            return PageSummary(
                page: page,
                role: role,
                eraseCount: info.eraseCount,
                eraseCountKnown: info.hasSlotA,
                usedBytes: info.kind == .log ? min(info.writeOffset, format.pageSize) : 0,
                isTail: page == tail
            )
        }
    }

    func oldestLogPage() -> Int? {
        var best: Int?
        for (p, info) in pages.enumerated() where info.kind == .log {
            if best == nil || info.sequence < pages[best!].sequence { best = p }
        }
        return best
    }

    // MARK: Writing

    /// Inserts or replaces the value of `key`.
    package mutating func insert(_ value: [UInt8], for key: UInt16) throws(StoreError) {
        try apply([.insert(key: key, value: value)])
    }

    /// Removes `key` and wipes its value from flash.
    package mutating func remove(_ key: UInt16) throws(StoreError) {
        try apply([.remove(key: key)])
    }

    /// Removes every key and wipes every value, atomically.
    package mutating func clear() throws(StoreError) {
        try apply([], clearingFirst: true)
    }

    /// Applies `updates` atomically: after a power cut, either all of them or none are visible. With
    /// `clearingFirst`, every existing key is removed first (in the same atomic step). Updates apply in
    /// order; the last one for a key wins.
    package mutating func apply(_ updates: [StoreUpdate], clearingFirst: Bool = false) throws(StoreError) {
        try checkUsable()
        guard let transaction = try prepare(updates, clearingFirst: clearingFirst) else { return }
        var planner = Planner(self)
        try planner.plan(transaction: transaction, device: device, index: index)
        try execute(planner, transaction: transaction)
    }

    /// Whether ``apply(_:clearingFirst:)`` would succeed now: `nil` if so, else the error it would throw.
    /// Exact: it plans the compactions the real call would make, without writing anything.
    package func canApply(_ updates: [StoreUpdate], clearingFirst: Bool = false) -> StoreError? {
        do {
            try checkUsable()
            guard let transaction = try prepare(updates, clearingFirst: clearingFirst) else { return nil }
            var planner = Planner(self)
            try planner.plan(transaction: transaction, device: device, index: index)
            return nil
        } catch {
            return error
        }
    }

    func prepare(_ updates: [StoreUpdate], clearingFirst: Bool) throws(StoreError) -> Transaction? {
        var last: [UInt16: Int] = [:]
        for (i, u) in updates.enumerated() { last[u.key] = i }
        var kept: [StoreUpdate] = []
        var growth = 0
        var valueBytes = 0
        for (i, u) in updates.enumerated() where last[u.key] == i {
            let existing = clearingFirst ? nil : index[u.key]
            switch u {
            case .insert(_, let value):
                guard value.count <= format.maxValueLength else {
                    throw StoreError(
                        .valueTooLarge,
                        "value of \(value.count) bytes, at most \(format.maxValueLength)"
                    )
                }
                growth += format.footprint(value.count)
                valueBytes += format.roundUp(value.count)
                kept.append(u)
            case .remove:
                guard existing != nil else { continue }
                kept.append(u)
            }
            if let existing { growth -= format.footprint(existing.length) }
        }
        if clearingFirst {
            guard !index.isEmpty || !kept.isEmpty else { return nil }
            growth -= usedBytes
        } else if kept.isEmpty {
            return nil
        }
        let inserts = kept.count { if case .insert = $0 { true } else { false } }
        let size = format.recordSize(
            count: inserts,
            removes: kept.count - inserts,
            valueBytes: valueBytes,
            head: false
        )
        guard size <= format.maxTransactionSize else {
            throw StoreError(.transactionTooLarge, "record of \(size) bytes, at most \(format.maxTransactionSize)")
        }
        return Transaction(clear: clearingFirst, updates: kept, recordSize: size, grows: growth > 0)
    }
}

/// Where a live value is.
struct StoreLocation: Hashable, Sendable {
    var page: Int
    /// Absolute byte offset of the value.
    var offset: Int
    var length: Int
    /// CRC-32 of the value; `nil` for a value in a format 1 page.
    var check: UInt32?
}

/// The store's view of one page.
struct StorePageInfo: Hashable, Sendable {
    enum Kind: Hashable, Sendable { case free, log, retired }
    var kind: Kind
    var eraseCount: Int
    /// Whether slot A (the erase count) is written; a free page without it is blank.
    var hasSlotA: Bool
    var sequence: UInt32 = 0
    /// Page-relative offset where the next record goes (log pages); `pageSize` when sealed.
    var writeOffset: Int = 0
}

/// A transaction, normalized: one update per key, removes of absent keys dropped.
struct StoreTransaction: Sendable {
    var clear: Bool
    var updates: [StoreUpdate]
    var recordSize: Int
    /// Whether the live footprint grows (then the slack must remain free after it).
    var grows: Bool
}

extension FlashKVStore {
    /// Free pages: at least one (the reserve that finishing a compaction needs) after every operation and mount,
    /// unless pages have been retired.
    package var freePageCount: Int { Self.count(of: .free, in: pages) }

    /// Pages retired as worn out.
    package var retiredPageCount: Int { Self.count(of: .retired, in: pages) }

    /// One line per page for diagnostics: role, sequence, where the next record goes, live bytes (no values).
    package var layoutDescription: String {
        var live = Array(repeating: 0, count: pages.count)
        for location in index.values { live[location.page] += location.length }
        return pages.indices.map { p in
            let info = pages[p]
            let role = p == tail ? "tail" : "\(info.kind)"
            return "page \(p): \(role) seq \(info.sequence) write \(info.writeOffset) live \(live[p])"
        }.joined(separator: "\n")
    }
}
