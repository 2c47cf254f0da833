import ArgumentParser
import Console
import HIDBridge

@main
struct Fidosim: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fidosim",
        abstract: "A FIDO2 / U2F security key whose firmware runs on this Linux host.",
        discussion: """
            `fidosim serve` starts a virtual key. On the UDP transport it speaks raw CTAPHID, one 64-byte \
            report per datagram (the convention of solo1's simulation), so python-fido2 and libfido2 \
            with a UDP transport can use it without root.
            """,
        version: "0.1.0",
        subcommands: [
            Serve.self, Ctl.self, CredentialsCommand.self, AttestationCommand.self, MetadataCommand.self,
            ProfilesCommand.self, FlashCommand.self,
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

    func run() throws {
        for name in ProfileFile.builtInNames {
            let file = try ProfileFile.load(name)
            printLine("\(name): \(file.description)")
        }
    }
}

/// Runs `body`; a key's file that is not right is a usage error (exit code 64), like the command's own checks.
func usage<T>(_ body: () throws(KeySetupError) -> T) throws -> T {
    do {
        return try body()
    } catch {
        throw ValidationError(error.message)
    }
}
