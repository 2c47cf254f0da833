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
    package static func write(_ bytes: [UInt8], to path: String, mode: UInt32 = 0o600) throws(WholeFileError) {
        let temporary = path + ".\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw WholeFileError(description: "\(path): \(String(cString: strerror(errno)))") }
        let descriptor = FileDescriptor(rawValue: fd)
        do {
            if mode != 0o600 { _ = fchmod(fd, mode_t(mode)) }
            try descriptor.closeAfter { _ = try descriptor.writeAll(bytes) }
        } catch {
            unlink(temporary)
            throw WholeFileError(description: "\(path): \(error)")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw WholeFileError(description: "\(path): \(reason)")
        }
    }

    /// The bytes of a small file (a profile, a `--config` file, a credential file): at most 64 MiB.
    package static func read(_ path: String) throws(WholeFileError) -> [UInt8] {
        let file: FileDescriptor
        do {
            file = try FileDescriptor.open(path, .readOnly, options: .closeOnExec)
        } catch {
            throw WholeFileError(description: "cannot open \(path): \(error)")
        }
        defer { try? file.close() }
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
