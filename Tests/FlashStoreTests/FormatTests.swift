import FlashStore
import Testing

@Suite("On-flash format")
struct FormatTests {
    @Test func crc32KnownAnswers() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
        #expect(CRC32.checksum(Array("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
    }

    @Test func pageHeaderSlotsRoundTrip() {
        let page = StoreFormat.slotA(eraseCount: 1234) + StoreFormat.slotB(sequence: 0xABCD_EF01)
        #expect(StoreFormat.decodeSlotA(page) == 1234)
        #expect(StoreFormat.decodeSlotB(page) == 0xABCD_EF01)
        var broken = page
        broken[3] ^= 1
        #expect(StoreFormat.decodeSlotA(broken) == nil)
        #expect(StoreFormat.decodeSlotA([UInt8](repeating: 0xFF, count: 16)) == nil)
    }

    @Test(arguments: [FlashGeometry.tiny, .stm32l4(pages: 3)])
    func recordRoundTrip(geometry: FlashGeometry) {
        let format = StoreFormat(geometry: geometry)
        let body = format.encodeRecord(
            clear: true,
            head: 77,
            updates: [(1, [1, 2, 3], nil), (2, nil, nil), (3, [], nil)]
        )
        #expect(body.count % geometry.wordSize == 0)
        #expect(
            body.count + geometry.wordSize
                == format.recordSize(count: 2, removes: 1, valueBytes: format.roundUp(3), head: true)
        )
        var page = [UInt8](repeating: 0xFF, count: geometry.pageSize)
        page.replaceSubrange(16..<16 + body.count, with: body)
        var parsed = format.parseRecords(page)
        #expect(parsed.records.count == 1)
        #expect(parsed.records[0].committed == false)
        #expect(parsed.records[0].clear && parsed.records[0].head == 77)
        #expect(parsed.records[0].updates.map(\.key) == [1, 2, 3])
        #expect(parsed.records[0].updates.map(\.isRemove) == [false, true, false])
        let valueAt = parsed.records[0].updates[0].valueOffset
        #expect(Array(page[valueAt..<valueAt + 3]) == [1, 2, 3])
        #expect(parsed.end == .free(at: 16 + body.count + geometry.wordSize))
        #expect(parsed.records[0].updates.map(\.check) == [CRC32.checksum([1, 2, 3]), nil, CRC32.checksum([])])
        page[16 + body.count] = 0xFE  // one cleared bit: a torn commit, rolled back
        #expect(format.parseRecords(page).records[0].committed == false)
        for i in 0..<geometry.wordSize { page[16 + body.count + i] = 0 }
        parsed = format.parseRecords(page)
        #expect(parsed.records[0].committed)
        page[17] ^= 0x80  // one flipped bit in the flags: corrected
        parsed = format.parseRecords(page)
        #expect(parsed.records.count == 1 && parsed.damage == [.headerCorrected(offset: 16)])
        page[17] ^= 0x40  // two: stepped over by the length word, the record's changes not applied
        parsed = format.parseRecords(page)
        #expect(
            parsed.records.isEmpty
                && parsed.damage == [.recordUnreadable(offset: 16, length: body.count + geometry.wordSize)]
        )
        page[16 + 8] ^= 1  // and the length word too: the page is sealed there
        #expect(format.parseRecords(page).end == .garbage(at: 16))
    }

    @Test func parsingRandomPagesNeverTraps() {
        let format = StoreFormat(geometry: .tiny)
        var rng = SplitMix64(seed: 1)
        for round in 0..<3000 {
            var page = [UInt8](repeating: 0xFF, count: 256)
            // Mostly valid-looking headers with random counts and lengths.
            for i in 16..<256 where round % 3 != 0 || i < 64 { page[i] = UInt8(truncatingIfNeeded: rng.next()) }
            page[16] = 0xA7
            page[17] = UInt8(rng.next() % 4)
            let parsed = format.parseRecords(page)
            for r in parsed.records {
                #expect(r.commitOffset + 4 <= 256)
                for u in r.updates { #expect(u.valueOffset + u.length <= 256) }
            }
        }
    }

    @Test func documentedLimits() {
        #expect(FlashKVStore<SimulatedFlash>.maxValueLength(for: .nrf52840) == 4008)
        #expect(FlashKVStore<SimulatedFlash>.maxValueLength(for: .stm32l4) == 1944)
        #expect(FlashKVStore<SimulatedFlash>.maxValueLength(for: .tiny) == 168)
        let nrf = StoreFormat(geometry: .nrf52840)
        #expect(nrf.maxTransactionSize == 4032)
        #expect(nrf.footprint(260) == 284)
        #expect(nrf.footprint(4) == 28)
        #expect(StoreFormat(geometry: .stm32l4).footprint(260) == 296)
        #expect(StoreFormat(geometry: .stm32l4).footprint(4) == 40)
    }
}
