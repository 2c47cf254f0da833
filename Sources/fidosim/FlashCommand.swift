import ArgumentParser
import CTAPCBOR
import CTAPCore
import ControlProtocol
import FlashImage
import FlashStore
import HIDBridge

#if canImport(Glibc)
import Glibc
#endif

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
            let file: FileFlash
            do {
                file = try FileFlash.open(path: image, sync: false)
            } catch {
                printError("fidosim: \(image): \(error)")
                throw ExitCode(1)
            }
            // Mount a copy in memory: inspecting never writes to the image, even when it needs repair.
            let store: FlashKVStore<SimulatedFlash>
            do {
                store = try FlashKVStore(mounting: file.memory)
            } catch {
                printError("fidosim: \(image): the store cannot be mounted: \(error)")
                throw ExitCode(1)
            }
            let g = store.geometry
            print("image:      \(image)")
            print("geometry:   \(g)")
            let c = store.capacity
            let percent = c.totalBytes == 0 ? 0 : c.usedBytes * 100 / c.totalBytes
            print("space:      \(c.usedBytes) of \(c.totalBytes) bytes used (\(percent)%), \(c.freeBytes) free")
            let pages = store.pageSummaries
            let counts = pages.map(\.eraseCount)
            print("erases:     min \(counts.min() ?? 0), max \(counts.max() ?? 0) of \(g.eraseEndurance) per page")
            print(
                "pages:      "
                    + pages.map { summary in
                        switch summary.role {
                        case .free: "\(summary.page):free/\(summary.eraseCount)"
                        case .log: "\(summary.page):log\(summary.isTail ? "*" : "")/\(summary.eraseCount)"
                        case .retired: "\(summary.page):retired"
                        }
                    }.joined(separator: " ")
            )
            print("recovery:   \(store.recovery.isClean ? "clean (nothing to repair)" : store.recovery.description)")
            for damage in store.recovery.damage { print("damage:     \(damage)") }
            print("records:    \(store.count)")
            let counter = (try? store.get(StorageKey.signCounter)).flatMap { $0 }.map {
                $0.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            }
            print("counter:    \(counter.map(String.init) ?? "0 (never signed)")")
            var perRP: [String: Int] = [:]
            var unreadable = 0
            for key in store.keys where key >= StorageKey.firstCredential && key <= StorageKey.lastCredential {
                if store.recovery.damagedKeys.contains(key) {
                    print("damaged:    credential record 0x\(String(key, radix: 16, uppercase: true)) fails its check")
                }
                guard let bytes = (try? store.get(key)).flatMap({ $0 }),
                    let record = try? CBORDecoder.decode(bytes), let rp = record[2]?.textValue
                else {
                    unreadable += 1
                    continue
                }
                perRP[rp, default: 0] += 1
            }
            let total = perRP.values.reduce(0, +)
            print("discoverable credentials: \(total)" + (unreadable > 0 ? " (\(unreadable) unreadable)" : ""))
            for (rp, n) in perRP.sorted(by: { $0.key < $1.key }) {
                print("  \(TerminalText.escape(rp)): \(n)")
            }
        }
    }
}
