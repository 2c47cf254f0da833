/// A UDP sender: IPv4 address and port, both in host byte order.
package struct UDPPeer: Hashable, Sendable, CustomStringConvertible {
    package var address: UInt32
    package var port: UInt16

    package init(address: UInt32, port: UInt16) {
        self.address = address
        self.port = port
    }

    package var description: String {
        "\(address >> 24).\(address >> 16 & 0xFF).\(address >> 8 & 0xFF).\(address & 0xFF):\(port)"
    }

    package var isLoopback: Bool { address >> 24 == 127 }
}

/// Who hears the key's answers on UDP, where every client shares one socket: a transaction's reports go only to the
/// sender of its initialization packet, and while its answer is owed, reports from anyone else on that channel get
/// CHANNEL_BUSY from here and never reach the key, so no second client can read or disturb the first one's
/// transaction (on USB the kernel gives each open device its own reports; UDP has no such thing).
///
/// A report on a channel the key never gave by `INIT` (learnt from its answers, ``ChannelRoutes``) gets
/// ERR_INVALID_CHANNEL from here and never reaches the key, whatever the key's own CTAPHID rules (some keys, Solo 1
/// among them, serve any channel): a sender who cannot read the answers, and so never learns a channel, must guess
/// a 32-bit one. Channels once given stay open through power cycles (clients keep them, as over USB they would
/// INIT again).
///
/// Pure: reports, senders and time in; what to do with them out.
package struct UDPRouter: Sendable {
    struct Claim: Sendable {
        var peer: UDPPeer
        /// The key owes this peer an answer on the channel.
        var busy: Bool
        /// Continuation reports of the answer still to go.
        var remaining: Int
        /// When the channel last carried a report of this peer's transaction, either way.
        var lastActivity: Duration
    }

    package enum Inbound: Equatable, Sendable {
        /// Hand the report to the key.
        case deliver
        /// Answer the sender with this report (CHANNEL_BUSY) instead.
        case refuse([UInt8])
        /// Too short to be a report.
        case ignore
    }

    var claims: [UInt32: Claim] = [:]
    /// The channels the key gave (its newest ``ChannelRoutes/capacity``), as one host.
    var given = ChannelRoutes()
    /// A transaction whose channel has been silent this long no longer holds it (the key answers every request,
    /// sends keepalives while it works, and times a half-sent message out within seconds; this only frees a
    /// channel whose request the key had no answer for).
    package var silenceLimit: Duration = .seconds(5)
    /// The most channels remembered; beyond it the least recently active ones that owe nothing are forgotten.
    package var maxClaims = 1024

    package init() {}

    static let keepalive: UInt8 = 0xBB
    static let cancel: UInt8 = 0x91
    static let error: UInt8 = 0xBF

    static func channel(_ report: [UInt8]) -> UInt32 {
        UInt32(report[0]) << 24 | UInt32(report[1]) << 16 | UInt32(report[2]) << 8 | UInt32(report[3])
    }

    /// Whether `report` is on a channel the key gave (not the broadcast channel): its sender knows the channel.
    package func onGivenChannel(_ report: [UInt8]) -> Bool {
        guard report.count >= 5 else { return false }
        return given.channels[0]?.contains(Self.channel(report)) == true
    }

    /// A report from `peer`.
    package mutating func inbound(_ report: [UInt8], from peer: UDPPeer, now: Duration) -> Inbound {
        guard report.count >= 5 else { return .ignore }
        switch given.inbound(report, from: 0) {
        case .deliver: break
        case .refuse(let answer): return .refuse(answer)
        case .drop: return .ignore
        }
        let channel = Self.channel(report)
        if let claim = claims[channel], claim.peer != peer, claim.busy, now - claim.lastActivity < silenceLimit {
            return .refuse(Array(report[0..<4]) + [Self.error, 0x00, 0x01, 0x06] + Array(repeating: 0, count: 56))
        }
        if report[4] & 0x80 != 0 {
            // CANCEL asks nothing of its own; it only ends the transaction its sender already owns.
            let owes = report[4] != Self.cancel || claims[channel]?.busy == true
            claims[channel] = Claim(peer: peer, busy: owes, remaining: 0, lastActivity: now)
        } else if claims[channel]?.peer == peer {
            claims[channel]?.lastActivity = now
        } else {
            // A continuation without its start: the key drops or refuses it, and any answer goes to its sender.
            claims[channel] = Claim(peer: peer, busy: false, remaining: 0, lastActivity: now)
        }
        if claims.count > maxClaims { forgetIdle() }
        return .deliver
    }

    /// Where a report from the key goes; nil when no one is waiting on its channel.
    package mutating func outbound(_ report: [UInt8], now: Duration) -> UDPPeer? {
        guard report.count >= 5 else { return nil }
        _ = given.outbound(report, to: 0)
        let channel = Self.channel(report)
        guard var claim = claims[channel] else { return nil }
        if report[4] & 0x80 != 0 {
            if report[4] != Self.keepalive {
                let length = report.count >= 7 ? Int(report[5]) << 8 | Int(report[6]) : 0
                claim.remaining = length > 57 ? (length - 57 + 58) / 59 : 0
                claim.busy = claim.remaining > 0
            }
        } else if claim.remaining > 0 {
            claim.remaining -= 1
            claim.busy = claim.remaining > 0
        }
        claim.lastActivity = now
        claims[channel] = claim
        return claim.peer
    }

    /// The key was unplugged: it owes no one an answer any more. Who spoke last on each channel is kept, so the
    /// answer to a request that came right after the power cycle still finds its sender.
    package mutating func release() {
        for channel in claims.keys {
            claims[channel]?.busy = false
            claims[channel]?.remaining = 0
        }
    }

    mutating func forgetIdle() {
        let idle = claims.filter { !$0.value.busy }.sorted { $0.value.lastActivity < $1.value.lastActivity }
        for (channel, _) in idle.prefix(max(claims.count - maxClaims * 3 / 4, 0)) { claims[channel] = nil }
        if claims.count > maxClaims {
            // Everyone owes: the oldest go (a flood of half-started transactions).
            let oldest = claims.sorted { $0.value.lastActivity < $1.value.lastActivity }
            for (channel, _) in oldest.prefix(claims.count - maxClaims * 3 / 4) { claims[channel] = nil }
        }
    }
}
