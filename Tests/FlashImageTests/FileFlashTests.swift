import FlashImage
import FlashStore
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A path in /tmp removed when the test ends.
struct TemporaryPath: ~Copyable {
    let path: String

    init() {
        path = "/tmp/fidosim-flash-test-\(getpid())-\(UInt64.random(in: 0..<UInt64.max)).img"
    }

    deinit { unlink(path) }
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    precondition(fd >= 0)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}

func readFile(_ path: String) -> [UInt8] {
    let fd = open(path, O_RDONLY)
    precondition(fd >= 0)
    defer { close(fd) }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        result += buffer[0..<n]
    }
    return result
}

@Suite("Flash image files")
struct FileFlashTests {
    @Test func createsABlankImageAndPersistsEveryOperation() throws {
        let temp = TemporaryPath()
        do {
            var flash = try FileFlash.open(path: temp.path, geometry: .tiny, sync: false)
            #expect(try flash.read(offset: 0, count: 4) == [0xFF, 0xFF, 0xFF, 0xFF])
            try flash.program(offset: 260, bytes: [1, 2, 3, 4])
            try flash.erase(page: 3)
            try flash.erase(page: 3)
        }
        let reopened = try FileFlash.open(path: temp.path, geometry: .tiny)
        #expect(try reopened.read(offset: 256, count: 8) == [0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4])
        #expect(reopened.eraseCount(page: 3) == 2)
        #expect(try FileFlash.geometry(ofImageAt: temp.path) == .tiny)
        #expect(try FileFlash.open(path: temp.path).geometry == .tiny)
    }

    @Test func refusesAnImageOfAnotherGeometry() throws {
        let temp = TemporaryPath()
        _ = try FileFlash.open(path: temp.path, geometry: .tiny)
        do {
            _ = try FileFlash.open(path: temp.path, geometry: .nrf52840)
            Issue.record("opened an image of another geometry")
        } catch {
            #expect(error.code == .geometryMismatch)
            #expect(error.description.contains("not of the requested"))
        }
    }

