#if canImport(Glibc)
import CTAPCBOR
import Glibc
#endif

/// CTAPHID command bytes (CTAP 2.1 §11.2.9), with the initialization-packet bit set.
package enum HIDCommand {
    package static let ping: UInt8 = 0x81
    package static let msg: UInt8 = 0x83
    package static let lock: UInt8 = 0x84
    package static let initialize: UInt8 = 0x86
    package static let wink: UInt8 = 0x88
    package static let cbor: UInt8 = 0x90
    package static let cancel: UInt8 = 0x91
    package static let keepalive: UInt8 = 0xBB
    package static let error: UInt8 = 0xBF
}

/// CTAPHID error codes (CTAP 2.1 §11.2.9.1.6).
package enum HIDErrorCode {
    package static let invalidCommand: UInt8 = 0x01
    package static let invalidParameter: UInt8 = 0x02
    package static let invalidLength: UInt8 = 0x03
    package static let invalidSequence: UInt8 = 0x04
    package static let messageTimeout: UInt8 = 0x05
    package static let channelBusy: UInt8 = 0x06
    package static let lockRequired: UInt8 = 0x0A
    package static let invalidChannel: UInt8 = 0x0B
    package static let other: UInt8 = 0x7F
}

/// A whole CTAPHID message as the key answered it.
package struct HIDMessage: Equatable, Sendable {
    package var channel: UInt32
    package var command: UInt8
    package var payload: [UInt8]
}

/// What CTAPHID_INIT answers (CTAP 2.1 §11.2.9.1.3).
package struct HIDInitResponse: Equatable, Sendable {
    package var nonce: [UInt8]
    package var channel: UInt32
    package var protocolVersion: UInt8
    package var deviceVersion: (major: UInt8, minor: UInt8, build: UInt8)
    package var capabilities: UInt8

    package var wink: Bool { capabilities & 0x01 != 0 }
    package var cbor: Bool { capabilities & 0x04 != 0 }
    /// NMSG: the key does not take CTAPHID_MSG (no U2F).
    package var noMessage: Bool { capabilities & 0x08 != 0 }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.nonce == rhs.nonce && lhs.channel == rhs.channel && lhs.protocolVersion == rhs.protocolVersion
            && lhs.deviceVersion == rhs.deviceVersion && lhs.capabilities == rhs.capabilities
    }
}

/// The host side of CTAPHID: splits messages into reports, reassembles answers on one channel, skips keepalives
/// (telling the caller), and cancels.
package final class CTAPHIDClient {
    package static let broadcast: UInt32 = 0xFFFF_FFFF
    /// The largest payload 64-byte reports carry: 57 bytes in the first, 59 in each of 128 continuations.
    package static let maxPayload = 57 + 128 * 59

    package let channel: any ReportChannel
    /// The channel INIT allocated (broadcast before INIT).
    package var cid: UInt32 = CTAPHIDClient.broadcast
    package private(set) var info: HIDInitResponse?
    /// Keepalive status bytes seen during the last `transact`, with their arrival times in milliseconds.
    package private(set) var keepalives: [(status: UInt8, atMs: Double)] = []

    package init(channel: any ReportChannel) {
        self.channel = channel
    }

    /// The reports of one message: an initialization packet and as many continuation packets as needed,
    /// each zero-padded to 64 bytes. `length` overrides the length field (to send a wrong one).
    package static func reports(channel cid: UInt32, command: UInt8, payload: [UInt8], length: Int? = nil) -> [[UInt8]]
    {
        let declared = length ?? payload.count
        var first = channelBytes(cid) + [command, UInt8((declared >> 8) & 0xFF), UInt8(declared & 0xFF)]
        first += payload.prefix(57)
        var out = [pad(first)]
        var offset = min(57, payload.count)
        var sequence: UInt8 = 0
        while offset < payload.count {
            let chunk = payload[offset..<min(offset + 59, payload.count)]
            out.append(pad(channelBytes(cid) + [sequence] + chunk))
            offset += chunk.count
            sequence &+= 1
        }
        return out
    }

    package static func channelBytes(_ cid: UInt32) -> [UInt8] {
        [UInt8(cid >> 24), UInt8((cid >> 16) & 0xFF), UInt8((cid >> 8) & 0xFF), UInt8(cid & 0xFF)]
    }

    package static func pad(_ report: [UInt8]) -> [UInt8] {
        report.count >= 64 ? Array(report.prefix(64)) : report + [UInt8](repeating: 0, count: 64 - report.count)
    }

    /// Allocates a channel: CTAPHID_INIT on the broadcast channel with a random nonce.
    @discardableResult
    package func initialize(timeoutMs: Int = 2000) throws(ClientError) -> HIDInitResponse {
        let nonce = randomBytes(8)
        let answer = try transact(
            command: HIDCommand.initialize,
            payload: nonce,
            on: Self.broadcast,
            timeoutMs: timeoutMs
        )
        let response = try Self.parseInit(answer, nonce: nonce)
        cid = response.channel
        info = response
        return response
    }

    package static func parseInit(_ message: HIDMessage, nonce: [UInt8]) throws(ClientError) -> HIDInitResponse {
        if message.command == HIDCommand.error { throw .hidError(message.payload.first ?? 0) }
        guard message.command == HIDCommand.initialize, message.payload.count >= 17 else {
            throw .malformed(
                "INIT answered command 0x\(Hex.string(message.command)) with \(message.payload.count) bytes"
            )
        }
        let p = message.payload
        guard Array(p[0..<8]) == nonce else { throw .malformed("INIT answered another nonce") }
        let cid = UInt32(p[8]) << 24 | UInt32(p[9]) << 16 | UInt32(p[10]) << 8 | UInt32(p[11])
        return HIDInitResponse(
            nonce: nonce,
            channel: cid,
            protocolVersion: p[12],
            deviceVersion: (p[13], p[14], p[15]),
            capabilities: p[16]
        )
    }

    /// Sends a whole message.
    package func send(command: UInt8, payload: [UInt8], on cid: UInt32? = nil) throws(ClientError) {
        guard payload.count <= Self.maxPayload else {
            throw .transport(
                "a payload of \(payload.count) bytes does not fit in CTAPHID reports (at most \(Self.maxPayload))"
            )
        }
        for report in Self.reports(channel: cid ?? self.cid, command: command, payload: payload) {
            try channel.send(report)
        }
    }

    /// Receives the next whole message on `cid`, skipping other channels' reports. Keepalives are recorded in
    /// `keepalives` and reported to `onKeepalive`; they restart no clock: `timeoutMs` bounds the whole wait.
    package func receive(
        on cid: UInt32? = nil,
        timeoutMs: Int = 5000,
        onKeepalive: ((UInt8) -> Void)? = nil
    )
        throws(ClientError) -> HIDMessage
    {
        let want = cid ?? self.cid
        let start = Self.nowMs()
        var assembler = HIDMessageAssembler(channel: want)
        while true {
            let left = Double(timeoutMs) - (Self.nowMs() - start)
            guard left > 0, let report = try channel.receive(timeoutMs: Int(left.rounded(.up))) else {
                throw .timeout("an answer on channel \(String(want, radix: 16))")
            }
            switch try assembler.add(report) {
            case .pending: continue
            case .keepalive(let status):
                keepalives.append((status, Self.nowMs()))
                onKeepalive?(status)
            case .message(let message): return message
            }
        }
    }

    /// Sends a message and returns the answer on the same channel (ERROR answers are returned, not thrown).
    package func transact(
        command: UInt8,
        payload: [UInt8],
        on cid: UInt32? = nil,
        timeoutMs: Int = 30000,
        onKeepalive: ((UInt8) -> Void)? = nil
    ) throws(ClientError) -> HIDMessage {
        keepalives = []
        try send(command: command, payload: payload, on: cid)
        return try receive(on: cid, timeoutMs: timeoutMs, onKeepalive: onKeepalive)
    }

    /// Sends CTAPHID_CANCEL on this channel (it has no answer of its own).
    package func cancel() throws(ClientError) {
        try send(command: HIDCommand.cancel, payload: [])
    }

    /// Reads and drops every report that arrives within `ms` milliseconds.
    package func drain(ms: Int = 50) {
        while (try? channel.receive(timeoutMs: ms)) != nil {}
    }

    package static func nowMs() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) * 1000 + Double(now.tv_nsec) / 1_000_000
    }
}

