extension FlashKVStore {
    typealias Step = StoreStep

    /// Decides, without writing, which pages to open and compact so that a record fits, keeping one free
    /// page in reserve for compaction. The same plan is used to answer ``canApply(_:clearingFirst:)`` and
    /// to perform ``apply(_:clearingFirst:)``, so the answer is exact.
    struct Planner {
        let format: StoreFormat
        var pages: [PageInfo]
        var tail: Int?
        var nextSequence: UInt32
        var headSequence: UInt32
        var freeCount: Int
        var steps: [Step] = []
        /// Pages written during this plan: their flash contents are not known yet, so they are not compacted.
        var written: Set<Int> = []

        init(_ store: FlashKVStore) {
            format = store.format
            pages = store.pages
            tail = store.tail
            nextSequence = store.nextSequence
            headSequence = store.headSequence
            freeCount = FlashKVStore.count(of: .free, in: store.pages)
        }

        mutating func plan(transaction: Transaction, device: Device, index: [UInt16: Location]) throws(StoreError) {
            let need = transaction.recordSize + (transaction.grows ? format.slack : 0)
            let page = try makeRoom(need, device: device, index: index)
            steps.append(.transaction(page: page, offset: pages[page].writeOffset))
            pages[page].writeOffset += transaction.recordSize
            written.insert(page)
        }

        func remaining(_ page: Int?) -> Int {
            guard let page else { return 0 }
            return format.pageSize - pages[page].writeOffset
        }

        /// Makes `need` bytes available in the tail page and returns it.
        mutating func makeRoom(_ need: Int, device: Device, index: [UInt16: Location]) throws(StoreError) -> Int {
            var compactions = 0
            while true {
                if let tail, remaining(tail) >= need { return tail }
                if freeCount >= 2 {
                    try openNextPage()
                    continue
                }
                guard compactions < pages.count, let head = oldestLogPage(), head != tail, !written.contains(head)
                else {
                    throw StoreError(.full, "no room for \(need) bytes even after compaction")
                }
                try compact(head, device: device, index: index)
                compactions += 1
            }
        }

        func oldestLogPage() -> Int? {
            var best: Int?
            for (p, info) in pages.enumerated() where info.kind == .log {
                if best == nil || info.sequence < pages[best!].sequence { best = p }
            }
            return best
        }

        /// Opens the next free page after the tail in physical order (round-robin wear levelling). A page
        /// without slot A (blank, or left so by an interrupted erase) is erased first: reading all ones
        /// does not prove that an interrupted erase finished.
        mutating func openNextPage() throws(StoreError) {
            let n = pages.count
            var chosen: Int?
            if let tail {
                for i in 1...n where pages[(tail + i) % n].kind == .free {
                    chosen = (tail + i) % n
                    break
                }
            } else {
                for (p, info) in pages.enumerated() where info.kind == .free {
                    if chosen == nil || info.eraseCount < pages[chosen!].eraseCount { chosen = p }
                }
            }
            guard let page = chosen else { throw StoreError(.full, "no free page") }
            let sequence = nextSequence
            guard sequence < UInt32.max else { throw StoreError(.wornOut, "page sequence numbers exhausted") }
            if !pages[page].hasSlotA {
                let count = pages[page].eraseCount + 1
                guard count <= format.geometry.eraseEndurance else {
                    throw StoreError(.wornOut, "page \(page) may have reached its erase endurance")
                }
                steps.append(.erase(page: page, eraseCount: count))
                pages[page].eraseCount = count
                pages[page].hasSlotA = true
            }
            nextSequence += 1
            steps.append(.open(page: page, sequence: sequence))
            pages[page].kind = .log
            pages[page].sequence = sequence
            pages[page].writeOffset = StoreFormat.pageHeaderSize
            freeCount -= 1
            tail = page
            written.insert(page)
        }

        /// Copies the live values of `head` to the tail, then erases it.
        mutating func compact(_ head: Int, device: Device, index: [UInt16: Location]) throws(StoreError) {
            guard pages[head].eraseCount < format.geometry.eraseEndurance else {
                throw StoreError(
                    .wornOut,
                    "page \(head) has been erased \(pages[head].eraseCount) times, the endurance"
                )
            }
            let live = try liveValues(in: head, device: device, index: index)
            let newHead = pages[head].sequence &+ 1
            func size(_ range: Range<Int>, head: Bool) -> Int {
                var bytes = 0
                for i in range { bytes += format.roundUp(live[i].location.length) }
                return format.recordSize(count: range.count, valueBytes: bytes, head: head)
            }
            var start = 0
            var freshPage = false
            while true {
                let room = remaining(tail)
                var end = start
                while end < live.count && size(start..<end + 1, head: end + 1 == live.count) <= room { end += 1 }
                if end == live.count && size(start..<end, head: true) <= room {
                    emitCopy(Array(live[start..<end]), head: newHead)
                    break
                }
                if end > start {
                    emitCopy(Array(live[start..<end]), head: nil)
                    start = end
                } else if freshPage {
                    throw StoreError(.full, "a live value of page \(head) does not fit in an empty page")
                }
                guard freeCount >= 1 else { throw StoreError(.full, "no free page to compact into") }
                try openNextPage()
                freshPage = true
            }
            let count = pages[head].eraseCount + 1
            steps.append(.erase(page: head, eraseCount: count))
            pages[head] = PageInfo(kind: .free, eraseCount: count, hasSlotA: true)
            freeCount += 1
            headSequence = max(headSequence, newHead)
        }

        mutating func emitCopy(_ entries: [(key: UInt16, location: Location)], head: UInt32?) {
            let page = tail!
            let offset = pages[page].writeOffset
            var bytes = 0
            for e in entries { bytes += format.roundUp(e.location.length) }
            steps.append(.copy(page: page, offset: offset, entries: entries, head: head))
            pages[page].writeOffset += format.recordSize(count: entries.count, valueBytes: bytes, head: head != nil)
            written.insert(page)
        }

        /// The values of `page` that the index points to, in page order.
        func liveValues(
            in page: Int,
            device: Device,
            index: [UInt16: Location]
        ) throws(StoreError) -> [(key: UInt16, location: Location)] {
            let bytes: [UInt8]
            do {
                bytes = try device.read(offset: page * format.pageSize, count: format.pageSize)
            } catch {
                throw StoreError(flash: error)
            }
            let base = page * format.pageSize
            var live: [(key: UInt16, location: Location)] = []
            for record in format.parseRecords(bytes, version: StoreFormat.pageVersion(bytes)).records
            where record.committed {
                for u in record.updates where !u.isRemove {
                    let location = Location(page: page, offset: base + u.valueOffset, length: u.length, check: u.check)
                    if index[u.key] == location { live.append((u.key, location)) }
                }
            }
            return live
        }
    }
}

/// One flash-level step of a plan.
enum StoreStep: Sendable {
    /// Make a free page the new log tail: program slot B of its header.
    case open(page: Int, sequence: UInt32)
    /// Copy live values (compaction) into a record at `offset` of `page`, optionally advancing the head.
    case copy(page: Int, offset: Int, entries: [(key: UInt16, location: StoreLocation)], head: UInt32?)
    /// Erase a compacted page and program its slot A with the new erase count.
    case erase(page: Int, eraseCount: Int)
    /// Write and commit the transaction record at `offset` of `page`, then wipe what it replaced.
    case transaction(page: Int, offset: Int)
}
