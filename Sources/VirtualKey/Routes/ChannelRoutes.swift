/// Which host each CTAPHID channel of a key belongs to, when one key is plugged into several hosts at once
/// (`serve --transport uhid --transport usbip`): each host has its own CTAPHID machine in the key
/// (``VirtualKey/addHost(channelKey:)``), and a channel is a host's once the key's `INIT` answer gave it to that host.
///
/// A host reaches the key only on the broadcast channel and on the channels the key gave it (learnt from the `INIT`
/// answers, never from what a host sends): a report on any other channel, nobody's or another host's, never reaches
/// the key, and the host hears ERR_INVALID_CHANNEL, as from a key that never gave it that channel. Each host keeps
/// its ``capacity`` newest channels, so no host can push another's out.
///
/// A pure value: reports in (with the host they came from) and reports out (with the host they go to).
package struct ChannelRoutes: Sendable, Equatable {
    /// The most channels remembered for each host; its oldest is forgotten first (hosts open a channel per operation).
    package static let capacity = 1024
    static let broadcast: UInt32 = 0xFFFF_FFFF
    static let initAnswer: UInt8 = 0x86

    /// Each host's channels. Two hosts' machines may give the same id: it is then a channel of each.
    package private(set) var channels: [Int: Set<UInt32>] = [:]
    /// Each host's channels in the order they were given, to forget a host's oldest.
    var order: [Int: [UInt32]] = [:]

    package init() {}

    /// The channel a report is on: its first four bytes, big-endian.
    static func channel(_ report: [UInt8]) -> UInt32? {
        guard report.count >= 4 else { return nil }
        return report[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// What to do with a report from `host`.
    package enum Inbound: Equatable, Sendable {
        /// Hand it to the key.
        case deliver
        /// Answer the host with this report instead (ERR_INVALID_CHANNEL on the report's channel).
        case refuse([UInt8])
        /// Drop it (a continuation on a channel not the host's, or a report too short to have a channel).
        case drop
    }

    /// A report from `host`: for the key if it is on the broadcast channel or on one of this host's channels.
    package func inbound(_ report: [UInt8], from host: Int) -> Inbound {
        guard let channel = Self.channel(report), report.count >= 5 else { return .drop }
        guard channel == Self.broadcast || channels[host]?.contains(channel) == true else {
            // An initialization packet gets the error a key answers on a channel it never gave; a continuation
            // packet gets nothing, as from a key.
            guard report[4] & 0x80 != 0 else { return .drop }
            return .refuse(Array(report[0..<4]) + [0xBF, 0x00, 0x01, 0x0B] + Array(repeating: 0, count: 56))
        }
        return .deliver
    }

    /// The key sends `report` to `host`: whether it goes out. It does on the broadcast channel and on the host's own
    /// channels (not on one the host has let go of); an `INIT` answer on the broadcast channel gives the host the new
    /// channel.
    package mutating func outbound(_ report: [UInt8], to host: Int) -> Bool {
        guard let channel = Self.channel(report) else { return false }
        guard channel == Self.broadcast else { return channels[host]?.contains(channel) == true }
        guard report.count >= 19, report[4] == Self.initAnswer, let assigned = Self.channel(Array(report[15..<19])),
            channels[host, default: []].insert(assigned).inserted
        else { return true }
        order[host, default: []].append(assigned)
        if let mine = order[host], mine.count > Self.capacity {
            channels[host]?.remove(mine[0])
            order[host]?.removeFirst()
        }
        return true
    }

    /// A host let go of the key while another keeps it powered: its channels are forgotten (nothing more goes out
    /// on them; the key ends that host's request itself, ``VirtualKey/hostLeft(_:)``).
    package mutating func hostLeft(_ host: Int) {
        order[host] = nil
        channels[host] = nil
    }

    /// The key lost power: every channel is gone.
    package mutating func reset() {
        channels.removeAll()
        order.removeAll()
    }
}
