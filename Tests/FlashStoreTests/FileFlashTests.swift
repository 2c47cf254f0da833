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

    @Test func refusesAnotherVersionOrACorruptHeader() throws {
        let temp = TemporaryPath()
        _ = try FileFlash.open(path: temp.path, geometry: .tiny)
        var bytes = readFile(temp.path)
        bytes[8] = 9
        writeFile(temp.path, bytes)
        #expect { _ = try FileFlash.open(path: temp.path, geometry: .tiny) } throws: { error in
            (error as? FlashError)?.code == .unsupportedVersion
        }
        bytes[8] = 1
        bytes[20] ^= 0xFF
        writeFile(temp.path, bytes)
        #expect { _ = try FileFlash.open(path: temp.path, geometry: .tiny) } throws: { error in
            (error as? FlashError)?.code == .notAnImage
        }
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
                + [UInt8](repeating: 0xFF, count: 8))
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
