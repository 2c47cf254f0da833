import ArgumentParser
import Console
import HIDBridge

struct FlashCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flash",
        abstract: "Inspect flash images (the store's proof and measurements: fidosim-proof, make flash-proof).",
        subcommands: [Inspect.self]
    )
}

extension FlashCommand {
    struct Inspect: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a flash image's geometry, use, wear and credentials per relying party (never secrets)."
        )

        @Argument(help: "The image file (e.g. ~/.local/share/fidosim/default.img).")
        var image: String

        func run() throws {
            do {
                for line in try ImageReport.inspect(image: image) { print(line) }
            } catch {
                printError("fidosim: \(error)")
                throw ExitCode(1)
            }
        }
    }
}
