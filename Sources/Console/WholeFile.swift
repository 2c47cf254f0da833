import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Files fidosim writes whole for a program that reads them (the ready file, the private key's environment): a
/// reader that sees the file sees all of it, and nothing another user planted is followed.
package enum WholeFile {
    /// Writes `bytes` to a new temporary file beside `path` (a random name, created exclusively, never through a
    /// symbolic link, mode 0600), then renames it over `path`: a symbolic link at `path` is replaced, not written
    /// through.
    package static func write(_ bytes: [UInt8], to path: String) throws(TransportError) {
        let temporary = path + ".\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw TransportError("\(path): \(String(cString: strerror(errno)))") }
        let descriptor = FileDescriptor(rawValue: fd)
        do {
            try descriptor.closeAfter { _ = try descriptor.writeAll(bytes) }
        } catch {
            unlink(temporary)
            throw TransportError("\(path): \(error)")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw TransportError("\(path): \(reason)")
        }
    }
}
