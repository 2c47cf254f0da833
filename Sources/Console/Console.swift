import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Writes a line to standard output at once (no stdio buffering), for status lines scripts wait for; to standard
/// error once a wrapper has given standard output to its program (`Console.leaveStandardOutputToProgram()`).
package func printLine(_ line: String) {
    Console.write(line, to: Console.statusToStandardError.load(ordering: .relaxed) ? .standardError : .standardOutput)
}

/// Writes a line to standard error at once (messages for the person: warnings, errors, questions).
package func printError(_ line: String) {
    Console.write(line, to: .standardError)
}

package enum Console {
    static let statusToStandardError = Atomic<Bool>(false)

    /// From now on fidosim's status lines go to standard error: a wrapper (`fidosim run -- PROGRAM`, as `xvfb-run`
    /// or `umockdev-run`) leaves standard output to the program it runs.
    package static func leaveStandardOutputToProgram() {
        statusToStandardError.store(true, ordering: .relaxed)
    }

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

/// How far a long command is, for a person at a terminal: "phase: NN%" rewritten in place on standard error.
/// When standard error is not a terminal it prints nothing, so logs and pipes stay as they were.
package final class ProgressMeter {
    let enabled: Bool
    var label = ""
    var shown = -1

    package init(enabled: Bool = isatty(FileDescriptor.standardError.rawValue) == 1) {
        self.enabled = enabled
    }

    /// Starts a phase; the closure takes the fraction done (0 to 1).
    package func phase(_ label: String) -> (Double) -> Void {
        self.label = label
        shown = -1
        return { [self] fraction in update(fraction) }
    }

    func update(_ fraction: Double) {
        guard enabled else { return }
        let percent = Int((min(max(fraction, 0), 1) * 100).rounded(.down))
        guard percent != shown else { return }
        shown = percent
        _ = try? FileDescriptor.standardError.writeAll(Array("\r\(label): \(percent)%\u{1B}[K".utf8))
    }

    /// Clears the line, so that the phase's result line stands alone.
    package func done() {
        guard enabled, shown >= 0 else { return }
        _ = try? FileDescriptor.standardError.writeAll(Array("\r\u{1B}[K".utf8))
        shown = -1
    }
}
