import CTAPCBOR
import FIDOClient

/// The NFC binding's APDU level (CTAP 2.1 §11.3; ISO 7816-4 for selection, chaining and status words), for a card
/// in a PC/SC reader (`--device pcsc:READER`). Every check leaves the FIDO applet selected.
enum NFCChecks {
    /// An SW as four hex digits.
    static func word(_ status: UInt16) -> String {
        let digits = String(status, radix: 16, uppercase: true)
        return "SW " + String(repeating: "0", count: 4 - digits.count) + digits
    }

    static func expectWord(_ response: ResponseAPDU, _ expected: UInt16, _ what: String) throws {
        guard response.status == expected else {
            throw CheckFailure(what, expected: word(expected), actual: word(response.status))
        }
    }

    /// getInfo's answer through the card, as the runner's client gets it (Le 00, GET RESPONSE for the rest).
    static func getInfo(_ card: PCSCCard) throws -> ResponseAPDU {
        try card.transmit([0x80, 0x10, 0x00, 0x00, 0x01, 0x04, 0x00])
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "nfc.select",
            .nfc,
            "CTAP 2.1 §11.3.3",
            "SELECT of the FIDO AID answers the version string: U2F_V2, or FIDO_2_0 for a key without U2F"
        ) { ctx in
            let card = try ctx.card
            let answer = try card.transmit(
                [0x00, 0xA4, 0x04, 0x00, UInt8(PCSCCard.aid.count)] + PCSCCard.aid + [0x00]
            )
            try expectWord(answer, 0x9000, "SELECT A0000006472F0001")
            let version = String(decoding: answer.data, as: UTF8.self)
            guard version == "U2F_V2" || version == "FIDO_2_0" else {
                throw CheckFailure("SELECT's answer", expected: "U2F_V2 or FIDO_2_0", actual: version)
            }
            ctx.notes.append("nfc.select: \(version); ATR \(Hex.string(card.atr))")
        },
        ConformanceCheck(
            "nfc.select.unknown-aid",
            .nfc,
            "ISO 7816-4 §7.1.1",
            "SELECT of another AID is file not found (6A82)"
        ) { ctx in
            let card = try ctx.card
            let other: [UInt8] = [0xA0, 0x00, 0x00, 0x06, 0x47, 0x2F, 0x00, 0x7F]
            let answer = try card.transmit([0x00, 0xA4, 0x04, 0x00, UInt8(other.count)] + other + [0x00])
            try card.connect()  // selects the FIDO applet again
            try expectWord(answer, 0x6A82, "SELECT of an AID the card does not have")
        },
        ConformanceCheck(
            "nfc.instruction.unknown",
            .nfc,
            "ISO 7816-4 §5.6",
            "an instruction the applet does not have is 6D00"
        ) { ctx in
            let answer = try (try ctx.card).transmit([0x80, 0xCB, 0x00, 0x00, 0x00])
            try expectWord(answer, 0x6D00, "INS 0xCB")
        },
        ConformanceCheck(
            "nfc.class.unknown",
            .nfc,
            "ISO 7816-4 §5.6",
            "a class byte the applet does not take is 6E00"
        ) { ctx in
            let answer = try (try ctx.card).transmit([0x40, 0x10, 0x00, 0x00, 0x01, 0x04, 0x00])
            try expectWord(answer, 0x6E00, "CLA 0x40")
        },
        ConformanceCheck(
            "nfc.chaining.command",
            .nfc,
            "CTAP 2.1 §11.3.5; ISO 7816-4 §5.1.1.1",
            "a request sent as a command chain (CLA bit 0x10) gets the answer it gets whole"
        ) { ctx in
            let card = try ctx.card
            // clientPIN getPINRetries (protocol 1), in two parts of three bytes.
            let request: [UInt8] = [0x06, 0xA2, 0x01, 0x01, 0x02, 0x01]
            let whole = try card.transmit([0x80, 0x10, 0x00, 0x00, UInt8(request.count)] + request + [0x00])
            let first = try card.transmitRaw([0x90, 0x10, 0x00, 0x00, 0x03] + request[0..<3])
            try expectWord(ResponseAPDU(first), 0x9000, "the first part of a chain")
            let chained = try card.transmit([0x80, 0x10, 0x00, 0x00, 0x03] + request[3...] + [0x00])
            try expectWord(chained, 0x9000, "the last part of a chain")
            guard chained.data.first == whole.data.first else {
                throw CheckFailure(
                    "getPINRetries in a chain",
                    expected: CTAPStatusCode.describe(whole.data.first ?? 0xFF),
                    actual: CTAPStatusCode.describe(chained.data.first ?? 0xFF)
                )
            }
        },
        ConformanceCheck(
            "nfc.chaining.mismatch",
            .nfc,
            "ISO 7816-4 §5.1.1.1",
            "a chain whose next part is another command is refused, and the card goes on"
        ) { ctx in
            let card = try ctx.card
            let first = try card.transmitRaw([0x90, 0x10, 0x00, 0x00, 0x02, 0x06, 0xA2])
            try expectWord(ResponseAPDU(first), 0x9000, "the first part of a chain")
            let other = try card.transmit([0x80, 0x10, 0x80, 0x00, 0x04, 0x01, 0x01, 0x02, 0x01, 0x00])
            guard other.status != 0x9000 && other.status != 0x9100 else {
                throw CheckFailure("a part with other P1 was taken into the chain", actual: word(other.status))
            }
            ctx.observe("a chain broken by another command: \(word(other.status))")
            try expectWord(try getInfo(card), 0x9000, "getInfo after the broken chain")
        },
        ConformanceCheck(
            "nfc.response.chaining",
            .nfc,
            "ISO 7816-4 §5.3.4",
            "an answer longer than Le comes in parts: 61XX, then GET RESPONSE"
        ) { ctx in
            let card = try ctx.card
            let whole = try getInfo(card)
            try expectWord(whole, 0x9000, "getInfo")
            guard whole.data.count > 32 else { throw CheckSkip("getInfo's answer fits in 32 bytes") }
            let first = ResponseAPDU(try card.transmitRaw([0x80, 0x10, 0x00, 0x00, 0x01, 0x04, 0x20]))
            guard first.status >> 8 == 0x61 else {
                throw CheckFailure("getInfo with Le 0x20", expected: "SW 61XX", actual: word(first.status))
            }
            guard first.data.count == 32 else {
                throw CheckFailure("the first part's length", expected: "32", actual: "\(first.data.count)")
            }
            var data = first.data
            var response = first
            while response.status >> 8 == 0x61 {
                response = ResponseAPDU(try card.transmitRaw([0x00, 0xC0, 0x00, 0x00, UInt8(response.status & 0xFF)]))
                data += response.data
            }
            try expectWord(response, 0x9000, "the last GET RESPONSE")
            guard data.count == whole.data.count, data.first == 0x00 else {
                throw CheckFailure(
                    "the parts put together",
                    expected: "\(whole.data.count) bytes",
                    actual: "\(data.count) bytes"
                )
            }
        },
        ConformanceCheck(
            "nfc.get-response.idle",
            .nfc,
            "CTAP 2.1 §11.3.6",
            "NFCCTAP_GETRESPONSE with no request in flight is refused"
        ) { ctx in
            let answer = try (try ctx.card).transmit([0x80, 0x11, 0x00, 0x00, 0x00])
            guard answer.status != 0x9000 && answer.status != 0x9100 else {
                throw CheckFailure("NFCCTAP_GETRESPONSE with nothing to get", actual: word(answer.status))
            }
            ctx.observe("NFCCTAP_GETRESPONSE with nothing in flight: \(word(answer.status))")
        },
        ConformanceCheck(
            "nfc.extended-length",
            .nfc,
            "ISO 7816-4 §5.1; CTAP 2.1 §11.3.5",
            "getInfo in an extended-length APDU: the whole answer at once, or 6700 from a key without them"
        ) { ctx in
            let card = try ctx.card
            let answer = ResponseAPDU(
                try card.transmitRaw([0x80, 0x10, 0x00, 0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00])
            )
            if answer.status == 0x6700 {
                ctx.observe("extended-length APDUs: not taken (6700)")
                return
            }
            try expectWord(answer, 0x9000, "getInfo, extended")
            guard answer.data.first == 0x00, answer.data.count == (try getInfo(card)).data.count else {
                throw CheckFailure("getInfo's answer, extended", actual: "\(answer.data.count) bytes")
            }
            ctx.observe("extended-length APDUs: taken")
        },
    ]
}
