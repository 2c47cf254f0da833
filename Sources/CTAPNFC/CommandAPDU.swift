/// An ISO 7816-4 status word: the last two bytes of every response APDU.
package struct StatusWord: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    package var value: UInt16

    package init(_ value: UInt16) { self.value = value }

    package static let ok = StatusWord(0x9000)
    /// CTAP's NFCCTAP_GETRESPONSE status update: the data byte is the keepalive status.
    package static let update = StatusWord(0x9100)
    package static let wrongLength = StatusWord(0x6700)
    package static let lastCommandOfChainExpected = StatusWord(0x6883)
    package static let conditionsNotSatisfied = StatusWord(0x6985)
    package static let wrongData = StatusWord(0x6A80)
    package static let fileNotFound = StatusWord(0x6A82)
    package static let incorrectP1P2 = StatusWord(0x6A86)
    package static let insNotSupported = StatusWord(0x6D00)
    package static let claNotSupported = StatusWord(0x6E00)

    /// `61XX`: XX more bytes wait for GET RESPONSE (00: 256 or more).
    package static func moreData(_ remaining: Int) -> StatusWord {
        StatusWord(0x6100 | UInt16(min(remaining, 256) & 0xFF))
    }

    package var bytes: [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }

    package var description: String {
        let hex = String(value, radix: 16, uppercase: true)
        return "SW " + String(repeating: "0", count: 4 - hex.count) + hex
    }
}

/// A command APDU (ISO 7816-4 §5.1): the header, the command data and the expected length, in the short or the
/// extended form.
package struct CommandAPDU: Equatable, Sendable {
    package var cla: UInt8
    package var ins: UInt8
    package var p1: UInt8
    package var p2: UInt8
    package var data: [UInt8]
    /// Ne, the most response bytes the reader takes (a short Le of 0 is 256, an extended one 65536); nil without
    /// an Le field.
    package var expectedLength: Int?
    package var extended: Bool

    package init(
        cla: UInt8,
        ins: UInt8,
        p1: UInt8,
        p2: UInt8,
        data: [UInt8] = [],
        expectedLength: Int? = nil,
        extended: Bool = false
    ) {
        self.cla = cla
        self.ins = ins
        self.p1 = p1
        self.p2 = p2
        self.data = data
        self.expectedLength = expectedLength
        self.extended = extended
    }

    /// Reads the four cases of ISO 7816-3 §12.1, short and extended; any other length is WRONG LENGTH.
    package static func parse(_ bytes: [UInt8]) throws(StatusWord) -> CommandAPDU {
        guard bytes.count >= 4 else { throw .wrongLength }
        var apdu = CommandAPDU(cla: bytes[0], ins: bytes[1], p1: bytes[2], p2: bytes[3])
        let body = bytes[4...]
        if body.isEmpty { return apdu }  // case 1
        let first = Int(body[body.startIndex])
        if body.count == 1 {  // case 2S
            apdu.expectedLength = first == 0 ? 256 : first
            return apdu
        }
        if first != 0 {  // cases 3S and 4S
            let end = 5 + first
            guard bytes.count == end || bytes.count == end + 1 else { throw .wrongLength }
            apdu.data = Array(bytes[5..<end])
            if bytes.count == end + 1 { apdu.expectedLength = bytes[end] == 0 ? 256 : Int(bytes[end]) }
            return apdu
        }
        // Extended: a zero byte, then two-byte lengths.
        apdu.extended = true
        guard bytes.count >= 7 else { throw .wrongLength }
        let two = Int(bytes[5]) << 8 | Int(bytes[6])
        if bytes.count == 7 {  // case 2E
            apdu.expectedLength = two == 0 ? 65536 : two
            return apdu
        }
        guard two > 0 else { throw .wrongLength }
        let end = 7 + two
        guard bytes.count == end || bytes.count == end + 2 else { throw .wrongLength }  // cases 3E, 4E
        apdu.data = Array(bytes[7..<end])
        if bytes.count == end + 2 {
            let le = Int(bytes[end]) << 8 | Int(bytes[end + 1])
            apdu.expectedLength = le == 0 ? 65536 : le
        }
        return apdu
    }

    /// The APDU's bytes, in the form it was read (short or extended).
    package var bytes: [UInt8] {
        var out = [cla, ins, p1, p2]
        if extended {
            out.append(0)
            if !data.isEmpty { out += [UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data }
            if let expectedLength {
                let le = expectedLength == 65536 ? 0 : expectedLength
                out += [UInt8(le >> 8 & 0xFF), UInt8(le & 0xFF)]
            }
        } else {
            if !data.isEmpty { out += [UInt8(data.count)] + data }
            if let expectedLength { out.append(expectedLength == 256 ? 0 : UInt8(expectedLength)) }
        }
        return out
    }
}
