import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A file fidosim could not write whole; the description names it and says why.
package struct WholeFileError: Error, CustomStringConvertible, Sendable {
    package var description: String
}

/// Files fidosim writes whole for a user or a program that reads them (the ready file, the private key's
/// environment, conformance reports, captured profiles): a reader that sees the file sees all of it, and nothing
/// another user planted is followed.
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
}