/// Bytes from the system's random source.
package func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
}

/// Reassembles the answer on one channel from the reports a key sends: reports of other channels are passed over,
/// keepalives are handed back as they come, and the message when its last report is in.
package struct HIDMessageAssembler: Sendable {
    package enum Step: Equatable, Sendable {
        /// Nothing yet: another channel's report, or a part of the message.
        case pending
        /// A KEEPALIVE with its status byte.
        case keepalive(UInt8)
        /// The whole message.
        case message(HIDMessage)
    }

    package let channel: UInt32
    var message: HIDMessage?
    var expected = 0
    var nextSequence: UInt8 = 0

    package init(channel: UInt32) {
        self.channel = channel
    }

    /// The channel a report is on; nil for one too short to have a command byte.
    package static func channel(of report: [UInt8]) -> UInt32? {
        report.count >= 5
            ? UInt32(report[0]) << 24 | UInt32(report[1]) << 16 | UInt32(report[2]) << 8 | UInt32(report[3]) : nil
    }

    /// Takes one report; throws on one that cannot belong to a well-formed answer on this channel.
    package mutating func add(_ report: [UInt8]) throws(ClientError) -> Step {
        guard Self.channel(of: report) == channel else { return .pending }
        if report[4] & 0x80 != 0 {
            guard report.count >= 7 else { throw .malformed("an initialization packet of \(report.count) bytes") }
            let length = Int(report[5]) << 8 | Int(report[6])
            guard length <= CTAPHIDClient.maxPayload else {
                throw .malformed("a message of \(length) bytes declared (at most \(CTAPHIDClient.maxPayload))")
            }
            if report[4] == HIDCommand.keepalive {
                // A short report may end before the status byte its length announces.
                return .keepalive(length > 0 && report.count > 7 ? report[7] : 0)
            }
            message = HIDMessage(channel: channel, command: report[4], payload: Array(report[7...].prefix(length)))
            expected = length
            nextSequence = 0
        } else {
            guard message != nil else { throw .malformed("a continuation packet before any initialization packet") }
            guard report[4] == nextSequence else {
                throw .malformed("continuation sequence \(report[4]) where \(nextSequence) was due")
            }
            message!.payload += report[5...].prefix(expected - message!.payload.count)
            nextSequence &+= 1
        }
        guard let done = message, done.payload.count >= expected else { return .pending }
        message = nil
        return .message(done)
    }
}
