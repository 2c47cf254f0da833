/// Which host each CTAPHID channel of a key belongs to, when one key is plugged into several hosts at once
/// (`serve --transport uhid --transport usbip`): one CTAPHID machine hands out the channels, and every report it
/// sends goes to the host whose `INIT` was given that channel.
///
/// A pure value: reports in (with the host they came from) and reports out (to learn which host gets them).
package struct ChannelRoutes: Sendable, Equatable {
    /// The most channels remembered; the oldest is forgotten first (hosts open a channel per operation).
    package static let capacity = 1024
    static let broadcast: UInt32 = 0xFFFF_FFFF
    static let initAnswer: UInt8 = 0x86

    /// Each channel's host.
    package private(set) var owners: [UInt32: Int] = [:]
    /// The channels in the order they were learnt, to forget the oldest.
    var order: [UInt32] = []
    /// The host whose reports are being handled: the answers made while handling them (the broadcast channel's
    /// `INIT` answer above all) go back to it.
    package private(set) var source: Int?

    package init() {}

    /// The channel a report is on: its first four bytes, big-endian.
    static func channel(_ report: [UInt8]) -> UInt32? {
        guard report.count >= 4 else { return nil }
        return report[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// Reports from `host` are about to be handled. A channel nobody owns yet becomes this host's (a host that
    /// talks on a channel it was never given still hears its error).
    package mutating func inbound(_ report: [UInt8], from host: Int) {
        source = host
        guard let channel = Self.channel(report), channel != Self.broadcast, channel != 0 else { return }
        if owners[channel] == nil { learn(channel, host) }
    }

    /// The host that gets this report: the channel's owner; for the broadcast channel (and a channel nobody owns),
    /// the host being handled. An `INIT` answer on the broadcast channel gives the new channel to that host.
    package mutating func outbound(_ report: [UInt8]) -> Int? {
        guard let channel = Self.channel(report) else { return source }
        if channel == Self.broadcast || channel == 0 {
            if report.count >= 19, report[4] == Self.initAnswer, let source,
                let assigned = Self.channel(Array(report[15..<19]))
            {
                learn(assigned, source)
            }
            return source
        }
        return owners[channel] ?? source
    }

    /// A host let go of the key while another keeps it powered: its channels are forgotten, and each gets a
    /// CTAPHID_CANCEL as if the host had sent it, so that a request of its waiting for a touch ends (a CANCEL on a
    /// channel with nothing waiting is ignored, CTAP 2.1 §11.2.9.1.5).
    package mutating func hostLeft(_ host: Int) -> [[UInt8]] {
        let channels = order.filter { owners[$0] == host }
        order.removeAll { owners[$0] == host }
        for channel in channels { owners[channel] = nil }
        if source == host { source = nil }
        return channels.map { channel in
            let cid = [
                UInt8(channel >> 24), UInt8(channel >> 16 & 0xFF), UInt8(channel >> 8 & 0xFF), UInt8(channel & 0xFF),
            ]
            return cid + [0x91, 0, 0] + Array(repeating: 0, count: 57)
        }
    }

    /// The key lost power: every channel is gone.
    package mutating func reset() {
        owners.removeAll()
        order.removeAll()
        source = nil
    }

    mutating func learn(_ channel: UInt32, _ host: Int) {
        if owners.updateValue(host, forKey: channel) == nil { order.append(channel) }
        if order.count > Self.capacity {
            let forgotten = order.removeFirst()
            owners[forgotten] = nil
        }
    }
}
