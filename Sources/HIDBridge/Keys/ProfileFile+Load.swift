package import Profiles
import VirtualKey

extension ProfileFile {
    /// A built-in profile by name, or a file by path (anything with a '/' or ending in .json), read with the key
    /// files' rules (``KeyFiles``).
    package static func load(_ nameOrPath: String) throws -> ProfileFile {
        guard isPath(nameOrPath) else { return try builtIn(named: nameOrPath) }
        return try load(text: try KeyFiles.read(nameOrPath), source: nameOrPath)
    }
}
