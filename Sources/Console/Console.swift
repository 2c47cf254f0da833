import SystemPackage

/// Writes a line to standard output at once (no stdio buffering), for status lines scripts wait for.
package func printLine(_ line: String) {
    Console.write(line, to: .standardOutput)
}

/// Writes a line to standard error at once (messages for the person: warnings, errors, questions).
package func printError(_ line: String) {
    Console.write(line, to: .standardError)
}

enum Console {
    /// Writes the line and a newline whole; a closed stream loses it silently (there is nowhere left to say so).
    static func write(_ line: String, to stream: FileDescriptor) {
        _ = try? stream.writeAll(Array((line + "\n").utf8))
    }
}

/// A line for people that a library returns instead of printing: the command that called it prints it.
package enum ConsoleLine: Equatable, Sendable {
    /// For standard output (status lines scripts wait for).
    case out(String)
    /// For standard error (warnings).
    case error(String)

    /// Prints the line where it belongs.
    package func print() {
        switch self {
        case .out(let line): printLine(line)
        case .error(let line): printError(line)
        }
    }
}
