import CTAPHID
import Testing

/// A channel id used as "the host's channel" in tests (never allocated by the machine: accepted all the same).
let channelA: UInt32 = 0x0102_0304
/// A second host channel.
let channelB: UInt32 = 0x1122_3344
/// The broadcast channel id.
let broadcast: UInt32 = 0xFFFF_FFFF
/// The nonce of the `INIT` requests in tests.
let nonce: [UInt8] = [0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6, 0x07, 0x18]

/// A time `milliseconds` after the device started.
func ms(_ milliseconds: Int) -> Duration {
    .milliseconds(milliseconds)
}

/// The four bytes of a channel id, big endian.
func cidBytes(_ channel: UInt32) -> [UInt8] {
    [UInt8(channel >> 24), UInt8((channel >> 16) & 0xFF), UInt8((channel >> 8) & 0xFF), UInt8(channel & 0xFF)]
}

/// `bytes` zero-padded to 64.
func padded(_ bytes: [UInt8]) -> [UInt8] {
    bytes + [UInt8](repeating: 0, count: 64 - bytes.count)
}

/// An initialization packet with command byte `command` (bit 7 is set here) announcing `length` bytes
/// (`data.count` when nil), carrying the first 57 bytes of `data`.
func initPacket(_ channel: UInt32, _ command: UInt8, length: Int? = nil, _ data: [UInt8] = []) -> [UInt8] {
    let bcnt = length ?? data.count
    return padded(cidBytes(channel) + [command | 0x80, UInt8(bcnt >> 8), UInt8(bcnt & 0xFF)] + data.prefix(57))
}

/// An initialization packet for a known command.
func initPacket(_ channel: UInt32, _ command: CTAPHIDCommand, length: Int? = nil, _ data: [UInt8] = []) -> [UInt8] {
    initPacket(channel, command.rawValue, length: length, data)
}

/// A continuation packet.
func continuationPacket(_ channel: UInt32, _ sequence: UInt8, _ data: [UInt8] = []) -> [UInt8] {
    padded(cidBytes(channel) + [sequence] + data.prefix(59))
}

/// All reports of a message from the host: an init packet, then continuation packets 0, 1, ...
func packets(_ channel: UInt32, _ command: CTAPHIDCommand, _ payload: [UInt8]) -> [[UInt8]] {
    var reports = [initPacket(channel, command, length: payload.count, Array(payload.prefix(57)))]
    var rest = payload.dropFirst(57)
    var sequence: UInt8 = 0
    while !rest.isEmpty {
        reports.append(continuationPacket(channel, sequence, Array(rest.prefix(59))))
        rest = rest.dropFirst(59)
        sequence += 1
    }
    return reports
}

/// The `.send` actions the machine must emit for a whole message to the host.
func sends(_ channel: UInt32, _ command: CTAPHIDCommand, _ payload: [UInt8]) -> [CTAPHIDAction] {
    packets(channel, command, payload).map { .send($0) }
}

/// The `.send` action of a `CTAPHID_ERROR` report.
func errorReport(_ channel: UInt32, _ error: CTAPHIDError) -> CTAPHIDAction {
    .send(padded(cidBytes(channel) + [0xBF, 0x00, 0x01, error.rawValue]))
}

/// The `.send` action of a `CTAPHID_KEEPALIVE` report.
func keepaliveReport(_ channel: UInt32, _ status: KeepaliveStatus) -> CTAPHIDAction {
    .send(padded(cidBytes(channel) + [0xBB, 0x00, 0x01, status.rawValue]))
}

/// A payload of `count` bytes with a pattern that shows misplaced packets.
func pattern(_ count: Int, salt: Int = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8 &+ salt) }
}

/// A whole message sent to the host, reassembled from reports.
struct SentMessage: Equatable {
    var channel: UInt32
    /// The command byte as on the wire (bit 7 set).
    var command: UInt8
    var payload: [UInt8]
}

/// Reassembles the `.send` actions into messages (other actions are skipped), recording an issue for any report
/// that is not 64 bytes or out of sequence.
func reassemble(_ actions: [CTAPHIDAction], sourceLocation: SourceLocation = #_sourceLocation) -> [SentMessage] {
    var messages: [SentMessage] = []
    var current: (message: SentMessage, length: Int, sequence: UInt8)?
    for case .send(let report) in actions {
        #expect(report.count == 64, "report of \(report.count) bytes", sourceLocation: sourceLocation)
        guard report.count == 64 else { continue }
        let channel = UInt32(report[0]) << 24 | UInt32(report[1]) << 16 | UInt32(report[2]) << 8 | UInt32(report[3])
        if report[4] & 0x80 != 0 {
            #expect(current == nil, "init packet before the previous message ended", sourceLocation: sourceLocation)
            let length = Int(report[5]) << 8 | Int(report[6])
            let message = SentMessage(
                channel: channel,
                command: report[4],
                payload: Array(report[7..<(7 + min(57, length))])
            )
            current = (message, length, 0)
        } else {
            guard var partial = current else {
                Issue.record("continuation without init packet", sourceLocation: sourceLocation)
                continue
            }
            #expect(report[4] == partial.sequence && channel == partial.message.channel, sourceLocation: sourceLocation)
            let take = min(59, partial.length - partial.message.payload.count)
            partial.message.payload += report[5..<(5 + take)]
            partial.sequence += 1
            current = partial
        }
        if let partial = current, partial.message.payload.count == partial.length {
            messages.append(partial.message)
            current = nil
        }
    }
    #expect(current == nil, "unfinished message", sourceLocation: sourceLocation)
    return messages
}

extension CTAPHIDMachine {
    /// Feeds several reports at the same time and returns all actions.
    mutating func receive(_ reports: [[UInt8]], now: Duration) -> [CTAPHIDAction] {
        reports.flatMap { self.receive(report: $0, now: now) }
    }

    /// Allocates a channel with a broadcast `INIT` and returns its id.
    mutating func allocateChannel(now: Duration = .zero) -> UInt32 {
        let actions = self.receive(report: initPacket(broadcast, .initialize, nonce), now: now)
        guard case .send(let report) = actions.first, actions.count == 1 else {
            Issue.record("INIT not answered with one report: \(actions)")
            return 0
        }
        return UInt32(report[15]) << 24 | UInt32(report[16]) << 16 | UInt32(report[17]) << 8 | UInt32(report[18])
    }

    /// Delivers a one-packet `CBOR` request on `channel` and checks it was delivered.
    mutating func startRequest(on channel: UInt32, payload: [UInt8] = [0x04], now: Duration) {
        let actions = self.receive(report: initPacket(channel, .cbor, payload), now: now)
        #expect(actions == [.deliver(channel: channel, command: .cbor, payload: payload)])
    }
}

/// A small deterministic generator (SplitMix64) for fuzz tests.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
