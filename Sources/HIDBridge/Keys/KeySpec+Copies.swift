package import Profiles
package import VirtualKey

extension KeySpec {
    /// `serve --keys N`: this key and N-1 copies named NAME-2…, each with its own image, port (when the first's is
    /// fixed), serial, control socket and trace. `flash` and `control` are the command line's own (nil: the
    /// defaults); the copies of an image cannot share it, so a named image is refused.
    package func copies(count: Int, flash: String?, control: String?) throws(KeySetupError) -> [KeySpec] {
        guard count != 0 else { return [] }
        guard count > 1 else { return [self] }
        if let flash, flash != "memory" {
            throw KeySetupError("with --keys, each key has its own image NAME-N.img; name images in a --config file")
        }
        return (1...count).map { i in
            guard i > 1 else { return self }
            var spec = self
            spec.name = "\(name)-\(i)"
            spec.flash = flash ?? KeyFiles.defaultImagePath(name: spec.name)
            spec.port = port == 0 ? 0 : port &+ UInt16(i - 1)
            spec.serial = serial.map { "\($0)-\(i)" }
            spec.control =
                control.map { $0 == "off" ? "off" : KeySpec.numbered($0, i) }
                ?? KeyFiles.defaultControlPath(name: spec.name)
            spec.trace = trace.map { KeySpec.numbered($0, i) }
            return spec
        }
    }

    /// `dir/key.sock` → `dir/key-2.sock`.
    package static func numbered(_ path: String, _ i: Int) -> String {
        let slash = path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex
        if let dot = path[slash...].lastIndex(of: "."), dot > slash {
            return String(path[..<dot]) + "-\(i)" + String(path[dot...])
        }
        return path + "-\(i)"
    }
}
