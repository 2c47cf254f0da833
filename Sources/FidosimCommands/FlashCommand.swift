import ArgumentParser
import Console
import ControlProtocol
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

        @Flag(help: "Print one JSON object instead of lines.")
        var json = false

        func run() throws {
            let report: (lines: [String], json: JSONValue)
            do {
                report = try ImageReport.report(image: image)
            } catch {
                throw Failed("\(error)")
            }
            if json {
                printLine(report.json.encoded)
            } else {
                for line in report.lines { printLine(line) }
            }
        }
    }
}
