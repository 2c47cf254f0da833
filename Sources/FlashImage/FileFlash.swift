// A flash image kept in a file: the FlashImage target, the I/O beside the pure FlashStore.
package import FlashStore
import SystemPackage

#if canImport(Glibc)
import Glibc

private func openFile(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
    Glibc.open(path, flags, mode)
}
#elseif canImport(Darwin)
import Darwin

private func openFile(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
    Darwin.open(path, flags, mode)
}
#endif

/// A ``SimulatedFlash`` whose contents persist in an image file.
///
/// Every program and erase is written to the file with `pwrite` at its exact offset as soon as it is
/// applied (torn operations included), so a process killed at any moment leaves the image as a power cut
/// between two flash operations would. With `sync`, each write is followed by `fdatasync` so the image also
/// survives a crash of the host.
///
/// File layout (little-endian): a 64-byte header — magic `FIDOFLSH`, format version (UInt32, 2; 1 is read and
/// rewritten as 2 before the first write, because the store writes record format 2 pages), offset
/// of the image (UInt32), word size, page size, page count, programs per word, erase endurance, flags
/// (bit 0: zero overwrites allowed), CRC-32 of the preceding 40 bytes — then one UInt32 erase count per
/// page, then zero padding up to the image offset (a multiple of 4096), then the image. Per-word program
/// counts are not persisted: a new process starts counting from zero.
package struct FileFlash: FlashDevice {
    /// The in-memory flash, which enforces the NOR rules and injects power cuts.
    package private(set) var memory: SimulatedFlash
    /// Path of the image file.
    package let path: String
    /// Whether each write is followed by `fdatasync` (the data reaches the disk before the write returns).
    package var sync: Bool
    private let file: ImageFile
    private let imageOffset: Int

    static let magic: [UInt8] = Array("FIDOFLSH".utf8)
    static let version: UInt32 = 2
    /// Whether the file's header says ``version``; an older one is rewritten before the first write, so that a
    /// build that reads only record format 1 refuses the image instead of erasing its format 2 pages.
    var headerIsCurrent = true
    static let headerSize = 64
    /// The largest flash an image may hold (a header that claims more is refused before anything is allocated).
    package static let maxFlashBytes = 256 << 20
    /// The largest page an image may have.
    package static let maxPageSize = 1 << 20

    /// Whether `geometry` is larger than an image may be.
    static func exceedsBounds(_ geometry: FlashGeometry) -> Bool {
        geometry.pageSize > maxPageSize || geometry.totalSize > maxFlashBytes
    }

    package var geometry: FlashGeometry { memory.geometry }

    /// Opens the image at `path`, creating a blank one (all 0xFF) when the file does not exist and `create`
    /// is true. An existing file must be an image of exactly `geometry`, else a typed error explains why.
    package static func open(
        path: String,
        geometry: FlashGeometry,
        create: Bool = true,
        sync: Bool = true,
        policy: ViolationPolicy = .trap
    ) throws(FlashError) -> FileFlash {
        if let problem = geometry.validationError {
            throw FlashError(.geometryMismatch, detail: "invalid geometry: \(problem)")
        }
        if exceedsBounds(geometry) {
            throw FlashError(.geometryMismatch, detail: "invalid geometry: images hold at most 256 MiB of 1 MiB pages")
        }
        let fd = openFile(path, O_RDWR | O_CLOEXEC)
        if fd < 0 {
            let code = errno
            guard code == ENOENT, create else { throw ioError("open \(path)", code) }
            return try createImage(path: path, geometry: geometry, sync: sync, policy: policy)
        }
        let file = ImageFile(fd: fd)
        let size = try checkOwnership(file, path: path)
        let (found, offset, counts, headerVersion) = try readHeader(file, size: size, path: path)
        guard found == geometry else {
            throw FlashError(
                .geometryMismatch,
                detail: "\(path) is an image of \(found), not of the requested \(geometry)"
            )
        }
        var flash = try load(
            file,
            path: path,
            geometry: found,
            imageOffset: offset,
            counts: counts,
            sync: sync,
            policy: policy
        )
        flash.headerIsCurrent = headerVersion == version
        return flash
    }

    /// Opens an existing image with the geometry its header describes.
    package static func open(
        path: String,
        sync: Bool = true,
        policy: ViolationPolicy = .trap
    ) throws(FlashError) -> FileFlash {
        let fd = openFile(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw ioError("open \(path)", errno) }
        let file = ImageFile(fd: fd)
        let size = try checkOwnership(file, path: path)
        let (geometry, offset, counts, headerVersion) = try readHeader(file, size: size, path: path)
        var flash = try load(
            file,
            path: path,
            geometry: geometry,
            imageOffset: offset,
            counts: counts,
            sync: sync,
            policy: policy
        )
        flash.headerIsCurrent = headerVersion == version
        return flash
    }

    /// The geometry recorded in the image at `path`.
    package static func geometry(ofImageAt path: String) throws(FlashError) -> FlashGeometry {
        let fd = openFile(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)  // a FIFO must not block the open
        guard fd >= 0 else { throw ioError("open \(path)", errno) }
        let file = ImageFile(fd: fd)
        let size = try checkOwnership(file, path: path)
        return try readHeader(file, size: size, path: path).geometry
    }

    private init(memory: SimulatedFlash, path: String, sync: Bool, file: ImageFile, imageOffset: Int) {
        self.memory = memory
        self.path = path
        self.sync = sync
        self.file = file
        self.imageOffset = imageOffset
    }

    // MARK: FlashDevice

    package func read(offset: Int, count: Int) throws(FlashError) -> [UInt8] {
        try memory.read(offset: offset, count: count)
    }

    package mutating func program(offset: Int, bytes: [UInt8]) throws(FlashError) {
        if memory.isPoweredOff { throw .powerCut }
        try updateHeader()
        var failure: FlashError?
        do {
            try memory.program(offset: offset, bytes: bytes)
        } catch {
            failure = error
        }
        if offset >= 0, offset + bytes.count <= geometry.totalSize {
            try persistOrRollBack(offset: offset, count: bytes.count, page: nil)
        }
        if let failure { throw failure }
    }

    package mutating func erase(page: Int) throws(FlashError) {
        if memory.isPoweredOff { throw .powerCut }
        try updateHeader()
        var failure: FlashError?
        do {
            try memory.erase(page: page)
        } catch {
            failure = error
        }
        if failure?.code != .wornOut, page >= 0, page < geometry.pageCount {
            try persistOrRollBack(offset: page * geometry.pageSize, count: geometry.pageSize, page: page)
        }
        if let failure { throw failure }
    }

    package func eraseCount(page: Int) -> Int { memory.eraseCount(page: page) }

    package mutating func repower() { memory.repower() }

    /// Arms a power cut at the `k`-th next mutation (see ``SimulatedFlash/armPowerCut(atMutation:tear:)``);
    /// the torn state is written to the file like any other.
    package mutating func armPowerCut(atMutation k: Int, tear: TearMode) {
        memory.armPowerCut(atMutation: k, tear: tear)
    }

    // MARK: File I/O

    private mutating func updateHeader() throws(FlashError) {
        guard !headerIsCurrent else { return }
        try Self.writeAll(file, Self.encodeHeader(geometry, imageOffset: imageOffset), at: 0, path: path)
        try flushIfSync()
        headerIsCurrent = true
    }

    /// Writes a mutation to the file. When the file refuses it (a full disk, a file size limit, an I/O error), the
    /// flash in memory is set back to what the file holds, so the key goes on as after a power cut during that
    /// write (the store mounts again over it): memory never holds what the file does not.
    private mutating func persistOrRollBack(offset: Int, count: Int, page: Int?) throws(FlashError) {
        do {
            try persist(offset: offset, count: count, page: page)
        } catch {
            if let stored = try? Self.readAll(file, count: count, at: imageOffset + offset, path: path),
                stored.count == count
            {
                memory.restore(offset: offset, bytes: stored)
            }
            let line = Array("fidosim: \(path): \(error); the request that wrote it fails, as after a power cut\n".utf8)
            _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            throw error
        }
    }

    private func persist(offset: Int, count: Int, page: Int?) throws(FlashError) {
        let image = memory.image
        try Self.writeAll(file, Array(image[offset..<offset + count]), at: imageOffset + offset, path: path)
        if let page {
            let counter = UInt32(clamping: memory.eraseCount(page: page)).littleEndianBytes
            try Self.writeAll(file, counter, at: Self.headerSize + 4 * page, path: path)
        }
        try flushIfSync()
    }

    /// With `sync`, makes the writes so far reach the disk.
    private func flushIfSync() throws(FlashError) {
        if sync && fdatasync(file.fd) != 0 { throw Self.ioError("fdatasync \(path)", errno) }
    }

    /// Writes a new image whole into a temporary file beside `path` (mode 0600), then links it in place: an
    /// image that cannot be written whole (a full disk) is removed, and never appears at `path` half-written.
    private static func createImage(
        path: String,
        geometry: FlashGeometry,
        sync: Bool,
        policy: ViolationPolicy
    ) throws(FlashError) -> FileFlash {
        // A unique name: one left by a process killed while creating (the same PID, in a container) never blocks.
        let temporary = "\(path).new-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = openFile(temporary, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ioError("create \(path) (as \(temporary))", errno) }
        let file = ImageFile(fd: fd)
        let offset = imageOffset(for: geometry)
        do throws(FlashError) {
            var header = encodeHeader(geometry, imageOffset: offset)
            header += [UInt8](repeating: 0, count: 4 * geometry.pageCount)
            header += [UInt8](repeating: 0, count: offset - header.count)
            try writeAll(file, header, at: 0, path: temporary)
            let blankPage = [UInt8](repeating: 0xFF, count: geometry.pageSize)
            for page in 0..<geometry.pageCount {
                try writeAll(file, blankPage, at: offset + page * geometry.pageSize, path: temporary)
            }
            if fsync(fd) != 0 { throw ioError("fsync \(temporary)", errno) }
            // link, unlike rename, fails when `path` appeared meanwhile (the O_EXCL of a direct creation). A file
            // system without hard links (vfat, some FUSE and SMB mounts) gets a rename when nothing is there.
            if link(temporary, path) != 0 {
                let code = errno
                guard code != EEXIST, access(path, F_OK) != 0, rename(temporary, path) == 0 else {
                    throw ioError("create \(path)", code)
                }
            }
        } catch {
            unlink(temporary)
            throw error
        }
        unlink(temporary)
        if sync {  // the new name too must reach the disk
            let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
            let dfd = openFile(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if dfd >= 0 {
                defer { close(dfd) }
                if fsync(dfd) != 0 { throw ioError("fsync \(directory)", errno) }
            }
        }
        let memory = SimulatedFlash(geometry: geometry, policy: policy)
        return FileFlash(memory: memory, path: path, sync: sync, file: file, imageOffset: offset)
    }

    /// Refuses an image that another user owns or that group or others may write: whoever can write it can read
    /// and replace every credential on the key. Returns the file's length.
    private static func checkOwnership(_ file: ImageFile, path: String) throws(FlashError) -> Int {
        var info = stat()
        guard fstat(file.fd, &info) == 0 else { throw ioError("stat \(path)", errno) }
        let mode = UInt32(info.st_mode)
        guard mode & 0o170000 == 0o100000 else {  // S_IFMT, S_IFREG
            throw FlashError(.notAnImage, detail: "\(path) is not a regular file")
        }
        if info.st_uid != geteuid() {
            throw FlashError(
                .insecureImage,
                detail: "\(path) belongs to user \(info.st_uid), not to this user (\(geteuid())): its owner could "
                    + "read and change the key's credentials; use an image of your own, or take this one over "
                    + "with `chown \(geteuid()) \(path)` if you trust it"
            )
        }
        if mode & 0o022 != 0 {  // S_IWGRP | S_IWOTH
            throw FlashError(
                .insecureImage,
                detail: "\(path) may be written by \(mode & 0o002 != 0 ? "every user" : "its group") "
                    + "(mode \(String(mode & 0o777, radix: 8))), who could replace the key's credentials: "
                    + "`chmod 600 \(path)`"
            )
        }
        return Int(info.st_size)
    }

    private static func load(
        _ file: ImageFile,
        path: String,
        geometry: FlashGeometry,
        imageOffset: Int,
        counts: [Int],
        sync: Bool,
        policy: ViolationPolicy
    ) throws(FlashError) -> FileFlash {
        let image = try readAll(file, count: geometry.totalSize, at: imageOffset, path: path)
        guard image.count == geometry.totalSize else {
            throw FlashError(
                .truncatedImage,
                detail: "\(path) holds \(image.count) of the \(geometry.totalSize) image bytes its header announces"
            )
        }
        let memory = SimulatedFlash(geometry: geometry, image: image, eraseCounts: counts, policy: policy)
        return FileFlash(memory: memory, path: path, sync: sync, file: file, imageOffset: imageOffset)
    }

    static func imageOffset(for geometry: FlashGeometry) -> Int {
        (headerSize + 4 * geometry.pageCount + 4095) / 4096 * 4096
    }

    static func encodeHeader(_ g: FlashGeometry, imageOffset: Int) -> [UInt8] {
        var h = magic
        for v in [
            Int(version), imageOffset, g.wordSize, g.pageSize, g.pageCount, g.maxProgramsPerWord, g.eraseEndurance,
            g.allowsZeroOverwrite ? 1 : 0,
        ] {
            h += UInt32(clamping: v).littleEndianBytes
        }
        h += CRC32.checksum(h).littleEndianBytes
        h += [UInt8](repeating: 0, count: headerSize - h.count)
        return h
    }

    private static func readHeader(
        _ file: ImageFile,
        size: Int,
        path: String
    ) throws(FlashError) -> (geometry: FlashGeometry, imageOffset: Int, counts: [Int], version: UInt32) {
        let h = try readAll(file, count: headerSize, at: 0, path: path)
        guard h.count >= 8, Array(h[0..<8]) == magic else {
            throw FlashError(.notAnImage, detail: "\(path) is not a fidosim flash image (bad magic)")
        }
        guard h.count == headerSize else {
            throw FlashError(.truncatedImage, detail: "\(path) ends inside its header")
        }
        let fields = (0..<8).map { Int(h.readLE32(8 + 4 * $0)) }
        guard fields[0] == 1 || fields[0] == Int(version) else {
            throw FlashError(
                .unsupportedVersion,
                detail: "\(path) has image format version \(fields[0]); this build reads 1 and \(version)"
            )
        }
        guard h.readLE32(40) == CRC32.checksum(h[0..<40]) else {
            throw FlashError(.notAnImage, detail: "\(path): image header checksum mismatch")
        }
        let geometry = FlashGeometry(
            wordSize: fields[2],
            pageSize: fields[3],
            pageCount: fields[4],
            maxProgramsPerWord: fields[5],
            eraseEndurance: fields[6],
            allowsZeroOverwrite: fields[7] & 1 != 0
        )
        if let problem = geometry.validationError {
            throw FlashError(.notAnImage, detail: "\(path): header describes an invalid geometry: \(problem)")
        }
        // Bounded before anything is allocated or read: a header is as untrusted as the rest of the file.
        guard !exceedsBounds(geometry) else {
            throw FlashError(
                .notAnImage,
                detail: "\(path): header claims \(geometry.pageCount) pages of \(geometry.pageSize) bytes; "
                    + "an image holds at most 256 MiB in pages of at most 1 MiB"
            )
        }
        guard fields[1] == imageOffset(for: geometry) else {
            throw FlashError(.notAnImage, detail: "\(path): unexpected image offset \(fields[1])")
        }
        guard size >= fields[1] + geometry.totalSize else {
            throw FlashError(
                .truncatedImage,
                detail: "\(path) is \(size) bytes long; its header announces \(geometry.totalSize) bytes of "
                    + "flash from offset \(fields[1])"
            )
        }
        let countBytes = try readAll(file, count: 4 * geometry.pageCount, at: headerSize, path: path)
        guard countBytes.count == 4 * geometry.pageCount else {
            throw FlashError(.truncatedImage, detail: "\(path) ends inside its erase-count table")
        }
        let counts = (0..<geometry.pageCount).map { Int(countBytes.readLE32(4 * $0)) }
        return (geometry, fields[1], counts, UInt32(fields[0]))
    }

    private static func readAll(
        _ file: ImageFile,
        count: Int,
        at offset: Int,
        path: String
    ) throws(FlashError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var done = 0
        do {
            while done < count {
                let n = try buffer.withUnsafeMutableBytes { raw in
                    try file.descriptor.read(
                        fromAbsoluteOffset: Int64(offset + done),
                        into: UnsafeMutableRawBufferPointer(rebasing: raw[done...])
                    )
                }
                if n == 0 { break }
                done += n
            }
        } catch {
            throw ioError("pread \(path)", error)
        }
        return Array(buffer[0..<done])
    }

    private static func writeAll(_ file: ImageFile, _ bytes: [UInt8], at offset: Int, path: String) throws(FlashError) {
        do {
            _ = try file.descriptor.writeAll(toAbsoluteOffset: Int64(offset), bytes)
        } catch {
            throw ioError("pwrite \(path)", error)
        }
    }

    private static func ioError(_ what: String, _ error: any Error) -> FlashError {
        ioError(what, (error as? Errno)?.rawValue ?? EIO)
    }

    private static func ioError(_ what: String, _ code: Int32) -> FlashError {
        FlashError(.io, detail: "\(what): \(String(cString: strerror(code)))")
    }
}

/// Owns the image file descriptor and closes it when the last copy of the device goes away.
private final class ImageFile: Sendable {
    let fd: Int32

    init(fd: Int32) { self.fd = fd }

    var descriptor: FileDescriptor { FileDescriptor(rawValue: fd) }

    deinit { close(fd) }
}
