import CTAPCBOR
import CTAPCore
package import ControlProtocol
import FlashImage
import FlashStore
package import Profiles
import VirtualKey

/// A flash image, as people read it.
package enum ImageReport {
    /// What `fidosim flash inspect` prints about an image: its geometry, use, wear, recovery and credentials per
    /// relying party, never a secret. The image is mounted from a copy in memory: inspecting never writes to it.
    package static func inspect(image: String) throws(KeySetupError) -> [String] {
        try report(image: image).lines
    }

    /// The same facts as lines for people and as one JSON object (`flash inspect --json`): `image`, `geometry`
    /// (`pages`, `pageSize`, `eraseEndurance`), `space` (`used`, `total`, `free` bytes), `erases` (per page),
    /// `pages` (`page`, `role`, `eraseCount`, `tail`), `clean`, `damage`, `records`, `signCount`,
    /// `discoverableCredentials`, `unreadableCredentials`, `credentialsPerRP`.
    package static func report(image: String) throws(KeySetupError) -> (lines: [String], json: JSONValue) {
        var lines: [String] = []
        var json: [String: JSONValue] = ["image": .string(image)]
        let file: FileFlash
        do {
            file = try FileFlash.open(path: image, sync: false)
        } catch {
            throw KeySetupError("\(image): \(error)")
        }
        let store: FlashKVStore<SimulatedFlash>
        do {
            store = try FlashKVStore(mounting: file.memory)
        } catch {
            throw KeySetupError("\(image): the store cannot be mounted: \(error)")
        }
        let g = store.geometry
        lines.append("image:      \(image)")
        lines.append("geometry:   \(g)")
        let c = store.capacity
        let percent = c.totalBytes == 0 ? 0 : c.usedBytes * 100 / c.totalBytes
        lines.append("space:      \(c.usedBytes) of \(c.totalBytes) bytes used (\(percent)%), \(c.freeBytes) free")
        let pages = store.pageSummaries
        let counts = pages.map(\.eraseCount)
        json["geometry"] = [
            "pages": .integer(Int64(g.pageCount)), "pageSize": .integer(Int64(g.pageSize)),
            "eraseEndurance": .integer(Int64(g.eraseEndurance)),
        ]
        json["space"] = [
            "used": .integer(Int64(c.usedBytes)), "total": .integer(Int64(c.totalBytes)),
            "free": .integer(Int64(c.freeBytes)),
        ]
        json["pages"] = .array(
            pages.map { summary in
                let role: String
                switch summary.role {
                case .free: role = "free"
                case .log: role = "log"
                case .retired: role = "retired"
                }
                return [
                    "page": .integer(Int64(summary.page)), "role": .string(role),
                    "eraseCount": .integer(Int64(summary.eraseCount)), "tail": .boolean(summary.isTail),
                ]
            }
        )
        lines.append("erases:     min \(counts.min() ?? 0), max \(counts.max() ?? 0) of \(g.eraseEndurance) per page")
        lines.append(
            "pages:      "
                + pages.map { summary in
                    switch summary.role {
                    case .free: "\(summary.page):free/\(summary.eraseCount)"
                    case .log: "\(summary.page):log\(summary.isTail ? "*" : "")/\(summary.eraseCount)"
                    case .retired: "\(summary.page):retired"
                    }
                }.joined(separator: " ")
        )
        lines.append("recovery:   \(store.recovery.isClean ? "clean (nothing to repair)" : store.recovery.description)")
        for damage in store.recovery.damage { lines.append("damage:     \(damage)") }
        lines.append("records:    \(store.count)")
        json["clean"] = .boolean(store.recovery.isClean)
        json["damage"] = .array(store.recovery.damage.map { .string("\($0)") })
        json["records"] = .integer(Int64(store.count))
        let counter = (try? store.get(StorageKey.signCounter)).flatMap { $0 }.map {
            $0.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        }
        lines.append("counter:    \(counter.map(String.init) ?? "0 (never signed)")")
        var perRP: [String: Int] = [:]
        var unreadable = 0
        for key in store.keys where key >= StorageKey.firstCredential && key <= StorageKey.lastCredential {
            if store.recovery.damagedKeys.contains(key) {
                lines.append(
                    "damaged:    credential record 0x\(String(key, radix: 16, uppercase: true)) fails its check"
                )
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
        json["signCount"] = .integer(Int64(counter ?? 0))
        json["discoverableCredentials"] = .integer(Int64(total))
        json["unreadableCredentials"] = .integer(Int64(unreadable))
        json["credentialsPerRP"] = .object(perRP.mapValues { .integer(Int64($0)) })
        lines.append("discoverable credentials: \(total)" + (unreadable > 0 ? " (\(unreadable) unreadable)" : ""))
        for (rp, n) in perRP.sorted(by: { $0.key < $1.key }) {
            lines.append("  \(TerminalText.escape(rp)): \(n)")
        }
        return (lines, .object(json))
    }
}
