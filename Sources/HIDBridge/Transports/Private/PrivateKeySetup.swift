import Console
#if canImport(Glibc)
import Glibc
#endif

/// What `fidosim run` and `serve --transport private` do around the private key's devices: run under umockdev's
/// preload, hand the tree's environment on, start the program inside the tree.
package enum PrivateKeySetup {
    /// Re-executes fidosim under umockdev's preload library unless it already runs under it (the testbed process
    /// must: its uevents reach the tree's programs through it).
    package static func runUnderPreload() throws(TransportError) { try PrivateTestbed.runUnderPreload() }

    /// The environment file: shell `export` lines that any program of this user sources (or reads) to join the
    /// tree. Written whole, mode 0600, never through a symbolic link (WholeFile).
    package static func environmentText(_ testbed: PrivateTestbed) -> String {
        testbed.environment.map { "export \($0.0)=\(shellQuoted($0.1))\n" }.joined()
    }

    package static func writeEnvironment(_ testbed: PrivateTestbed, to path: String) throws(TransportError) {
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            do {
                try KeyFiles.makeDirectories(String(path[..<slash]))
            } catch {
                throw TransportError("--env-file \(path): \(error)")
            }
        }
        do {
            // A secret in effect: whoever can change it chooses what the owner's shell preloads.
            try WholeFile.write(Array(environmentText(testbed).utf8), to: path, secret: true)
        } catch {
            throw TransportError("--env-file \(error)")
        }
    }

    /// `text` in single quotes, as a POSIX shell reads it back.
    static func shellQuoted(_ text: String) -> String {
        "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }

    /// Puts the tree's environment into this process's, for the program it starts.
    package static func exportEnvironment(_ testbed: PrivateTestbed) {
        for (name, value) in testbed.environment { setenv(name, value, 1) }
    }
}
