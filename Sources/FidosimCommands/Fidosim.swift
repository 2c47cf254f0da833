package import ArgumentParser
import CTAPCore
import Console
import ControlProtocol
import HIDBridge
import Profiles
import VirtualKey

/// The `fidosim` command and its subcommands (the executable's `main` runs it).
package struct Fidosim: ParsableCommand {
    package init() {}

    /// Runs the command the process's arguments name, and exits with its status.
    package static func runFromCommandLine() { main() }

    package static let configuration = CommandConfiguration(
        commandName: "fidosim",
        abstract: "A FIDO2 / U2F security key whose firmware runs on this Linux host.",
        discussion: """
            `fidosim serve` starts a virtual key. On the UDP transport it speaks raw CTAPHID, one 64-byte \
            report per datagram (the convention of solo1's simulation), so python-fido2 and libfido2 \
            with a UDP transport can use it without root.
            """,
        version: "0.1.0",
        subcommands: [
            Serve.self, RunCommand.self, Ctl.self, CredentialsCommand.self, AttestationCommand.self,
            MetadataCommand.self, WebDriverCommand.self,
            ProfilesCommand.self, ProfileCommand.self, FlashCommand.self,
            BenchCommand.self, ConformCommand.self,
        ],
        defaultSubcommand: nil
    )
}

struct ProfilesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profiles",
        abstract: "List the built-in key profiles (serve --profile NAME)."
    )

    @Flag(help: "Print a JSON array of {name, description, versions} instead of lines.")
    var json = false

    func run() throws {
        var list: [JSONValue] = []
        for name in ProfileFile.builtInNames {
            let file = try ProfileFile.load(name)
            if json {
                list.append([
                    "name": .string(name), "description": .string(file.description),
                    "versions": .array(file.profile.versions.map { .string($0) }),
                ])
            } else {
                printLine("\(name): \(file.description)")
            }
        }
        if json { printLine(JSONValue.array(list).encoded) }
    }
}

/// Runs `body`; a key's file that is not right is a usage error (exit code 2), like the command's own checks.
func usage<T, Failure: Error & CustomStringConvertible>(_ body: () throws(Failure) -> T) throws -> T {
    do {
        return try body()
    } catch {
        throw ValidationError(error.description)
    }
}
