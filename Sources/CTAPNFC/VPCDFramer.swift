/// What vpcd (vsmartcard's PC/SC reader driver) tells the virtual card, one message at a time.
package enum VPCDMessage: Equatable, Sendable {
    /// The reader cut the card's power.
    case powerOff
    /// The reader powered the card.
    case powerOn
    /// The reader reset the card (a warm reset: power stays, the card starts over).
    case reset
    /// The reader asks for the card's ATR; the card answers with it.
    case getATR
    /// A command APDU; the card answers with one response APDU.
    case apdu([UInt8])
    /// A one-byte control message this card does not know (ignored).
    case unknownControl(UInt8)
}

/// The framing of vpcd's TCP stream: every message, both ways, is a two-byte big-endian length and that many
/// bytes. A one-byte message from the reader is a control code (0 power off, 1 power on, 2 reset, 4 ATR); any
/// longer one is an APDU. Bytes in, messages out; it holds at most one partial message.
package struct VPCDFramer: Sendable {
    /// A message of length 0 (vpcd never sends one): the stream is out of step.
    package struct Malformed: Error, Equatable, Sendable {}

    var buffer: [UInt8] = []

    package init() {}

    /// The bytes of a partial message still waiting for the rest.
    package var pending: Int { buffer.count }

    /// Takes bytes from the stream; returns the messages they complete.
    package mutating func feed(_ bytes: [UInt8]) throws(Malformed) -> [VPCDMessage] {
        buffer += bytes
        var messages: [VPCDMessage] = []
        var start = 0
        while buffer.count - start >= 2 {
            let length = Int(buffer[start]) << 8 | Int(buffer[start + 1])
            guard length > 0 else {
                buffer = []
                throw Malformed()
            }
            guard buffer.count - start - 2 >= length else { break }
            let body = Array(buffer[(start + 2)..<(start + 2 + length)])
            start += 2 + length
            if length == 1 {
                switch body[0] {
                case 0x00: messages.append(.powerOff)
                case 0x01: messages.append(.powerOn)
                case 0x02: messages.append(.reset)
                case 0x04: messages.append(.getATR)
                case let code: messages.append(.unknownControl(code))
                }
            } else {
                messages.append(.apdu(body))
            }
        }
        buffer.removeFirst(start)
        return messages
    }

    /// One message from the card: its length and the bytes (an answer longer than 65535 bytes cannot be framed;
    /// the NFC binding never makes one).
    package static func frame(_ payload: [UInt8]) -> [UInt8] {
        let length = min(payload.count, 0xFFFF)
        return [UInt8(length >> 8), UInt8(length & 0xFF)] + payload.prefix(length)
    }

    /// fidosim's ATR, as a contactless card's reader presents it (PC/SC part 3): TS 3B, T0 8C (12 historical
    /// bytes, TD1 follows), TD1 80, TD2 01 (T=1), the historical bytes (category 80, card capabilities 73 C0 21 C0,
    /// then `fidosim`) and the check byte, the XOR of T0 to the last historical byte.
    package static let atr: [UInt8] = {
        let historical: [UInt8] = [0x80, 0x73, 0xC0, 0x21, 0xC0] + Array("fidosim".utf8)
        let body: [UInt8] = [0x80 | UInt8(historical.count), 0x80, 0x01] + historical
        return [0x3B] + body + [body.reduce(0, ^)]
    }()
}