    @Test func refusesAForeignFile() throws {
        let temp = TemporaryPath()
        writeFile(temp.path, Array("this is not a flash image at all, just some text....................".utf8))
        #expect { _ = try FileFlash.open(path: temp.path, geometry: .tiny) } throws: { error in
            (error as? FlashError)?.code == .notAnImage
        }
        writeFile(temp.path, [1, 2, 3])
        #expect { _ = try FileFlash.open(path: temp.path, geometry: .tiny) } throws: { error in
            (error as? FlashError)?.code == .notAnImage
        }
    }

    @Test func refusesATruncatedImage() throws {
        let temp = TemporaryPath()
        _ = try FileFlash.open(path: temp.path, geometry: .tiny)
        let bytes = readFile(temp.path)
        writeFile(temp.path, Array(bytes.dropLast(100)))
        #expect { _ = try FileFlash.open(path: temp.path, geometry: .tiny) } throws: { error in
            (error as? FlashError)?.code == .truncatedImage
        }
        writeFile(temp.path, Array(bytes.prefix(40)))
        #expect { _ = try FileFlash.open(path: temp.path, geometry: .tiny) } throws: { error in
            (error as? FlashError)?.code == .truncatedImage
        }
    }

    /// An image of file format 1 (record format 1 pages) opens, is read without a write, and says version 2 from
    /// its first write on: a build that reads only format 1 refuses it instead of erasing its format 2 pages.
    @Test func aFormatOneImageIsMarkedBeforeItsFirstWrite() throws {
        let temp = TemporaryPath()
        _ = try FileFlash.open(path: temp.path, geometry: .tiny)
        var bytes = readFile(temp.path)
        bytes[8] = 1
        let crc = CRC32.checksum(bytes[0..<40])
        bytes.replaceSubrange(
            40..<44,
            with: [UInt8(crc & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 24)]
        )
        writeFile(temp.path, bytes)
        var flash = try FileFlash.open(path: temp.path, sync: false)
        _ = try flash.read(offset: 0, count: 16)
        #expect(readFile(temp.path)[8] == 1)
        try flash.program(offset: 0, bytes: [0, 0, 0, 0])
        #expect(readFile(temp.path)[8] == 2)
        #expect(try FileFlash.open(path: temp.path, sync: false).geometry == .tiny)
    }

    @Test func refusesAnotherVersionOrACorruptHeader() throws {
        let temp = TemporaryPath()
        _ = try FileFlash.open(path: temp.path, geometry: .tiny)
        var bytes = readFile(temp.path)
        bytes[8] = 9
        writeFile(temp.path, bytes)
        #expect { _ = try FileFlash.open(path: temp.path, geometry: .tiny) } throws: { error in
            (error as? FlashError)?.code == .unsupportedVersion
        }
        bytes[8] = 2
        bytes[20] ^= 0xFF
        writeFile(temp.path, bytes)
        #expect { _ = try FileFlash.open(path: temp.path, geometry: .tiny) } throws: { error in
            (error as? FlashError)?.code == .notAnImage
        }
    }

    /// A 64-byte header (valid magic, version and checksum) that describes `fields`: word size, page size, page count,
    /// programs per word, endurance, flags; with the image offset the format expects for that geometry.
    static func craftedHeader(
        wordSize: UInt32,
        pageSize: UInt32,
        pageCount: UInt32,
        offset: UInt32? = nil
    ) -> [UInt8] {
        let imageOffset = offset ?? UInt32((64 + 4 * Int(pageCount) + 4095) / 4096 * 4096)
        var h = Array("FIDOFLSH".utf8)
        for v in [1, imageOffset, wordSize, pageSize, pageCount, 2, 10_000, 0] as [UInt32] {
            h += [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)]
        }
        let crc = CRC32.checksum(h)
        h += [UInt8(crc & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 24)]
        return h + [UInt8](repeating: 0, count: 64 - h.count)
    }

    /// Crafted headers are refused with a message before anything is allocated: on c2c5324 a header claiming
    /// 2^31-byte pages aborted the process ("failed to allocate"), and an 8 KiB file claiming 768 MiB took
    /// 784 MiB before it was refused.
    @Test(arguments: [
        (UInt32(4), UInt32(1) << 31, UInt32(1 << 20), FlashError.Code.notAnImage, "at most 256 MiB"),
        (4, 4096, 196_608, .notAnImage, "at most 256 MiB"),  // 768 MiB of 4 KiB pages
        (4, 4096, 20, .truncatedImage, "header announces 81920 bytes"),  // a header and nothing else
        (4, 4096, 0, .notAnImage, "page count 0"),
        (3, 4096, 20, .notAnImage, "word size 3"),
    ])
    func refusesACraftedHeader(
        wordSize: UInt32,
        pageSize: UInt32,
        pageCount: UInt32,
        code: FlashError.Code,
        message: String
    ) {
        let temp = TemporaryPath()
        writeFile(
            temp.path,
            Self.craftedHeader(wordSize: wordSize, pageSize: pageSize, pageCount: pageCount)
                + [UInt8](repeating: 0, count: 8192 - 64)
        )
        for open in [
            { () throws -> Void in _ = try FileFlash.open(path: temp.path) },
            { () throws -> Void in _ = try FileFlash.open(path: temp.path, geometry: .nrf52840) },
            { () throws -> Void in _ = try FileFlash.geometry(ofImageAt: temp.path) },
        ] {
            #expect { try open() } throws: { error in
                guard let error = error as? FlashError else { return false }
                return error.code == code && error.description.contains(message)
            }
        }
    }

    @Test func refusesAnImageOthersMayWrite() throws {
        let temp = TemporaryPath()
        _ = try FileFlash.open(path: temp.path, geometry: .tiny)
        for (mode, who) in [(0o666, "every user"), (0o620, "its group")] as [(mode_t, String)] {
            chmod(temp.path, mode)
            #expect { _ = try FileFlash.open(path: temp.path) } throws: { error in
                guard let error = error as? FlashError else { return false }
                return error.code == .insecureImage && error.description.contains("may be written by \(who)")
                    && error.description.contains("chmod 600 \(temp.path)")
            }
        }
        chmod(temp.path, 0o640)  // others may read (the user chose so); nobody else may write
        #expect(try FileFlash.open(path: temp.path).geometry == .tiny)
    }

    @Test(.enabled(if: geteuid() == 0, "changing a file's owner needs root"))
    func refusesAnImageOfAnotherUser() throws {
        let temp = TemporaryPath()
        _ = try FileFlash.open(path: temp.path, geometry: .tiny)
        guard chown(temp.path, 65534, 65534) == 0 else { return }  // a user namespace without user 65534
        #expect { _ = try FileFlash.open(path: temp.path, geometry: .tiny) } throws: { error in
            guard let error = error as? FlashError else { return false }
            return error.code == .insecureImage && error.description.contains("belongs to user 65534")
                && error.description.contains("chown 0 \(temp.path)")
        }
        #expect(chown(temp.path, 0, 0) == 0)
        #expect(try FileFlash.open(path: temp.path).geometry == .tiny)
    }

    /// New images are 0600 (and written whole before they appear: tools/interop/test_flash_files.py fills the
    /// disk during a creation).
    @Test func aNewImageIsPrivate() throws {
        let temp = TemporaryPath()
        _ = try FileFlash.open(path: temp.path, geometry: .tiny)
        var info = stat()
        #expect(stat(temp.path, &info) == 0)
        #expect(UInt32(info.st_mode) & 0o777 == 0o600)
    }

    @Test func missingFileWithoutCreateIsAnError() {
        #expect { _ = try FileFlash.open(path: "/tmp/does/not/exist.img", geometry: .tiny, create: false) } throws: {
            error in (error as? FlashError)?.code == .io
        }
    }

    @Test func aTornOperationIsInTheFile() throws {
        let temp = TemporaryPath()
        do {
            var flash = try FileFlash.open(path: temp.path, geometry: .tiny, sync: false)
            flash.armPowerCut(atMutation: 1, tear: .prefix)
            #expect(throws: FlashError.powerCut) {
                try flash.program(offset: 0, bytes: [UInt8](repeating: 0, count: 16))
            }
        }
        let reopened = try FileFlash.open(path: temp.path, geometry: .tiny)
        #expect(
            try reopened.read(offset: 0, count: 16) == [UInt8](repeating: 0, count: 8)
                + [UInt8](repeating: 0xFF, count: 8)
        )
    }

    @Test func aStoreSurvivesReopening() throws {
        let temp = TemporaryPath()
        do {
            var store = try FlashKVStore(mounting: try FileFlash.open(path: temp.path, geometry: .tiny, sync: false))
            try store.insert([1, 2, 3], for: 7)
            try store.apply([.insert(key: 8, value: [4]), .insert(key: 9, value: [5, 6])])
            try store.remove(8)
        }
        let store = try FlashKVStore(mounting: try FileFlash.open(path: temp.path, geometry: .tiny))
        #expect(try store.entries() == [7: [1, 2, 3], 9: [5, 6]])
        #expect(store.recovery.isClean)
    }
}
