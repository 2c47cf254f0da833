/// The shape and physical limits of a NOR flash part.
///
/// A flash is `pageCount` pages of `pageSize` bytes. Pages are the erase unit; words of `wordSize` bytes are
/// the program unit. Erase sets every bit of a page to 1; a program can only clear bits, at most
/// `maxProgramsPerWord` times per word between two erases, and a page survives `eraseEndurance` erases.
package struct FlashGeometry: Hashable, Sendable, CustomStringConvertible {
    /// Bytes per word, the unit of programming (a power of two).
    package var wordSize: Int
    /// Bytes per page, the unit of erasing (a multiple of `wordSize`).
    package var pageSize: Int
    /// Number of pages.
    package var pageCount: Int
    /// How many times a word may be programmed between two erases.
    package var maxProgramsPerWord: Int
    /// How many erases a page survives. The erase after that fails: the page is worn out.
    package var eraseEndurance: Int
    /// Whether a word may always be programmed to all zeros, whatever its program count
    /// (STM32L4: "programming a double word of zeros over programmed data is allowed").
    package var allowsZeroOverwrite: Bool

    /// Creates a geometry. Call ``validationError`` to check it before use.
    package init(
        wordSize: Int,
        pageSize: Int,
        pageCount: Int,
        maxProgramsPerWord: Int,
        eraseEndurance: Int,
        allowsZeroOverwrite: Bool = false
    ) {
        self.wordSize = wordSize
        self.pageSize = pageSize
        self.pageCount = pageCount
        self.maxProgramsPerWord = maxProgramsPerWord
        self.eraseEndurance = eraseEndurance
        self.allowsZeroOverwrite = allowsZeroOverwrite
    }

    /// Total bytes of the flash.
    package var totalSize: Int { pageSize * pageCount }

    /// Words in one page.
    package var wordsPerPage: Int { pageSize / wordSize }

    /// Why this geometry cannot describe a flash, or `nil` when it can.
    package var validationError: String? {
        if wordSize < 1 || wordSize > 64 || wordSize & (wordSize - 1) != 0 {
            return "word size \(wordSize) is not a power of two between 1 and 64"
        }
        if pageSize < wordSize || pageSize % wordSize != 0 {
            return "page size \(pageSize) is not a positive multiple of the word size \(wordSize)"
        }
        if pageCount < 1 || pageCount > 1 << 20 { return "page count \(pageCount) is out of range" }
        if maxProgramsPerWord < 1 || maxProgramsPerWord > 255 {
            return "programs per word \(maxProgramsPerWord) is out of range 1...255"
        }
        if eraseEndurance < 1 { return "erase endurance \(eraseEndurance) is not positive" }
        return nil
    }

    package var description: String {
        "\(pageCount)x\(pageSize) B pages, \(wordSize) B words, \(maxProgramsPerWord) program(s)/word"
            + (allowsZeroOverwrite ? " (+zero overwrite)" : "") + ", \(eraseEndurance) erases"
    }
}

extension FlashGeometry {
    /// Nordic nRF52840: 4-byte words, 4 KiB pages, 2 writes per word (nWRITE), 10,000 erases; 20 pages.
    package static var nrf52840: FlashGeometry { nrf52840(pages: 20) }

    /// Nordic nRF52840 with `pages` pages of 4 KiB.
    package static func nrf52840(pages: Int) -> FlashGeometry {
        FlashGeometry(wordSize: 4, pageSize: 4096, pageCount: pages, maxProgramsPerWord: 2, eraseEndurance: 10_000)
    }

    /// ST STM32L4: 8-byte double words programmed once (a double word of zeros may always be programmed over
    /// it), 2 KiB pages, 10,000 erases; 32 pages.
    package static var stm32l4: FlashGeometry { stm32l4(pages: 32) }

    /// ST STM32L4 with `pages` pages of 2 KiB.
    package static func stm32l4(pages: Int) -> FlashGeometry {
        FlashGeometry(
            wordSize: 8,
            pageSize: 2048,
            pageCount: pages,
            maxProgramsPerWord: 1,
            eraseEndurance: 10_000,
            allowsZeroOverwrite: true
        )
    }

    /// A 4 MiB part: 1024 pages of 4 KiB, 4-byte words, 2 programs per word, 10,000 erases.
    package static var large: FlashGeometry {
        FlashGeometry(wordSize: 4, pageSize: 4096, pageCount: 1024, maxProgramsPerWord: 2, eraseEndurance: 10_000)
    }

    /// A toy part where compaction happens every few operations: 6 pages of 256 bytes, 4-byte words,
    /// 2 programs per word, 1,000 erases.
    package static var tiny: FlashGeometry { tiny(pages: 6, endurance: 1000) }

    /// A toy part of `pages` pages of 256 bytes with the given erase endurance.
    package static func tiny(pages: Int, endurance: Int = 1000) -> FlashGeometry {
        FlashGeometry(wordSize: 4, pageSize: 256, pageCount: pages, maxProgramsPerWord: 2, eraseEndurance: endurance)
    }
}
