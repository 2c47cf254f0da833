/// Sizes and encodings of the on-flash format (see storage.md). Everything is little-endian.
///
/// Format 2 (written by this build) gives every value a CRC-32 in its descriptor and every record a self-checked
/// length word; format 1 pages (no value checks, 4-byte descriptors) are still read, and left by compaction.
package struct StoreFormat: Sendable {
    package static let version: UInt8 = 2
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
    /// What a growing transaction must leave free after it: room for a record removing 4 keys, or removing 3 and
    /// inserting a value of up to one word (the first step of a reset on a full store).
    package var slack: Int {
        max(
            recordSize(count: 0, removes: 4, valueBytes: 0, head: false),
            recordSize(count: 1, removes: 3, valueBytes: wordSize, head: false)
        )
    }
    /// Largest transaction record.
    package var maxTransactionSize: Int { payload - headReserve - slack }
    /// Largest value.
    package var maxValueLength: Int {
        min(32767, maxTransactionSize - recordSize(count: 1, valueBytes: 0, head: false))
    }

    /// Bytes before the descriptors: tag, flags, count, header CRC (both formats), then the length word (format 2).
    package static func headerSize(_ version: UInt8) -> Int { version == 1 ? 8 : 12 }
    /// Bytes of the descriptor of an insert: key and info (both formats), then the value's CRC-32 (format 2). A
    /// removal's descriptor is key and info only.
    package static func descriptorSize(_ version: UInt8) -> Int { version == 1 ? 4 : 8 }

    /// Bytes before the first value of a record of `count` inserts and `removes` removals.
    package func descriptorAreaSize(count: Int, removes: Int = 0, head: Bool, version: UInt8 = Self.version) -> Int {
        roundUp(Self.headerSize(version) + Self.descriptorSize(version) * count + 4 * removes + (head ? 4 : 0))
    }

    /// Record size (format 2) of `count` inserts and `removes` removals; `valueBytes` is the sum of the
    /// word-rounded value areas.
    package func recordSize(count: Int, removes: Int = 0, valueBytes: Int, head: Bool) -> Int {
        descriptorAreaSize(count: count, removes: removes, head: head) + valueBytes + wordSize
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
        guard page.count >= 8, page[0] == slotATag, page[1] == 1 || page[1] == version,
            page.readLE16(6) == check16(page[0..<6])
        else { return nil }
        return Int(page.readLE32(2))
    }

    /// The sequence number in slot B (bytes 8..<16 of `page`), or `nil` when the slot is not valid.
    package static func decodeSlotB(_ page: [UInt8]) -> UInt32? { decodeSlotBVersioned(page)?.sequence }

    /// Slot B's sequence number and the record format of the page it opens.
    package static func decodeSlotBVersioned(_ page: [UInt8]) -> (sequence: UInt32, version: UInt8)? {
        guard page.count >= 16, page[8] == slotBTag, page[9] == 1 || page[9] == version,
            page.readLE16(14) == check16(page[8..<14])
        else { return nil }
        return (page.readLE32(10), page[9])
    }

    /// Slot B read as if one of its 64 bits were flipped back, when exactly one flip makes it valid. The caller
    /// must confirm it (a torn page header is also a few bits away from a valid one).
    package static func correctedSlotB(_ page: [UInt8]) -> (sequence: UInt32, version: UInt8)? {
        guard page.count >= 16 else { return nil }
        var copy = Array(page[0..<16])
        var found: (sequence: UInt32, version: UInt8)?
        for bit in 64..<128 {
            copy[bit / 8] ^= 1 << UInt8(bit % 8)
            if let valid = decodeSlotBVersioned(copy) {
                if found != nil { return nil }
                found = valid
            }
            copy[bit / 8] ^= 1 << UInt8(bit % 8)
        }
        return found
    }

    /// The record format of a log page, from its slot B (as mount read it, one flipped bit corrected).
    package static func pageVersion(_ page: [UInt8]) -> UInt8 {
        (decodeSlotBVersioned(page) ?? correctedSlotB(page))?.version ?? version
    }

    // MARK: Records

    /// One update as stored in a record.
    package struct Update: Sendable {
        package var key: UInt16
        package var isRemove: Bool
        /// Page-relative offset of the value.
        package var valueOffset: Int
        package var length: Int
        /// CRC-32 of the value (format 2); `nil` in format 1 pages.
        package var check: UInt32?
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

    /// What parsing a page read past: damage it corrected or could not read (page-relative offsets).
    package enum RecordDamage: Sendable, Equatable {
        /// One flipped bit of the record header at this offset, corrected.
        case headerCorrected(offset: Int)
        /// A record whose header is damaged beyond correction, skipped by its length word: its updates are not
        /// applied, its bytes are kept.
        case recordUnreadable(offset: Int, length: Int)
    }

    /// A page's records, how the record area ends, and the damage read past.
    package struct ParsedPage: Sendable {
        package var records: [Record] = []
        package var end: PageEnd = .free(at: 0)
        package var damage: [RecordDamage] = []
    }

    /// One update to encode: `value` nil for a removal; `check` the value's CRC-32 when it must be kept as stored
    /// (the copy of a damaged value stays detectably damaged), else computed.
    package typealias EncodedUpdate = (key: UInt16, value: [UInt8]?, check: UInt32?)

    /// Encodes a format 2 record without its commit word. `updates[i].value` is nil for removes.
    package func encodeRecord(clear: Bool, head: UInt32?, updates: [EncodedUpdate]) -> [UInt8] {
        var valueBytes = 0
        for u in updates { valueBytes += roundUp(u.value?.count ?? 0) }
        let inserts = updates.count { $0.value != nil }
        let length = recordSize(
            count: inserts,
            removes: updates.count - inserts,
            valueBytes: valueBytes,
            head: head != nil
        )
        var b: [UInt8] = [Self.recordTag, (clear ? Self.flagClear : 0) | (head != nil ? Self.flagHead : 0)]
        b.appendLE(UInt16(updates.count))
        b += [0, 0, 0, 0]
        b += Self.lengthWord(length)
        for u in updates {
            b.appendLE(u.key)
            b.appendLE(u.value == nil ? Self.removeBit : UInt16(u.value!.count))
            if let value = u.value { b.appendLE(u.check ?? CRC32.checksum(value)) }
        }
        if let head { b.appendLE(head) }
        let crc = CRC32.checksum(b[0..<4] + b[12...])
        b.replaceSubrange(4..<8, with: crc.littleEndianBytes)
        while b.count % wordSize != 0 { b.append(0xFF) }
        for u in updates {
            guard let value = u.value else { continue }
            b += value
            while b.count % wordSize != 0 { b.append(0xFF) }
        }
        return b
    }

    /// The length word of a format 2 record: its length in bytes (commit word included) and a check of its own,
    /// so that a record whose header is damaged can still be stepped over.
    static func lengthWord(_ length: Int) -> [UInt8] {
        var b: [UInt8] = []
        b.appendLE(UInt16(length))
        b.appendLE(lengthCheck(length))
        return b
    }

    private static func lengthCheck(_ length: Int) -> UInt16 {
        UInt16(truncatingIfNeeded: CRC32.checksum([recordTag, UInt8(length & 0xFF), UInt8(length >> 8 & 0xFF)]))
    }

    /// Whether the length word of the record at `at` says `length`, with its check.
    private func lengthWordSays(_ length: Int, _ page: [UInt8], at: Int) -> Bool {
        Int(page.readLE16(at + 8)) == length && page.readLE16(at + 10) == Self.lengthCheck(length)
    }

    /// Parses the records of a page (`page` holds the whole page) written in record format `version`. Never
    /// traps, whatever the bytes; a damaged header is corrected when one flipped bit explains it, else stepped
    /// over by its length word when that is intact and the record committed.
    package func parseRecords(_ page: [UInt8], version: UInt8 = Self.version) -> ParsedPage {
        var parsed = ParsedPage()
        var at = Self.pageHeaderSize
        while at < pageSize {
            if page[at] == 0xFF && isWordErased(page, at) {
                parsed.end = isErased(page, from: at) ? .free(at: at) : .garbage(at: at)
                return parsed
            }
            if let record = parseRecord(page, at: at, version: version) {
                parsed.records.append(record)
                at = record.commitOffset + wordSize
                // The length word is not covered by the header CRC: a flipped bit there is harmless, but reported.
                if version != 1, !lengthWordSays(at - record.offset, page, at: record.offset) {
                    parsed.damage.append(.headerCorrected(offset: record.offset))
                }
                continue
            }
            if let record = correctedRecord(page, at: at, version: version) {
                parsed.records.append(record)
                parsed.damage.append(.headerCorrected(offset: at))
                at = record.commitOffset + wordSize
                continue
            }
            if version != 1, let length = skippableLength(page, at: at) {
                parsed.damage.append(.recordUnreadable(offset: at, length: length))
                at += length
                continue
            }
            parsed.end = .garbage(at: at)
            return parsed
        }
        parsed.end = .free(at: pageSize)
        return parsed
    }

    /// The record at `at` when its header checks, else `nil`.
    func parseRecord(_ page: [UInt8], at: Int, version: UInt8) -> Record? {
        let w = wordSize
        let headerSize = Self.headerSize(version)
        let descriptorSize = Self.descriptorSize(version)
        guard page[at] == Self.recordTag, at + headerSize <= pageSize else { return nil }
        let flags = page[at + 1]
        guard flags & ~(Self.flagClear | Self.flagHead) == 0 else { return nil }
        let count = Int(page.readLE16(at + 2))
        let hasHead = flags & Self.flagHead != 0
        // Descriptors: an insert's is `descriptorSize` bytes, a removal's 4 (format 1: 4 bytes each).
        var descriptorAt = at + headerSize
        var descriptors: [(offset: Int, isRemove: Bool, length: Int)] = []
        descriptors.reserveCapacity(count)
        for _ in 0..<count {
            guard descriptorAt + 4 <= pageSize else { return nil }
            let info = page.readLE16(descriptorAt + 2)
            let isRemove = info & Self.removeBit != 0
            let length = Int(info & ~Self.removeBit)
            if isRemove && length != 0 { return nil }
            descriptors.append((descriptorAt, isRemove, length))
            descriptorAt += isRemove ? 4 : descriptorSize
        }
        let descriptorsEnd = descriptorAt + (hasHead ? 4 : 0)
        let areaEnd = at + roundUp(descriptorsEnd - at)
        guard areaEnd <= pageSize else { return nil }
        guard headerCRC(page, at: at, version: version, descriptorsEnd: descriptorsEnd) == page.readLE32(at + 4)
        else { return nil }
        var updates: [Update] = []
        updates.reserveCapacity(count)
        var valueAt = areaEnd
        for d in descriptors {
            if valueAt + d.length > pageSize { return nil }
            let check = version == 1 || d.isRemove ? nil : page.readLE32(d.offset + 4)
            updates.append(
                Update(
                    key: page.readLE16(d.offset),
                    isRemove: d.isRemove,
                    valueOffset: valueAt,
                    length: d.length,
                    check: check
                )
            )
            valueAt += roundUp(d.length)
        }
        guard valueAt + w <= pageSize else { return nil }
        let head = hasHead ? page.readLE32(descriptorsEnd - 4) : nil
        return Record(
            offset: at,
            clear: flags & Self.flagClear != 0,
            head: head,
            updates: updates,
            valueStart: areaEnd,
            commitOffset: valueAt,
            committed: isCommitted(page, valueAt, version: version)
        )
    }

    /// Format 1: any cleared bit commits. Format 2: two cleared bits do, so that one bit flipped in the erased
    /// commit word of a rolled-back record does not commit it (a torn commit that cleared one bit rolls back).
    func isCommitted(_ page: [UInt8], _ at: Int, version: UInt8) -> Bool {
        var zeros = 0
        for i in at..<at + wordSize { zeros += 8 - page[i].nonzeroBitCount }
        return version == 1 ? zeros > 0 : zeros >= 2
    }

    private func headerCRC(_ page: [UInt8], at: Int, version: UInt8, descriptorsEnd: Int) -> UInt32 {
        let crc = CRC32.update(0xFFFF_FFFF, page[at..<at + 4])
        return ~CRC32.update(crc, page[at + Self.headerSize(version)..<descriptorsEnd])
    }

    /// The record at `at` read with one bit flipped back, when exactly one flip (in the tag, flags and count, in
    /// the stored CRC, or in the descriptors) makes its header check.
    func correctedRecord(_ page: [UInt8], at: Int, version: UInt8) -> Record? {
        // One flip cannot make a record of bytes whose tag is two or more bits off (a zeroed tail, say).
        guard at + Self.headerSize(version) <= pageSize, (page[at] ^ Self.recordTag).nonzeroBitCount <= 1
        else { return nil }
        var copy = page
        var found: Record?
        var ambiguous = false
        func attempt(_ offset: Int, _ bit: Int) {
            copy[offset] ^= 1 << UInt8(bit)
            if let record = parseRecord(copy, at: at, version: version) {
                if found != nil { ambiguous = true }
                found = record
            }
            copy[offset] ^= 1 << UInt8(bit)
        }
        for offset in at..<at + 4 { for bit in 0..<8 { attempt(offset, bit) } }
        // A flip outside tag, flags and count leaves the header's extent as stored: its CRC syndrome names the bit.
        let count = Int(page.readLE16(at + 2))
        let hasHead = page[at + 1] & Self.flagHead != 0
        let headerSize = Self.headerSize(version)
        var descriptorsEnd = at + headerSize
        for _ in 0..<count where descriptorsEnd + 4 <= pageSize {
            descriptorsEnd += page.readLE16(descriptorsEnd + 2) & Self.removeBit != 0 ? 4 : Self.descriptorSize(version)
        }
        descriptorsEnd += hasHead ? 4 : 0
        // (A flip in a removal bit changes the extent too; those 2 bits per descriptor are tried one by one below.)
        if descriptorsEnd <= pageSize {
            let computed = headerCRC(page, at: at, version: version, descriptorsEnd: descriptorsEnd)
            let stored = page.readLE32(at + 4)
            switch CRC32.locateSingleBitError(
                count: descriptorsEnd - at - headerSize + 4,
                computed: computed,
                stored: stored
            ) {
            case .checksum:
                let bit = (computed ^ stored).trailingZeroBitCount
                attempt(at + 4 + bit / 8, bit % 8)
            case .message(let byte, let bit) where byte >= 4:
                attempt(at + headerSize + byte - 4, bit)
            default:
                break
            }
        }
        if found == nil {
            var d = at + headerSize
            for _ in 0..<count where d + 4 <= pageSize {
                attempt(d + 3, 7)
                d += page.readLE16(d + 2) & Self.removeBit != 0 ? 4 : Self.descriptorSize(version)
            }
        }
        return ambiguous ? nil : found
    }

    /// The length of a format 2 record at `at` whose header does not check, when it can be stepped over: its length
    /// word checks, its commit word is committed (a torn write never is: its commit word is programmed after the
    /// body), and what follows is a record, erased space or the page end.
    func skippableLength(_ page: [UInt8], at: Int) -> Int? {
        guard let length = lengthWordValue(page, at: at) else { return nil }
        let end = at + length
        guard isCommitted(page, end - wordSize, version: Self.version) else { return nil }
        if end == pageSize || isErased(page, from: end) { return length }
        if parseRecord(page, at: end, version: Self.version) != nil || lengthWordValue(page, at: end) != nil {
            return length
        }
        return correctedRecord(page, at: end, version: Self.version) != nil ? length : nil
    }

    private func lengthWordValue(_ page: [UInt8], at: Int) -> Int? {
        guard at + 12 <= pageSize else { return nil }
        let length = Int(page.readLE16(at + 8))
        guard lengthWordSays(length, page, at: at),
            length >= descriptorAreaSize(count: 0, head: false) + wordSize, length % wordSize == 0,
            at + length <= pageSize
        else { return nil }
        return length
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

    /// A value as stored, checked against its CRC-32: intact, corrected (one flipped bit), or damaged.
    package static func checkedValue(_ stored: [UInt8], check: UInt32?) -> CheckedValue {
        guard let check else { return .intact(stored) }
        let computed = CRC32.checksum(stored)
        if computed == check { return .intact(stored) }
        switch CRC32.locateSingleBitError(count: stored.count, computed: computed, stored: check) {
        case .checksum: return .corrected(stored)
        case .message(let byte, let bit):
            var fixed = stored
            fixed[byte] ^= 1 << UInt8(bit)
            return .corrected(fixed)
        case nil: return .damaged
        }
    }

    package enum CheckedValue: Equatable, Sendable {
        case intact([UInt8])
        case corrected([UInt8])
        case damaged
    }
}

extension Array where Element == UInt8 {
    mutating func appendLE(_ v: UInt16) {
        append(UInt8(truncatingIfNeeded: v))
        append(UInt8(truncatingIfNeeded: v >> 8))
    }

    mutating func appendLE(_ v: UInt32) { append(contentsOf: v.littleEndianBytes) }

    func readLE16(_ at: Int) -> UInt16 { UInt16(self[at]) | UInt16(self[at + 1]) << 8 }

    package func readLE32(_ at: Int) -> UInt32 {
        UInt32(self[at]) | UInt32(self[at + 1]) << 8 | UInt32(self[at + 2]) << 16 | UInt32(self[at + 3]) << 24
    }
}

extension UInt32 {
    package var littleEndianBytes: [UInt8] {
        [
            UInt8(truncatingIfNeeded: self), UInt8(truncatingIfNeeded: self >> 8),
            UInt8(truncatingIfNeeded: self >> 16), UInt8(truncatingIfNeeded: self >> 24),
        ]
    }
}
