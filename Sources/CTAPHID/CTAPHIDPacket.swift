/// One parsed 64-byte CTAPHID report (CTAP 2.1 §11.2.4).
///
/// Initialization packet: `CID(4, big endian) | CMD (bit 7 set) | BCNTH | BCNTL | DATA(57)`.
/// Continuation packet: `CID(4) | SEQ (0...0x7F) | DATA(59)`.
enum CTAPHIDPacket: Equatable, Sendable {
    /// The first packet of a message.
    case initialization(InitializationPacket)
    /// A following packet of a message.
    case continuation(ContinuationPacket)

    /// The size of every report, in bytes.
    static let reportSize = 64
    /// The size of the shortest report accepted: a channel id and one more byte.
    static let minimumReportSize = 5
    /// The payload bytes an initialization packet carries.
    static let initializationDataSize = 57
    /// The payload bytes a continuation packet carries.
    static let continuationDataSize = 59
    /// The largest sequence number of a continuation packet.
    static let maximumSequence: UInt8 = 0x7F
    /// The longest payload one message can carry: 57 + 128 × 59 = 7609 bytes.
    static let maximumPayloadSize = initializationDataSize + (Int(maximumSequence) + 1) * continuationDataSize

    /// Parses a report; `nil` when it is shorter than 5 or longer than 64 bytes. Shorter reports are zero-padded.
    init?(report: [UInt8]) {
        guard report.count >= Self.minimumReportSize, report.count <= Self.reportSize else {
            return nil
        }
        var bytes = report
        bytes.append(contentsOf: repeatElement(0, count: Self.reportSize - report.count))
        let channel = UInt32(bytes[0]) << 24 | UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3])
        if bytes[4] & 0x80 != 0 {
            let length = Int(bytes[5]) << 8 | Int(bytes[6])
            self = .initialization(
                InitializationPacket(
                    channel: channel,
                    command: bytes[4] & 0x7F,
                    length: length,
                    data: Array(bytes[7...])
                )
            )
        } else {
            self = .continuation(ContinuationPacket(channel: channel, sequence: bytes[4], data: Array(bytes[5...])))
        }
    }

    /// Splits a message into zero-padded 64-byte reports; the payload must be at most 7609 bytes.
    static func reports(channel: UInt32, command: UInt8, payload: [UInt8]) -> [[UInt8]] {
        precondition(payload.count <= Self.maximumPayloadSize, "CTAPHID payload too long to frame")
        // Each report is made once at its full size and filled in place (no intermediate arrays).
        let continuations =
            max(0, payload.count - Self.initializationDataSize + Self.continuationDataSize - 1)
            / Self.continuationDataSize
        var reports: [[UInt8]] = []
        reports.reserveCapacity(1 + continuations)
        // `length` is the initialization packet's BCNT; the payload's bytes are copied one by one, which costs less
        // than the generic replaceSubrange (a type metadata lookup on every call).
        func report(header: UInt8, length: Int?, _ data: ArraySlice<UInt8>) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: Self.reportSize)
            bytes[0] = UInt8(truncatingIfNeeded: channel >> 24)
            bytes[1] = UInt8(truncatingIfNeeded: channel >> 16)
            bytes[2] = UInt8(truncatingIfNeeded: channel >> 8)
            bytes[3] = UInt8(truncatingIfNeeded: channel)
            bytes[4] = header
            var index = 5
            if let length {
                bytes[5] = UInt8(truncatingIfNeeded: length >> 8)
                bytes[6] = UInt8(truncatingIfNeeded: length)
                index = 7
            }
            for byte in data {
                bytes[index] = byte
                index += 1
            }
            return bytes
        }
        var offset = min(payload.count, Self.initializationDataSize)
        reports.append(report(header: command | 0x80, length: payload.count, payload[0..<offset]))
        var sequence: UInt8 = 0
        while offset < payload.count {
            let end = min(payload.count, offset + Self.continuationDataSize)
            reports.append(report(header: sequence, length: nil, payload[offset..<end]))
            offset = end
            sequence += 1
        }
        return reports
    }
}

/// The fields of an initialization packet.
struct InitializationPacket: Equatable, Sendable {
    /// The channel id.
    var channel: UInt32
    /// The command byte without bit 7; may be a value that ``CTAPHIDCommand`` does not know.
    var command: UInt8
    /// The total payload length announced (BCNT).
    var length: Int
    /// The 57 data bytes of the packet, padding included.
    var data: [UInt8]
}

/// The fields of a continuation packet.
struct ContinuationPacket: Equatable, Sendable {
    /// The channel id.
    var channel: UInt32
    /// The sequence number, 0...0x7F.
    var sequence: UInt8
    /// The 59 data bytes of the packet, padding included.
    var data: [UInt8]
}

extension UInt32 {
    /// The four bytes of the value, most significant first (the byte order of a CTAPHID channel id).
    var bigEndianBytes: [UInt8] {
        [
            UInt8(truncatingIfNeeded: self >> 24), UInt8(truncatingIfNeeded: self >> 16),
            UInt8(truncatingIfNeeded: self >> 8), UInt8(truncatingIfNeeded: self),
        ]
    }
}
