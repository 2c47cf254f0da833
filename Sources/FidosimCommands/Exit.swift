import ArgumentParser
import Console

#if canImport(Glibc)
import Glibc
#endif

/// The exit codes every subcommand uses (README, "Exit codes"): 0 success, 1 the operation failed (a check failed,
/// the key refused), 2 usage or bad input, 3 the key could not be reached.
enum Exit {
    static let failed = ExitCode(1)
    static let usage = ExitCode(2)
    static let unreachable = ExitCode(3)
}

/// The key could not be reached (no socket answers, no device opens): exit 3.
struct Unreachable: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The operation failed (the key refused, a check failed): exit 1.
struct Failed: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension Fidosim {
    /// Parses the command line, runs the command, and maps what went wrong to the exit codes above: a command line
    /// that does not parse prints the usage; an error at run time prints one line, without the usage.
    static func main() {
        var command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Glibc.exit(0)
            }
            printError(fullMessage(for: error))
            Glibc.exit(Exit.usage.rawValue)
        }
        do {
            try command.run()
        } catch let code as ExitCode {
            Glibc.exit(code.rawValue)
        } catch let error as ValidationError {
            printError("fidosim: \(error.message)")
            Glibc.exit(Exit.usage.rawValue)
        } catch let error as Unreachable {
            printError("fidosim: \(error)")
            Glibc.exit(Exit.unreachable.rawValue)
        } catch {
            // The argument parser's own (help asked for, a subcommand missing) print as it words them.
            switch exitCode(for: error) {
            case .success:
                print(fullMessage(for: error))
                Glibc.exit(0)
            case .validationFailure:
                printError(fullMessage(for: error))
                Glibc.exit(Exit.usage.rawValue)
            default:
                printError("fidosim: \(error)")
                Glibc.exit(Exit.failed.rawValue)
            }
        }
    }
}
