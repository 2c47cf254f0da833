import CProcessControl
import SystemPackage
package import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// The process holds the keys' secrets: no core dump of it, and no other process of this user may read its memory
/// (security.md, "Secrets in memory").
package enum SecretsInMemory {
    /// Protects the process; returns a warning for the person when it could not be done.
    ///
    /// Should the kernel dump it anyway (fs.suid_dumpable = 2), no memory of it: anonymous mappings (the heap, where
    /// every key and the flash image live) and file mappings are left out of any core. That comes first: once the
    /// process is not dumpable, its /proc files belong to root and it may not write this one.
    package static func protect() -> String? {
        excludeMemoryFromCoreDumps()
        guard fidosim_set_undumpable() == 0 else {
            return "fidosim: warning: cannot mark the process undumpable: \(String(cString: strerror(errno)))"
        }
        return nil
    }

    /// Writes 0 to /proc/self/coredump_filter: a core of this process, if one is ever written, holds no mapping.
    static func excludeMemoryFromCoreDumps() {
        guard let file = try? FileDescriptor.open("/proc/self/coredump_filter", .writeOnly, options: .closeOnExec)
        else { return }
        _ = try? file.writeAll(Array("0x0\n".utf8))
        try? file.close()
    }
}

extension TransportChoice {
    /// `auto`: uhid when `uhidPath` is writable, else UDP; with the line that tells the person which and why.
    package static func automatic(uhidPath: String, udpAddress: String) -> (TransportChoice, String) {
        if UHIDTransport.isUsable(path: uhidPath) {
            return (.uhid, "fidosim: transport auto: \(uhidPath) is writable, using uhid")
        }
        let why = access(uhidPath, F_OK) == 0 ? "is not writable" : "does not exist (modprobe uhid)"
        return (.udp, "fidosim: transport auto: \(uhidPath) \(why), using UDP on \(udpAddress)")
    }
}
