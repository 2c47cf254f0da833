import FlashStore
import Testing

@Suite("Simulated NOR flash")
struct SimulatedFlashTests {
    @Test func blankDeviceReadsAllOnes() throws {
        let flash = SimulatedFlash(geometry: .tiny)
        #expect(try flash.read(offset: 0, count: 256) == [UInt8](repeating: 0xFF, count: 256))
        #expect(flash.eraseCount(page: 0) == 0)
    }

    @Test func programClearsBitsAndEraseRestoresOnes() throws {
        var flash = SimulatedFlash(geometry: .tiny)
        try flash.program(offset: 256, bytes: [0x0F, 0xF0, 0x00, 0xAA])
        #expect(try flash.read(offset: 256, count: 4) == [0x0F, 0xF0, 0x00, 0xAA])
        try flash.program(offset: 256, bytes: [0x0E, 0x00, 0x00, 0x0A])
        #expect(try flash.read(offset: 256, count: 4) == [0x0E, 0x00, 0x00, 0x0A])
        #expect(flash.programCount(offset: 256) == 2)
        try flash.erase(page: 1)
        #expect(try flash.read(offset: 256, count: 4) == [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(flash.programCount(offset: 256) == 0)
        #expect(flash.eraseCount(page: 1) == 1)
        #expect(flash.mutationCount == 3)
    }

    @Test func validationNamesEachRule() throws {
        var flash = SimulatedFlash(geometry: .tiny)
        try flash.program(offset: 0, bytes: [0, 0xFF, 0, 0xFF])
        #expect(flash.validateProgram(offset: 0, bytes: [0xFF, 0xFF, 0, 0xFF])?.kind == .setsBit)
        #expect(flash.validateProgram(offset: 2, bytes: [0, 0, 0, 0])?.kind == .misaligned)
        #expect(flash.validateProgram(offset: 4, bytes: [0, 0])?.kind == .misaligned)
        #expect(flash.validateProgram(offset: 252, bytes: [0, 0, 0, 0, 0, 0, 0, 0])?.kind == .crossesPage)
        #expect(flash.validateProgram(offset: 6 * 256 - 4, bytes: [0, 0, 0, 0, 0, 0, 0, 0])?.kind == .outOfRange)
        #expect(flash.validateErase(page: 6)?.kind == .outOfRange)
        #expect(flash.validateProgram(offset: 0, bytes: [0, 0x0F, 0, 0x0F]) == nil)
        try flash.program(offset: 0, bytes: [0, 0x0F, 0, 0x0F])
        // Two programs per word on this geometry: a third one is refused, even of zeros.
        #expect(flash.validateProgram(offset: 0, bytes: [0, 0, 0, 0])?.kind == .tooManyPrograms)
        #expect(flash.validateProgram(offset: 4, bytes: [0, 0, 0, 0]) == nil)
    }

    @Test func zeroOverwriteIsAllowedOnlyWhereTheGeometrySaysSo() throws {
        var flash = SimulatedFlash(geometry: .stm32l4(pages: 3))
        try flash.program(offset: 0, bytes: [0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xF0])
        #expect(
            flash.validateProgram(offset: 0, bytes: [0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0x00])?.kind
                == .tooManyPrograms
        )
        try flash.program(offset: 0, bytes: [UInt8](repeating: 0, count: 8))
        try flash.program(offset: 0, bytes: [UInt8](repeating: 0, count: 8))
        #expect(try flash.read(offset: 0, count: 8) == [UInt8](repeating: 0, count: 8))
    }

    @Test func recordPolicyRefusesAndRemembers() throws {
        var flash = SimulatedFlash(geometry: .tiny, policy: .record)
        try flash.program(offset: 0, bytes: [0, 0, 0, 0])
        try flash.program(offset: 0, bytes: [0xFF, 0, 0, 0])
        #expect(flash.violations.map(\.kind) == [.setsBit])
        #expect(try flash.read(offset: 0, count: 4) == [0, 0, 0, 0])
    }

    @Test func wornOutPageRefusesToErase() throws {
        var flash = SimulatedFlash(geometry: .tiny(pages: 4, endurance: 3))
        for _ in 0..<3 { try flash.erase(page: 2) }
        try flash.program(offset: 512, bytes: [1, 2, 3, 4])
        #expect(throws: FlashError.self) { try flash.erase(page: 2) }
        do {
            try flash.erase(page: 2)
        } catch {
            #expect(error.code == .wornOut)
            #expect(error.page == 2)
        }
        #expect(flash.eraseCount(page: 2) == 3)
        #expect(try flash.read(offset: 512, count: 4) == [1, 2, 3, 4])
        try flash.erase(page: 1)
    }

    @Test func presetsAreValid() {
        for g in [FlashGeometry.nrf52840, .nrf52840(pages: 64), .stm32l4, .large, .tiny] {
            #expect(g.validationError == nil)
        }
        #expect(FlashGeometry.large.totalSize >= 4 << 20)
        #expect(
            FlashGeometry(wordSize: 3, pageSize: 12, pageCount: 2, maxProgramsPerWord: 1, eraseEndurance: 1)
                .validationError != nil
        )
    }

    @Test func settingABitTraps() async {
        await #expect(processExitsWith: .failure) {
            var flash = SimulatedFlash(geometry: .tiny)
            try? flash.program(offset: 0, bytes: [0, 0, 0, 0])
            try? flash.program(offset: 0, bytes: [1, 0, 0, 0])
        }
    }

    @Test func misalignedProgramTraps() async {
        await #expect(processExitsWith: .failure) {
            var flash = SimulatedFlash(geometry: .tiny)
            try? flash.program(offset: 2, bytes: [0, 0, 0, 0])
        }
    }

    @Test func programAcrossPagesTraps() async {
        await #expect(processExitsWith: .failure) {
            var flash = SimulatedFlash(geometry: .tiny)
            try? flash.program(offset: 252, bytes: [0, 0, 0, 0, 0, 0, 0, 0])
        }
    }

    @Test func thirdProgramOfAWordTraps() async {
        await #expect(processExitsWith: .failure) {
            var flash = SimulatedFlash(geometry: .nrf52840(pages: 3))
            try? flash.program(offset: 0, bytes: [0xF0, 0xFF, 0xFF, 0xFF])
            try? flash.program(offset: 0, bytes: [0xF0, 0xF0, 0xFF, 0xFF])
            try? flash.program(offset: 0, bytes: [0x00, 0xF0, 0xFF, 0xFF])
        }
    }

    @Test func erasingAMissingPageTraps() async {
        await #expect(processExitsWith: .failure) {
            var flash = SimulatedFlash(geometry: .tiny)
            try? flash.erase(page: 99)
        }
    }

    @Test func legalSequenceDoesNotTrap() async {
        await #expect(processExitsWith: .success) {
            var flash = SimulatedFlash(geometry: .nrf52840(pages: 3))
            try? flash.program(offset: 0, bytes: [0xF0, 0xFF, 0xFF, 0xFF])
            try? flash.program(offset: 0, bytes: [0x00, 0x00, 0x00, 0x00])
            try? flash.erase(page: 0)
            try? flash.program(offset: 0, bytes: [0x00, 0x00, 0x00, 0x00])
        }
    }
}
