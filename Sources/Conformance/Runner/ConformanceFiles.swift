import Console
package import ControlProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A file of a run that cannot be read or written; the description says which and why.
package struct ConformanceFileError: Error, CustomStringConvertible {
    package var description: String
}

extension ConformanceReport {
    /// Writes `report.json` and `report.md` into `directory`, creating it if needed.
    package func write(to directory: String) throws(ConformanceFileError) {
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            throw ConformanceFileError(description: "--report \(directory): \(String(cString: strerror(errno)))")
        }
        for (name, text) in [("report.json", json.prettyEncoded + "\n"), ("report.md", markdown)] {
            // Written whole and never through a link planted at the name (WholeFile).
            do {
                try WholeFile.write(Array(text.utf8), to: "\(directory)/\(name)", mode: 0o644)
            } catch {
                throw ConformanceFileError(description: "cannot write \(error)")
            }
        }
    }
}

/// The PIN a run is given in a file (`--pin-file`): its first line.
package enum PINFile {
    package static func firstLine(of path: String) throws(ConformanceFileError) -> String {
        guard let file = fopen(path, "r") else {
            throw ConformanceFileError(description: "--pin-file \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 256)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else {
            throw ConformanceFileError(description: "--pin-file \(path) is empty")
        }
        let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let pin =
            line.hasSuffix("\r\n") ? String(line.dropLast(2)) : line.hasSuffix("\n") ? String(line.dropLast()) : line
        guard !pin.isEmpty else {
            throw ConformanceFileError(description: "--pin-file \(path): the first line is empty")
        }
        return pin
    }
}

/// A report a run wrote (`--compare`): `report.json`, or a `--report` directory holding one.
package enum ReportFile {
    package static func read(_ path: String) throws(ConformanceFileError) -> JSONValue {
        var info = stat()
        let file = stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR ? path + "/report.json" : path
        guard let handle = fopen(file, "r") else {
            throw ConformanceFileError(description: "--compare \(file): \(String(cString: strerror(errno)))")
        }
        defer { fclose(handle) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&buffer, 1, buffer.count, handle)
            if n == 0 { break }
            bytes += buffer[0..<n]
            guard bytes.count <= 16 << 20 else {
                throw ConformanceFileError(description: "--compare \(file): larger than 16 MiB, not a report")
            }
        }
        do {
            return try JSONParser.parse(bytes)
        } catch {
            throw ConformanceFileError(description: "--compare \(file): not JSON: \(error)")
        }
    }
}
