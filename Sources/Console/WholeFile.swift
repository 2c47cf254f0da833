import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A file fidosim could not write whole or read whole (or standard input); the description names it and says why.
package struct WholeFileError: Error, CustomStringConvertible, Sendable {
    package var description: String
}

/// Files fidosim writes whole for a user or a program that reads them (the ready file, the private key's
/// environment, conformance reports, captured profiles): a reader that sees the file sees all of it, and nothing
/// another user planted is followed. And the small files a command reads whole (profiles, `--config` files,
/// credential files) and the private ones it writes (exported credentials, attestation batches).
package enum WholeFile {
    /// Writes `bytes` to a new temporary file beside `path` (a random name, created exclusively, never through a
    /// symbolic link, with `mode`), then renames it over `path`: a symbolic link at `path` is replaced, not written
    /// through.
    ///
    /// The file is written relative to its folder, opened once with every folder of its path checked
    /// (``openFolder(of:secret:)``): no link in the path, no folder another user may write but a sticky one (and for
    /// a `secret`, not even that).
    package static func write(
        _ bytes: [UInt8],
        to path: String,
        mode: UInt32 = 0o600,
        secret: Bool = false
    ) throws(WholeFileError) {
        let (folder, name) = try openFolder(of: path, secret: secret)
        defer { close(folder) }
        let temporary = ".\(name).\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp"
        let fd = openat(folder, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw WholeFileError(description: "\(path): \(String(cString: strerror(errno)))") }
        let descriptor = FileDescriptor(rawValue: fd)
        do {
            if mode != 0o600 { _ = fchmod(fd, mode_t(mode)) }
            try descriptor.closeAfter { _ = try descriptor.writeAll(bytes) }
        } catch {
            unlinkat(folder, temporary, 0)
            throw WholeFileError(description: "\(path): \(error)")
        }
        guard renameat(folder, temporary, folder, name) == 0 else {
            let reason = String(cString: strerror(errno))
            unlinkat(folder, temporary, 0)
            throw WholeFileError(description: "\(path): \(reason)")
        }
    }

    /// The folder `path` is in, opened from `/` one folder at a time without following a link, and the file's name
    /// in it. Every folder on the way must be one that no other user can change under us: not writable by others,
    /// or sticky (`/tmp`) with the next folder ours or root's; the folder itself ours or root's, not writable by
    /// others, or (unless `secret`) sticky. A link anywhere in the path is refused: a folder another user could write
    /// is where one would be planted.
    package static func openFolder(of path: String, secret: Bool) throws(WholeFileError) -> (Int32, String) {
        // O_PATH (Linux): a descriptor for the folder itself, as a place to open in, whatever its read permission.
        let oPath: Int32 = 0o10_000_000
        var absolute = path
        if !path.hasPrefix("/") {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            guard getcwd(&buffer, buffer.count) != nil else {
                throw WholeFileError(description: "\(path): the current folder cannot be read")
            }
            absolute = String(cString: buffer) + "/" + path
        }
        var parts: [String] = []
        for part in absolute.split(separator: "/") where part != "." {
            if part == ".." { _ = parts.popLast() } else { parts.append(String(part)) }
        }
        guard let name = parts.popLast() else { throw WholeFileError(description: "\(path): not a file's path") }
        var folder = open("/", oPath | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw WholeFileError(description: "\(path): / cannot be opened") }
        var shown = ""
        var info = stat()
        _ = fstat(folder, &info)
        for part in parts {
            let sharedParent = info.st_mode & (S_IWGRP | S_IWOTH) != 0
            let next = openat(folder, part, oPath | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            let reason = errno
            close(folder)
            shown += "/" + part
            guard next >= 0 else {
                throw WholeFileError(
                    description: reason == ENOTDIR
                        ? "\(path): \(shown) is a link or not a folder (fidosim follows no link in the folders it "
                            + "writes to)"
                        : "\(path): \(shown): \(String(cString: strerror(reason)))"
                )
            }
            folder = next
            _ = fstat(folder, &info)
            if sharedParent && info.st_uid != geteuid() && info.st_uid != 0 {
                close(folder)
                throw WholeFileError(
                    description: "\(path): \(shown) is another user's, in a folder others may write"
                )
            }
            if info.st_mode & (S_IWGRP | S_IWOTH) != 0 && info.st_mode & S_ISVTX == 0 {
                close(folder)
                throw WholeFileError(description: "\(path): \(shown) is writable by other users")
            }
        }
        let shared = info.st_mode & (S_IWGRP | S_IWOTH) != 0
        guard info.st_uid == geteuid() || info.st_uid == 0, !(secret && shared) else {
            close(folder)
            throw WholeFileError(
                description: "\(path): \(shown.isEmpty ? "/" : shown) is "
                    + (shared ? "a folder other users may write" : "another user's folder")
                    + "; this file holds a secret: give a folder of yours"
            )
        }
        return (folder, name)
    }

    /// The bytes of a small file (a profile, a `--config` file, a credential file): at most 64 MiB. With
    /// `regularOnly`, only a regular file: it is opened without blocking and checked first, so that a FIFO or a
    /// device named as a profile never holds the run loop that reads it (a key added through the hub names its
    /// profile while every key is served).
    package static func read(_ path: String, regularOnly: Bool = false) throws(WholeFileError) -> [UInt8] {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(
                path,
                .readOnly,
                options: regularOnly ? [.closeOnExec, .nonBlocking] : .closeOnExec
            )
        } catch {
            throw WholeFileError(description: "cannot open \(path): \(error)")
        }
        defer { try? file.close() }
        var info = stat()
        guard !regularOnly || (fstat(file.rawValue, &info) == 0 && info.st_mode & S_IFMT == S_IFREG) else {
            throw WholeFileError(description: "\(path) is not a regular file (a FIFO, a device or a folder)")
        }
        return try readAll(file, name: path)
    }

    /// Standard input, whole (at most 64 MiB).
    package static func readStandardInput() throws(WholeFileError) -> [UInt8] {
        try readAll(.standardInput, name: "standard input")
    }

    static func readAll(_ file: FileDescriptor, name: String) throws(WholeFileError) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n: Int
            do {
                n = try buffer.withUnsafeMutableBytes { try file.read(into: $0) }
            } catch {
                throw WholeFileError(description: "cannot read \(name): \(error)")
            }
            if n == 0 { return out }
            out += buffer[0..<n]
            guard out.count <= 64 << 20 else { throw WholeFileError(description: "\(name) is larger than 64 MiB") }
        }
    }

    /// Creates `path` with mode 0600 (exclusively, unless `replace`) and writes `text`: for files that hold secrets
    /// (exported credentials, attestation batches).
    package static func writePrivate(_ path: String, _ text: String, replace: Bool) throws(WholeFileError) {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(
                path,
                .writeOnly,
                options: [.create, .closeOnExec, .noFollow, replace ? .truncate : .exclusiveCreate],
                permissions: [.ownerReadWrite]
            )
        } catch Errno.fileExists {
            throw WholeFileError(description: "\(path) exists; use --force to replace it")
        } catch {
            throw WholeFileError(description: "cannot create \(path): \(error)")
        }
        defer { try? file.close() }
        // A replaced file keeps its mode: make it private too.
        guard fchmod(file.rawValue, 0o600) == 0 else {
            throw WholeFileError(description: "cannot make \(path) private")
        }
        do {
            _ = try file.writeAll(Array(text.utf8))
        } catch {
            throw WholeFileError(description: "cannot write \(path): \(error)")
        }
    }
}
