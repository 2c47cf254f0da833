import ControlProtocol
package import Profiles
package import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// The `--config` file of `serve`: one entry per key.
package enum ServeConfig {
    static let members: Set<String> = [
        "name", "flash", "port", "serial", "control", "trace", "presence", "uv", "enrolledFingers", "profile",
    ]

    package static func load(_ path: String, base: KeySpec) throws(KeySetupError) -> [KeySpec] {
        let bytes = try KeyFiles.read(path)
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes)
        } catch {
            throw KeySetupError("\(path) is not JSON: \(error)")
        }
        guard let entries = document["keys"]?.arrayValue, !entries.isEmpty, entries.count <= 128 else {
            throw KeySetupError("\(path): expected {\"keys\": [...]} with 1 to 128 keys")
        }
        var specs: [KeySpec] = []
        for (i, entry) in entries.enumerated() {
            let at = "\(path): key \(i + 1)"
            guard case .object(let fields) = entry else { throw KeySetupError("\(at) is not an object") }
            for key in fields.keys.sorted() where !members.contains(key) {
                throw KeySetupError("\(at): unknown member \"\(key)\"")
            }
            func text(_ key: String) throws(KeySetupError) -> String? {
                guard let value = fields[key] else { return nil }
                guard let s = value.stringValue, !s.isEmpty else {
                    throw KeySetupError("\(at): \"\(key)\" must be a string")
                }
                return s
            }
            var spec = base
            guard let name = try text("name"), name.utf8.allSatisfy({ $0 > 0x20 && $0 != UInt8(ascii: "/") }) else {
                throw KeySetupError("\(at): \"name\" must be a word without '/'")
            }
            spec.name = name
            // `--flash memory` on the command line holds for every key without its own; an image is per key.
            spec.flash =
                try text("flash") ?? (base.flash == "memory" ? "memory" : KeyFiles.defaultImagePath(name: name))
            spec.control = try text("control") ?? KeyFiles.defaultControlPath(name: name)
            spec.serial = try text("serial") ?? (base.serial.map { "\($0)-\(i + 1)" })
            spec.trace = try text("trace")
            if let profile = try text("profile") { spec.profile = profile }
            if let presence = try text("presence") {
                guard PresenceMode(argument: presence) != nil else {
                    throw KeySetupError("\(at): unknown presence \"\(presence)\"")
                }
                spec.presence = presence
            }
            if let uv = try text("uv") {
                guard uv == "none" || uv == "fingerprint" else {
                    throw KeySetupError("\(at): \"uv\" is none or fingerprint")
                }
                spec.uv = uv
            }
            if let value = fields["port"] {
                guard let port = value.integerValue, (0...65535).contains(port) else {
                    throw KeySetupError("\(at): \"port\" must be 0 to 65535")
                }
                spec.port = UInt16(port)
            } else if base.port != 0 {
                spec.port = base.port &+ UInt16(i)
            }
            if let value = fields["enrolledFingers"] {
                guard let n = value.integerValue, (0...5).contains(n) else {
                    throw KeySetupError("\(at): \"enrolledFingers\" must be 0 to 5")
                }
                spec.enrolledFingers = Int(n)
            }
            specs.append(spec)
        }
        let names = specs.map(\.name)
        guard Set(names).count == names.count else { throw KeySetupError("\(path): two keys have the same name") }
        return specs
    }
}
