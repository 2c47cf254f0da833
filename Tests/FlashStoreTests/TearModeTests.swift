import FlashStore
import Testing

@Suite("Power cuts and tear modes")
struct TearModeTests {
    static let old: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0xF0, 0xF0, 0xF0, 0xF0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    ]
    static let new: [UInt8] = [
        0x00, 0x11, 0x22, 0x33, 0x00, 0x10, 0x20, 0x30, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB,
    ]

    func prepared() throws -> SimulatedFlash {
        var flash = SimulatedFlash(geometry: .tiny)
        try flash.program(offset: 4, bytes: [0xF0, 0xF0, 0xF0, 0xF0])
        return flash
    }

    func cut(_ tear: TearMode) throws -> SimulatedFlash {
        var flash = try prepared()
        flash.armPowerCut(atMutation: 1, tear: tear)
        #expect(throws: FlashError.powerCut) { try flash.program(offset: 0, bytes: Self.new) }
        return flash
    }

    @Test func afterACutEverythingFailsUntilRepowered() throws {
        var flash = try cut(.none)
        #expect(flash.isPoweredOff)
        #expect(throws: FlashError.powerCut) { _ = try flash.read(offset: 0, count: 4) }
        #expect(throws: FlashError.powerCut) { try flash.program(offset: 32, bytes: [0, 0, 0, 0]) }
        #expect(throws: FlashError.powerCut) { try flash.erase(page: 3) }
        flash.repower()
        #expect(try flash.read(offset: 0, count: 16) == Self.old)
    }

    @Test func cutAtTheThirdMutation() throws {
        var flash = SimulatedFlash(geometry: .tiny)
        flash.armPowerCut(atMutation: 3, tear: .complete)
        try flash.program(offset: 0, bytes: [0, 0, 0, 0])
        try flash.erase(page: 1)
        #expect(throws: FlashError.powerCut) { try flash.program(offset: 4, bytes: [0, 0, 0, 0]) }
        flash.repower()
        #expect(try flash.read(offset: 0, count: 8) == [0, 0, 0, 0, 0, 0, 0, 0])
        #expect(flash.mutationCount == 3)
    }

    @Test func completeAppliesAndCounts() throws {
        var flash = try cut(.complete)
        flash.repower()
        #expect(try flash.read(offset: 0, count: 16) == Self.new.enumerated().map { $0.element & Self.old[$0.offset] })
        #expect(flash.programCount(offset: 0) == 1)
        #expect(flash.programCount(offset: 4) == 2)
    }

    @Test func noneAppliesNothing() throws {
        var flash = try cut(.none)
        flash.repower()
        #expect(try flash.read(offset: 0, count: 16) == Self.old)
        #expect(flash.programCount(offset: 0) == 0)
    }

    @Test(arguments: [1, 2, 3, 42, 0xDEAD_BEEF] as [UInt64])
    func randomBitsChangesOnlyBitsThatShouldChangeAndIsStable(seed: UInt64) throws {
        var flash = try cut(.randomBits(seed: seed))
        flash.repower()
        let torn = try flash.read(offset: 0, count: 16)
        let target = Self.new.enumerated().map { $0.element & Self.old[$0.offset] }
        for i in 0..<16 {
            // Every torn bit is between the old and the target value.
            #expect(torn[i] & Self.old[i] == torn[i])
            #expect(torn[i] & target[i] == target[i])
        }
        #expect(torn != Self.old && torn != target)
        #expect(try flash.read(offset: 0, count: 16) == torn)
        #expect(try self.cut(.randomBits(seed: seed)).image == flash.image)
        #expect(flash.programCount(offset: 0) == 0)  // interrupted programs do not count
    }

    @Test func prefixAppliesTheFirstHalfOfTheWords() throws {
        var flash = try cut(.prefix)
        flash.repower()
        let result = try flash.read(offset: 0, count: 16)
        #expect(Array(result[0..<8]) == [0x00, 0x11, 0x22, 0x33, 0x00, 0x10, 0x20, 0x30])
        #expect(Array(result[8..<16]) == Array(Self.old[8..<16]))
    }

    @Test(arguments: TearMode.all(seed: 7))
    func tornErase(tear: TearMode) throws {
        var flash = SimulatedFlash(geometry: .tiny)
        try flash.program(offset: 256, bytes: [UInt8](repeating: 0, count: 256))
        flash.armPowerCut(atMutation: 1, tear: tear)
        #expect(throws: FlashError.powerCut) { try flash.erase(page: 1) }
        flash.repower()
        let page = try flash.read(offset: 256, count: 256)
        switch tear {
        case .none:
            #expect(page == [UInt8](repeating: 0, count: 256))
            #expect(flash.eraseCount(page: 1) == 0)
        case .complete:
            #expect(page == [UInt8](repeating: 0xFF, count: 256))
            #expect(flash.eraseCount(page: 1) == 1)
        case .prefix:
            #expect(page == [UInt8](repeating: 0xFF, count: 128) + [UInt8](repeating: 0, count: 128))
            #expect(flash.eraseCount(page: 1) == 0)
        case .randomBits:
            #expect(page.contains { $0 != 0 && $0 != 0xFF })
            #expect(page != [UInt8](repeating: 0xFF, count: 256))
            #expect(try flash.read(offset: 256, count: 256) == page)
        }
    }
}
