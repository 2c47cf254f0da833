/// Sizes and encodings of the on-flash format (see STORAGE.md). Everything is little-endian.
package struct StoreFormat: Sendable {
    package static let version: UInt8 = 1
    package static let slotATag: UInt8 = 0xE5
    package static let slotBTag: UInt8 = 0x5B
    package static let recordTag: UInt8 = 0xA7
    package static let flagClear: UInt8 = 0x01
    package static let flagHead: UInt8 = 0x02
    package static let removeBit: UInt16 = 0x8000
    package static let pageHeaderSize = 16

    package let geometry: FlashGeometry
    package let wordSize: Int
    package let pageSize: Int

    package init(geometry: FlashGeometry) {
        self.geometry = geometry
        wordSize = geometry.wordSize
        pageSize = geometry.pageSize
    }

    /// Why the store cannot run on `geometry`, or `nil`.
    package static func unsupportedReason(_ geometry: FlashGeometry) -> String? {
        if let error = geometry.validationError { return error }
        if geometry.wordSize < 4 || geometry.wordSize > 8 { return "the store needs 4- or 8-byte words" }
        if geometry.pageSize < 128 || geometry.pageSize > 32768 { return "the store needs pages of 128 B to 32 KiB" }
        if geometry.pageCount < 3 { return "the store needs at least 3 pages" }
        if geometry.maxProgramsPerWord < 2 && !geometry.allowsZeroOverwrite {
            return "the store needs 2 programs per word, or zero overwrites, to wipe deleted values"
        }
        return nil
    }

    package func roundUp(_ n: Int) -> Int { (n + wordSize - 1) / wordSize * wordSize }

    /// Bytes of a page available to records.
    package var payload: Int { pageSize - Self.pageHeaderSize }
    /// Room kept in every record budget so a compaction record can carry the head field.
    package var headReserve: Int { max(8, wordSize) }
    /// Size of a record removing 4 keys: what a growing transaction must leave free after it.
    package var slack: Int { recordSize(count: 4, valueBytes: 0, head: false) }
    /// Largest transaction record.
    package var maxTransactionSize: Int { payload - headReserve - slack }
    /// Largest value.
    package var maxValueLength: Int {
        min(32767, maxTransactionSize - recordSize(count: 1, valueBytes: 0, head: false))
    }

    package func descriptorAreaSize(count: Int, head: Bool) -> Int { roundUp(8 + 4 * count + (head ? 4 : 0)) }

    /// Record size; `valueBytes` is the sum of the word-rounded value areas.
    package func recordSize(count: Int, valueBytes: Int, head: Bool) -> Int {
        descriptorAreaSize(count: count, head: head) + valueBytes + wordSize
    }

    /// What a value costs when it sits alone in a record: the unit of capacity accounting.
    package func footprint(_ length: Int) -> Int { recordSize(count: 1, valueBytes: roundUp(length), head: false) }

    // MARK: Page header

    private static func check16(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        UInt16(truncatingIfNeeded: CRC32.checksum(bytes))
    }

    package static func slotA(eraseCount: Int) -> [UInt8] {
        var b: [UInt8] = [slotATag, version]
        b.appendLE(UInt32(clamping: eraseCount))
        b.appendLE(check16(b[0..<6]))
        return b
    }

    package static func slotB(sequence: UInt32) -> [UInt8] {
        var b: [UInt8] = [slotBTag, version]
        b.appendLE(sequence)
        b.appendLE(check16(b[0..<6]))
        return b
    }

    /// The erase count in slot A (bytes 0..<8 of `page`), or `nil` when the slot is not valid.
    package static func decodeSlotA(_ page: [UInt8]) -> Int? {
        guard page.count >= 8, page[0] == slotATag, page[1] == version,
            page.readLE16(6) == check16(page[0..<6])
        else { return nil }
        return Int(page.readLE32(2))
    }

    /// The sequence number in slot B (bytes 8..<16 of `page`), or `nil` when the slot is not valid.
    package static func decodeSlotB(_ page: [UInt8]) -> UInt32? {
        guard page.count >= 16, page[8] == slotBTag, page[9] == version,
            page.readLE16(14) == check16(page[8..<14])
        else { return nil }
        return page.readLE32(10)
    }

    // MARK: Records

    /// One update as stored in a record.
    package struct Update: Sendable {
        package var key: UInt16
        package var isRemove: Bool
        /// Page-relative offset of the value.
        package var valueOffset: Int
        package var length: Int
    }

    /// A record parsed from a page.
    package struct Record: Sendable {
        package var offset: Int
        package var clear: Bool
        package var head: UInt32?
        package var updates: [Update]
        package var valueStart: Int
        package var commitOffset: Int
        package var committed: Bool
        package var end: Int { commitOffset }
    }

    /// How a page's record area ends.
    package enum PageEnd: Sendable, Equatable {
        /// Erased from this page-relative offset to the end: appendable.
        case free(at: Int)
        /// Bytes from this offset on are not a record: the page is sealed.
        case garbage(at: Int)
    }

    /// Encodes a record without its commit word. `values[i]` is the value of `updates[i]` (empty for removes).
    package func encodeRecord(clear: Bool, head: UInt32?, updates: [(key: UInt16, value: [UInt8]?)]) -> [UInt8] {
        var b: [UInt8] = [Self.recordTag, (clear ? Self.flagClear : 0) | (head != nil ? Self.flagHead : 0)]
        b.appendLE(UInt16(updates.count))
        b += [0, 0, 0, 0]
        for u in updates {
            b.appendLE(u.key)
            b.appendLE(u.value == nil ? Self.removeBit : UInt16(u.value!.count))
        }
        if let head { b.appendLE(head) }
        let crc = CRC32.checksum(b[0..<4] + b[8...])
        b.replaceSubrange(4..<8, with: crc.littleEndianBytes)
        while b.count % wordSize != 0 { b.append(0xFF) }
        for u in updates {
            guard let value = u.value else { continue }
            b += value
            while b.count % wordSize != 0 { b.append(0xFF) }
        }
        return b
    }

    /// Parses the records of a page (`page` holds the whole page). Never traps, whatever the bytes.
    package func parseRecords(_ page: [UInt8]) -> (records: [Record], end: PageEnd) {
        var records: [Record] = []
        var at = Self.pageHeaderSize
        let w = wordSize
        while at < pageSize {
            let first = page[at]
            if first == 0xFF && isWordErased(page, at) {
                return (records, isErased(page, from: at) ? .free(at: at) : .garbage(at: at))
            }
            guard first == Self.recordTag, at + 8 <= pageSize else { return (records, .garbage(at: at)) }
            let flags = page[at + 1]
            guard flags & ~(Self.flagClear | Self.flagHead) == 0 else { return (records, .garbage(at: at)) }
            let count = Int(page.readLE16(at + 2))
            let hasHead = flags & Self.flagHead != 0
            let descriptorsEnd = at + 8 + 4 * count + (hasHead ? 4 : 0)
            let areaEnd = at + descriptorAreaSize(count: count, head: hasHead)
            guard areaEnd <= pageSize else { return (records, .garbage(at: at)) }
            var crc = CRC32.update(0xFFFF_FFFF, page[at..<at + 4])
            crc = ~CRC32.update(crc, page[at + 8..<descriptorsEnd])
            guard crc == page.readLE32(at + 4) else { return (records, .garbage(at: at)) }
            var updates: [Update] = []
            updates.reserveCapacity(count)
            var valueAt = areaEnd
            var valid = true
            for i in 0..<count {
                let d = at + 8 + 4 * i
                let key = page.readLE16(d)
                let info = page.readLE16(d + 2)
                let isRemove = info & Self.removeBit != 0
                let length = Int(info & ~Self.removeBit)
                if isRemove && length != 0 { valid = false; break }
                if valueAt + length > pageSize { valid = false; break }
                updates.append(Update(key: key, isRemove: isRemove, valueOffset: valueAt, length: length))
                valueAt += roundUp(length)
            }
            guard valid, valueAt + w <= pageSize else { return (records, .garbage(at: at)) }
            let head = hasHead ? page.readLE32(descriptorsEnd - 4) : nil
            let committed = !isWordErased(page, valueAt)
            records.append(
                Record(
                    offset: at, clear: flags & Self.flagClear != 0, head: head, updates: updates,
                    valueStart: areaEnd, commitOffset: valueAt, committed: committed))
            at = valueAt + w
        }
        return (records, .free(at: pageSize))
    }

    package func isWordErased(_ page: [UInt8], _ at: Int) -> Bool {
        for i in at..<at + wordSize where page[i] != 0xFF { return false }
        return true
    }

    package func isErased(_ page: [UInt8], from: Int, to: Int? = nil) -> Bool {
        for i in from..<(to ?? page.count) where page[i] != 0xFF { return false }
        return true
    }

    /// The smallest word-aligned range within `range` (page-relative) covering every word that is not all
    /// zeros (and, when `keepErased`, not all ones either), or `nil` if there is none.
    package func dirtyWords(_ page: [UInt8], _ range: Range<Int>, keepErased: Bool) -> Range<Int>? {
        var first: Int?
        var last = 0
        var at = range.lowerBound
        while at < range.upperBound {
            var zero = true
            var ones = true
            for i in at..<at + wordSize {
                if page[i] != 0 { zero = false }
                if page[i] != 0xFF { ones = false }
            }
            if !zero && !(keepErased && ones) {
                if first == nil { first = at }
                last = at + wordSize
            }
            at += wordSize
        }
        return first.map { $0..<last }
    }
}

extension Array where Element == UInt8 {
    mutating func appendLE(_ v: UInt16) {
        append(UInt8(truncatingIfNeeded: v))
        append(UInt8(truncatingIfNeeded: v >> 8))
    }

    mutating func appendLE(_ v: UInt32) { append(contentsOf: v.littleEndianBytes) }

    func readLE16(_ at: Int) -> UInt16 { UInt16(self[at]) | UInt16(self[at + 1]) << 8 }

    func readLE32(_ at: Int) -> UInt32 {
        UInt32(self[at]) | UInt32(self[at + 1]) << 8 | UInt32(self[at + 2]) << 16 | UInt32(self[at + 3]) << 24
    }
}

extension UInt32 {
    var littleEndianBytes: [UInt8] {
        [
            UInt8(truncatingIfNeeded: self), UInt8(truncatingIfNeeded: self >> 8),
            UInt8(truncatingIfNeeded: self >> 16), UInt8(truncatingIfNeeded: self >> 24),
        ]
    }
}
