#if canImport(Glibc)
import Glibc
#endif

/// Small kernel-made files and directories (sysfs, configfs): what the HID discovery and the USB gadget read.
package enum SysfsFiles {
    /// The first `limit` bytes of a file; nil when it cannot be read or is empty.
    package static func read(_ path: String, limit: Int = 4096) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: limit)
        let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        return n > 0 ? Array(bytes.prefix(n)) : nil
    }

    /// The names in a directory, sorted, without "." and ".."; empty when it cannot be read.
    package static func names(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }
}
