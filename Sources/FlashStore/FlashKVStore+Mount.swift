extension FlashKVStore {
    typealias Repairs = MountRepairs

    /// Mounts the store in `device`, repairing what an interrupted operation left: the operation is either
    /// finished or rolled back (a transaction is all or nothing), dead values are wiped, and pages left
    /// over by an interrupted erase or compaction are erased. Mounting is itself safe to interrupt, never
    /// traps and runs in time linear in the flash size, whatever the flash holds.
    ///
    /// A blank flash mounts as an empty store. A flash with no valid page header and data beyond the headers
    /// is refused with ``StoreError/Code/unrecognizedImage`` (nothing is written); ``format(_:)`` makes it a
    /// store.
    package init(mounting device: Device) throws(StoreError) {
        var device = device
        self = try Self.mount(&device)
    }

    /// Mounts the store in `device` like ``init(mounting:)``, repairing `device` in place: when the repair is
    /// interrupted (by a power cut), `device` holds the state the cut left, for a later mount.
    package static func mount(_ device: inout Device) throws(StoreError) -> FlashKVStore {
        var repairs = Repairs()
        var store = try FlashKVStore(scanning: device, repairs: &repairs)
        do {
            try store.repair(repairs)
        } catch {
            device = store.device
            throw error
        }
        device = store.device
        return store
    }

    /// Reads the whole flash and rebuilds the index, without writing.
    init(scanning device: Device, repairs: inout Repairs) throws(StoreError) {
        if let reason = StoreFormat.unsupportedReason(device.geometry) {
            throw StoreError(.unsupportedGeometry, reason)
        }
        let format = StoreFormat(geometry: device.geometry)
        let pageSize = format.pageSize
        let pageCount = device.geometry.pageCount

        var found: [FoundPage] = []
        found.reserveCapacity(pageCount)
        var anyValidSlot = false
        var dataWithoutHeader = false
        var damage: [StoreDamage] = []
        // Page-relative range of the bytes after the last record of a log page that are neither zeros nor erased.
        var dirtyEnds: [Int: Range<Int>] = [:]
        for page in 0..<pageCount {
            let bytes = try Self.readPage(page, pageSize: pageSize, of: device)
            let slotA = StoreFormat.decodeSlotA(bytes)
            var slotB = StoreFormat.decodeSlotBVersioned(bytes)
            if slotB == nil, let corrected = StoreFormat.correctedSlotB(bytes),
                let first = format.parseRecord(bytes, at: StoreFormat.pageHeaderSize, version: corrected.version),
                first.committed
            {
                // One flipped bit in slot B of a page whose first record reads and committed: a log page. A torn
                // page header is never followed by a committed record (slot B is written before any record).
                slotB = corrected
                damage.append(StoreDamage(page: page, offset: page * pageSize + 8, kind: .pageHeaderCorrected))
            }
            if slotA != nil || slotB != nil { anyValidSlot = true }
            if let (sequence, version) = slotB {
                let parsed = format.parseRecords(bytes, version: version)
                if case .garbage(let at) = parsed.end {
                    dirtyEnds[page] = format.dirtyWords(bytes, at..<pageSize, keepErased: true)
                }
                found.append(
                    .log(sequence: sequence, slotA: slotA, version: version, records: parsed.records, end: parsed.end)
                )
                for d in parsed.damage {
                    switch d {
                    case .headerCorrected(let offset):
                        damage.append(
                            StoreDamage(page: page, offset: page * pageSize + offset, kind: .recordHeaderCorrected)
                        )
                    case .recordUnreadable(let offset, let length):
                        damage.append(
                            StoreDamage(
                                page: page,
                                offset: page * pageSize + offset,
                                kind: .recordUnreadable(length: length)
                            )
                        )
                    }
                }
                continue
            }
            let restErased = format.isErased(bytes, from: 16)
            if (slotA != nil || format.isErased(bytes, from: 0, to: 8)) && format.isErased(bytes, from: 8, to: 16)
                && restErased
            {
                found.append(.free(slotA: slotA))
            } else if let first = Self.firstRecord(bytes, format), first.committed {
                // A committed record behind a page header that does not read: slot B is written before any record,
                // and a torn erase leaves no record whole, so this is damage. The page's place in the log is lost:
                // it is kept as it is, out of use, and reported.
                found.append(.quarantined(slotA: slotA))
                anyValidSlot = true
                damage.append(StoreDamage(page: page, offset: page * pageSize + 8, kind: .pageUnreadable))
            } else {
                found.append(.garbage(slotA: slotA))
                if !restErased { dataWithoutHeader = true }
            }
        }
        if !anyValidSlot && dataWithoutHeader {
            throw StoreError(.unrecognizedImage, "no valid page header in a flash that is not blank")
        }

        // Erase counts, the head of the log and the next sequence number.
        var knownMaxErase = 0
        var head: UInt32 = 0
        var maxSequence: UInt32?
        for f in found {
            switch f {
            case .free(let a), .garbage(let a), .quarantined(let a):
                if let a { knownMaxErase = max(knownMaxErase, a) }
            case .log(let sequence, let a, _, let records, _):
                if let a { knownMaxErase = max(knownMaxErase, a) }
                maxSequence = max(maxSequence ?? 0, sequence)
                for r in records where r.committed {
                    if let h = r.head, h <= sequence { head = max(head, h) }
                }
            }
        }

        // Replay the live log in sequence order.
        var alive: [(page: Int, sequence: UInt32)] = []
        for (page, f) in found.enumerated() {
            if case .log(let sequence, _, _, _, _) = f, sequence >= head { alive.append((page, sequence)) }
        }
        alive.sort { ($0.sequence, $0.page) < ($1.sequence, $1.page) }
        // The reserve. When no page is free or about to be erased, a compaction was cut after it opened the last
        // free page and before it erased the page it compacts. If its copy record committed, the head moved and
        // that page is dead (erased below). If not, the opened page holds no committed record: it is erased too,
        // given back as the reserve, instead of staying in the log (sealed by the torn copy, it would leave no
        // page to finish the compaction into, and the store could never write again). Nothing in it took effect.
        var unopened: [Int] = []
        let spare = found.indices.filter { page in
            switch found[page] {
            case .free, .garbage: true
            case .quarantined: false
            case .log(let sequence, _, _, _, _): sequence < head
            }
        }
        if spare.isEmpty {
            alive.removeAll { page, _ in
                guard case .log(_, _, _, let records, _) = found[page], !records.contains(where: \.committed) else {
                    return false
                }
                unopened.append(page)
                return true
            }
        }
        var index: [UInt16: Location] = [:]
        var deadValues: [Location] = []
        var uncommitted: [Range<Int>] = []
        var tornTails: [Range<Int>] = []
        var pages = [PageInfo](
            repeating: PageInfo(kind: .free, eraseCount: knownMaxErase, hasSlotA: false),
            count: pageCount
        )
        let lastAlive = alive.last?.page
        for (page, sequence) in alive {
            guard case .log(_, let slotA, let version, let records, let end) = found[page] else { continue }
            let base = page * pageSize
            for r in records {
                guard r.committed else {
                    uncommitted.append(base + r.valueStart..<base + r.commitOffset)
                    continue
                }
                if r.clear {
                    deadValues.append(contentsOf: index.values)
                    index.removeAll()
                }
                for u in r.updates {
                    if let old = index.removeValue(forKey: u.key) { deadValues.append(old) }
                    if !u.isRemove {
                        index[u.key] = Location(
                            page: page,
                            offset: base + u.valueOffset,
                            length: u.length,
                            check: u.check
                        )
                    }
                }
            }
            var writeOffset: Int
            switch end {
            case .free(let at):
                writeOffset = at
            case .garbage(let at):
                writeOffset = pageSize
                if page == lastAlive {
                    // Only the page written last can end in a torn write (recovery zeroes it before another page
                    // is opened): zero it.
                    tornTails.append(base + at..<base + pageSize)
                } else if let dirty = dirtyEnds[page] {
                    // Anywhere else it is damage: kept as it is, and reported.
                    damage.append(
                        StoreDamage(
                            page: page,
                            offset: base + dirty.lowerBound,
                            kind: .bytesUnreadable(length: dirty.count)
                        )
                    )
                }
            }
            // A format 1 page takes no new records: the next one opens a format 2 page.
            if version != StoreFormat.version { writeOffset = pageSize }
            pages[page] = PageInfo(
                kind: .log,
                eraseCount: slotA ?? knownMaxErase,
                hasSlotA: slotA != nil,
                sequence: sequence,
                writeOffset: writeOffset
            )
        }

        // Every live value is checked once: what one flipped bit explains is corrected on every read (and for good
        // by the compaction that copies it); a value that fails its check otherwise is reported and refused.
        for key in index.keys.sorted() {
            let location = index[key]!
            guard location.check != nil else { continue }
            switch try Self.readChecked(location, of: device) {
            case .intact: break
            case .corrected:
                damage.append(
                    StoreDamage(page: location.page, offset: location.offset, kind: .valueCorrected(key: key))
                )
            case .damaged:
                damage.append(StoreDamage(page: location.page, offset: location.offset, kind: .valueDamaged(key: key)))
            }
        }

        self.device = device
        self.format = format
        self.index = index
        self.pages = pages
        self.tail = alive.last?.page
        self.nextSequence = maxSequence.map { $0 == .max ? .max : $0 + 1 } ?? 1
        self.headSequence = head
        self.usedBytes = index.values.reduce(0) { $0 + format.footprint($1.length) }
        self.recovery = RecoveryReport(damage: damage)
        repairs = Repairs(
            tornTails: tornTails,
            uncommitted: uncommitted,
            deadValues: deadValues,
            found: found,
            knownMaxErase: knownMaxErase,
            head: head,
            unopened: Set(unopened)
        )
    }

    /// Repairs what the scan found. Each repair is idempotent and leaves the logical contents unchanged, so
    /// a cut during any of them is repaired by the next mount in the same way.
    mutating func repair(_ repairs: Repairs) throws(StoreError) {
        for range in repairs.tornTails {
            if try wipe(range.lowerBound, range.count, keepErased: true) { recovery.zeroedTails += 1 }
        }
        for range in repairs.uncommitted {
            if try wipe(range.lowerBound, range.count) { recovery.rolledBackRecords += 1 }
        }
        for location in repairs.deadValues {
            if try wipe(location.offset, format.roundUp(location.length)) { recovery.wipedValues += 1 }
        }
        let knownMaxErase = repairs.knownMaxErase
        for (page, f) in repairs.found.enumerated() {
            switch f {
            case .free(let slotA):
                pages[page] = PageInfo(kind: .free, eraseCount: slotA ?? knownMaxErase, hasSlotA: slotA != nil)
            case .garbage(let slotA):
                try reclaim(page, eraseCount: slotA ?? knownMaxErase)
            case .quarantined(let slotA):
                pages[page] = PageInfo(kind: .retired, eraseCount: slotA ?? knownMaxErase, hasSlotA: slotA != nil)
            case .log(let sequence, let slotA, _, _, _):
                if sequence < repairs.head || repairs.unopened.contains(page) {
                    try reclaim(page, eraseCount: slotA ?? knownMaxErase)
                }
            }
        }
    }

    /// Erases a page that holds nothing live and writes its erase count; retires it when worn out.
    private mutating func reclaim(_ page: Int, eraseCount: Int) throws(StoreError) {
        guard eraseCount < format.geometry.eraseEndurance else {
            pages[page] = PageInfo(kind: .retired, eraseCount: eraseCount, hasSlotA: false)
            recovery.retiredPages += 1
            return
        }
        do {
            try device.erase(page: page)
        } catch {
            guard error.code == .wornOut else { throw StoreError(flash: error) }
            pages[page] = PageInfo(kind: .retired, eraseCount: eraseCount, hasSlotA: false)
            recovery.retiredPages += 1
            return
        }
        try program(page * format.pageSize, StoreFormat.slotA(eraseCount: eraseCount + 1))
        pages[page] = PageInfo(kind: .free, eraseCount: eraseCount + 1, hasSlotA: true)
        recovery.erasedPages += 1
    }

    /// Makes `device` an empty store, whatever it holds: every page that is not already free is erased.
    /// Erase counts found in page headers are kept. Not atomic: a cut leaves a store that mounts (possibly
    /// with some old contents); format again.
    package static func format(_ device: Device) throws(StoreError) -> FlashKVStore {
        if let reason = StoreFormat.unsupportedReason(device.geometry) {
            throw StoreError(.unsupportedGeometry, reason)
        }
        var device = device
        let format = StoreFormat(geometry: device.geometry)
        let pageSize = format.pageSize
        var pagesToErase: [(page: Int, slotA: Int?)] = []
        var knownMax = 0
        for page in 0..<device.geometry.pageCount {
            let bytes = try Self.readPage(page, pageSize: pageSize, of: device)
            let slotA = StoreFormat.decodeSlotA(bytes)
            if let slotA { knownMax = max(knownMax, slotA) }
            let free = (slotA != nil || format.isErased(bytes, from: 0, to: 8)) && format.isErased(bytes, from: 8)
            if !free { pagesToErase.append((page, slotA)) }
        }
        for (page, slotA) in pagesToErase {
            let count = slotA ?? knownMax
            guard count < device.geometry.eraseEndurance else { continue }
            do {
                try device.erase(page: page)
                try device.program(offset: page * pageSize, bytes: StoreFormat.slotA(eraseCount: count + 1))
            } catch {
                if error.code != .wornOut { throw StoreError(flash: error) }
            }
        }
        return try FlashKVStore(mounting: device)
    }

    /// The record at the start of a page without a valid slot B, in either record format, one flipped bit corrected.
    static func firstRecord(_ bytes: [UInt8], _ format: StoreFormat) -> StoreFormat.Record? {
        for version in [StoreFormat.version, 1] {
            if let r = format.parseRecord(bytes, at: StoreFormat.pageHeaderSize, version: version)
                ?? format.correctedRecord(bytes, at: StoreFormat.pageHeaderSize, version: version)
            {
                return r
            }
        }
        return nil
    }

    /// Reads one whole page, mapping a flash error to the store's.
    static func readPage(_ page: Int, pageSize: Int, of device: Device) throws(StoreError) -> [UInt8] {
        do {
            return try device.read(offset: page * pageSize, count: pageSize)
        } catch {
            throw StoreError(flash: error)
        }
    }
}

/// A page as mounting first classifies it.
enum FoundPage {
    case free(slotA: Int?)
    case log(sequence: UInt32, slotA: Int?, version: UInt8, records: [StoreFormat.Record], end: StoreFormat.PageEnd)
    case garbage(slotA: Int?)
    /// Records behind a page header that does not read: kept, out of use.
    case quarantined(slotA: Int?)

}

/// What mounting must fix after the scan.
struct MountRepairs {
    var tornTails: [Range<Int>] = []
    var uncommitted: [Range<Int>] = []
    var deadValues: [StoreLocation] = []
    var found: [FoundPage] = []
    var knownMaxErase = 0
    var head: UInt32 = 0
    /// Log pages without a committed record: erased like dead pages.
    var unopened: Set<Int> = []
}
