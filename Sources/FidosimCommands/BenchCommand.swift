import ArgumentParser
import Benchmark

/// `fidosim bench`: throughput and latency against the P-256 signing limit of this machine.
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract:
            "Measure signatures, getAssertion and makeCredential per second: in process, through CTAPHID, over UDP."
    )

    @Option(help: "Seconds per measurement.") var seconds: Double = 2

    @Option(
        help: ArgumentHelp(
            "Only the raw row and one other, to profile it: get-assertion (in process), ctaphid (in process), flash "
                + "(in process, on a flash image), udp, or private (a private hidraw key through fidosim run) (perf record -g fidosim bench --only get-assertion; "
                + "perf record -p on the serve child for udp).",
            valueName: "row"
        )
    )
    var only: String?

    @Option(
        help: ArgumentHelp(
            "Measure getAssertion through this running key's hidraw node (a uhid key, in the e2e VM) against the "
                + "raw rate instead of the built-in rows. The key must approve touches (--presence approve).",
            valueName: "path"
        )
    )
    var hidDevice: String?

    @Flag(help: "Print one JSON object with every row instead of tables.")
    var json = false

    func validate() throws {
        if let only, !["get-assertion", "ctaphid", "flash", "udp", "private"].contains(only) {
            throw ValidationError("--only takes get-assertion, ctaphid, flash, udp or private")
        }
        // A row runs in slices of 25-50 ms; less than one gives no figure at all.
        guard seconds >= 0.05, seconds <= 3600 else {
            throw ValidationError("--seconds takes 0.05 to 3600")
        }
    }

    func run() throws {
        var bench = Bench(seconds: seconds, only: only, hidDevice: hidDevice)
        bench.json = json
        try bench.run()
    }
}
