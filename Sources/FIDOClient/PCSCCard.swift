import CPCSC
import CTAPCBOR

#if canImport(Glibc)
import Glibc
#endif

/// A response APDU: its data and status word.
package struct ResponseAPDU: Equatable, Sendable {
    package var data: [UInt8]
    package var status: UInt16

    package init(_ bytes: [UInt8]) {
        data = Array(bytes.dropLast(2))
        status = bytes.count >= 2 ? UInt16(bytes[bytes.count - 2]) << 8 | UInt16(bytes[bytes.count - 1]) : 0
    }

    /// `9000`, `6A82`, …
    package var statusText: String {
        let digits = String(status, radix: 16, uppercase: true)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }
}

/// A FIDO key in a PC/SC reader (NFC, or a contact card), reached through pcsc-lite: the NFC binding of CTAP 2.1
/// §11.3 from the client's side. SELECT of the FIDO applet, CTAP2 messages in NFCCTAP_MSG with command chaining
/// and status updates (NFCCTAP_GETRESPONSE), U2F messages as they are, and GET RESPONSE for long answers.
package final class PCSCCard {
    /// The FIDO applet's AID.
    package static let aid: [UInt8] = [0xA0, 0x00, 0x00, 0x06, 0x47, 0x2F, 0x00, 0x01]
    /// The part of a reader's name that chose it (`conform --device pcsc:PART`).
    package let readerMatch: String
    /// The reader's full name.
    package private(set) var reader = ""
    /// The version string SELECT answered (`U2F_V2`, `FIDO_2_0`).
    package private(set) var version = ""
    /// The card's ATR.
    package private(set) var atr: [UInt8] = []
    var context: SCARDCONTEXT = 0
    var handle: SCARDHANDLE = 0
    var activeProtocol: DWORD = 0
    package private(set) var connected = false

    /// Establishes a PC/SC context and connects to the card in the one reader whose name contains `readerMatch`
    /// (case-insensitive).
    package init(readerMatch: String) throws(ClientError) {
        self.readerMatch = readerMatch
        let rv = SCardEstablishContext(DWORD(SCARD_SCOPE_SYSTEM), nil, nil, &context)
        guard rv == 0 else {
            throw .transport("pcsc: no PC/SC service (is pcscd running?): \(Self.describe(rv))")
        }
        do {
            try connect()
        } catch {
            SCardReleaseContext(context)
            throw error
        }
    }

    deinit {
        disconnect()
        SCardReleaseContext(context)
    }

    /// The names of the readers pcscd knows.
    package static func readers() throws(ClientError) -> [String] {
        var context: SCARDCONTEXT = 0
        let rv = SCardEstablishContext(DWORD(SCARD_SCOPE_SYSTEM), nil, nil, &context)
        guard rv == 0 else { throw .transport("pcsc: no PC/SC service (is pcscd running?): \(describe(rv))") }
        defer { SCardReleaseContext(context) }
        return try readers(context)
    }

    static func readers(_ context: SCARDCONTEXT) throws(ClientError) -> [String] {
        var size: DWORD = 0
        var rv = SCardListReaders(context, nil, nil, &size)
        if rv == noReaders { return [] }
        guard rv == 0 else { throw .transport("pcsc: cannot list the readers: \(describe(rv))") }
        var buffer = [CChar](repeating: 0, count: Int(size) + 1)
        rv = SCardListReaders(context, nil, &buffer, &size)
        if rv == noReaders { return [] }
        guard rv == 0 else { throw .transport("pcsc: cannot list the readers: \(describe(rv))") }
        // A multi-string: names separated by NUL, ended by an empty one.
        return buffer.split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
    }

    /// Connects to the card (again) and selects the FIDO applet.
    package func connect() throws(ClientError) {
        disconnect()
        let matching = try Self.readers(context).filter { $0.lowercased().contains(readerMatch.lowercased()) }
        guard matching.count == 1 else {
            throw .transport(
                matching.isEmpty
                    ? "pcsc: no reader's name contains '\(readerMatch)' (fidosim conform --list-devices lists them)"
                    : "pcsc: several readers' names contain '\(readerMatch)': \(matching.joined(separator: ", "))"
            )
        }
        reader = matching[0]
        // A card just put on the reader (or a virtual one just connected) shows after the reader's next look:
        // wait for one up to `cardWaitMs`.
        let deadline = CTAPHIDClient.nowMs() + Double(cardWaitMs)
        var rv: LONG
        repeat {
            rv = SCardConnect(
                context,
                reader,
                DWORD(SCARD_SHARE_SHARED),
                DWORD(SCARD_PROTOCOL_T0 | SCARD_PROTOCOL_T1),
                &handle,
                &activeProtocol
            )
            guard Self.cardNotReady.contains(rv), CTAPHIDClient.nowMs() < deadline else { break }
            usleep(100_000)
        } while true
        guard rv == 0 else { throw .transport("pcsc: no card in \(reader): \(Self.describe(rv))") }
        connected = true
        atr = readATR()
        let selected = try transmit([0x00, 0xA4, 0x04, 0x00, UInt8(Self.aid.count)] + Self.aid + [0x00])
        guard selected.status == 0x9000 else {
            throw .transport("pcsc: the card in \(reader) has no FIDO applet (SELECT answered \(selected.statusText))")
        }
        version = String(decoding: selected.data, as: UTF8.self)
    }

    func readATR() -> [UInt8] {
        var atr = [UInt8](repeating: 0, count: 64)
        var atrLength = DWORD(atr.count)
        var state: DWORD = 0
        var proto: DWORD = 0
        var nameLength: DWORD = 0
        guard SCardStatus(handle, nil, &nameLength, &state, &proto, &atr, &atrLength) == 0 else { return [] }
        return Array(atr.prefix(Int(atrLength)))
    }

    /// Leaves the card (it stays powered for the next client).
    package func disconnect() {
        if connected { SCardDisconnect(handle, DWORD(SCARD_LEAVE_CARD)) }
        connected = false
    }

    /// One command APDU as it is, and its response APDU as the card gave it (no chaining, no GET RESPONSE).
    package func transmitRaw(_ apdu: [UInt8]) throws(ClientError) -> [UInt8] {
        guard connected else { throw .transport("pcsc: not connected to a card") }
        var request = SCARD_IO_REQUEST(
            dwProtocol: activeProtocol,
            cbPciLength: DWORD(MemoryLayout<SCARD_IO_REQUEST>.size)
        )
        var response = [UInt8](repeating: 0, count: 65538)
        var length = DWORD(response.count)
        let rv = apdu.withUnsafeBufferPointer { command in
            SCardTransmit(handle, &request, command.baseAddress, DWORD(command.count), nil, &response, &length)
        }
        guard rv == 0 else { throw .transport("pcsc: the card in \(reader) did not answer: \(Self.describe(rv))") }
        guard length >= 2 else { throw .malformed("a response APDU of \(length) bytes, without a status word") }
        return Array(response.prefix(Int(length)))
    }

    /// One command APDU, with GET RESPONSE while the card says 61XX: the whole answer and the last status word.
    package func transmit(_ apdu: [UInt8]) throws(ClientError) -> ResponseAPDU {
        var response = ResponseAPDU(try transmitRaw(apdu))
        var data = response.data
        var rounds = 0
        while response.status >> 8 == 0x61 {
            rounds += 1
            guard rounds < 300 else { throw .malformed("more than 300 GET RESPONSE rounds") }
            response = ResponseAPDU(try transmitRaw([0x00, 0xC0, 0x00, 0x00, UInt8(response.status & 0xFF)]))
            data += response.data
        }
        response.data = data
        return response
    }

    /// A command sent as a chain of short APDUs (CLA bit 0x10 on all but the last part) of at most 250 bytes of
    /// data each, as python-fido2 sends them; Le 00 on the last.
    package func transmitChained(
        cla: UInt8,
        ins: UInt8,
        p1: UInt8,
        p2: UInt8,
        data: [UInt8]
    ) throws(ClientError)
        -> ResponseAPDU
    {
        var rest = data[...]
        while rest.count > 250 {
            let part = rest.prefix(250)
            rest = rest.dropFirst(250)
            let answer = ResponseAPDU(try transmitRaw([cla | 0x10, ins, p1, p2, UInt8(part.count)] + part))
            guard answer.status == 0x9000 else { return answer }
        }
        let last: [UInt8] =
            rest.isEmpty ? [cla, ins, p1, p2, 0x00] : [cla, ins, p1, p2, UInt8(rest.count)] + rest + [0x00]
        return try transmit(last)
    }

    /// A CTAP2 message (command byte and CBOR) in NFCCTAP_MSG, asking for status updates; polls
    /// NFCCTAP_GETRESPONSE while the card says 9100, handing each status (1 processing, 2 user presence needed) to
    /// `onKeepalive`. Returns the CTAP answer (status byte and CBOR).
    package func cbor(
        _ message: [UInt8],
        timeoutMs: Int,
        onKeepalive: ((UInt8) -> Void)?
    ) throws(ClientError)
        -> [UInt8]
    {
        let deadline = CTAPHIDClient.nowMs() + Double(timeoutMs)
        var response = try transmitChained(cla: 0x80, ins: 0x10, p1: 0x80, p2: 0x00, data: message)
        while response.status == 0x9100 {
            if let status = response.data.first { onKeepalive?(status) }
            guard CTAPHIDClient.nowMs() < deadline else {
                _ = try? transmit([0x80, 0x11, 0x11, 0x00, 0x00])  // cancel
                throw .timeout("the answer to a CTAP2 request over NFC")
            }
            response = try transmit([0x80, 0x11, 0x00, 0x00, 0x00])
        }
        guard response.status == 0x9000 else {
            throw .malformed("NFCCTAP_MSG answered status word \(response.statusText)")
        }
        guard !response.data.isEmpty else { throw .malformed("NFCCTAP_MSG answered 9000 without a CTAP status byte") }
        return response.data
    }

    /// A U2F raw message (an extended-length APDU as CTAPHID_MSG carries it), sent as a short APDU when it fits
    /// (NFC readers and keys take short APDUs; U2F over NFC allows both). Returns the data and status word.
    package func u2f(_ apdu: [UInt8]) throws(ClientError) -> [UInt8] {
        var command = apdu
        // An extended APDU: CLA INS P1 P2 00 Lc1 Lc2 data [Le1 Le2].
        if apdu.count >= 7, apdu[4] == 0 {
            let lc = Int(apdu[5]) << 8 | Int(apdu[6])
            if lc <= 255, apdu.count >= 7 + lc {
                command = Array(apdu[0..<4]) + (lc > 0 ? [UInt8(lc)] + apdu[7..<(7 + lc)] : []) + [0x00]
            }
        }
        let response = try transmit(command)
        return response.data + [UInt8(response.status >> 8), UInt8(response.status & 0xFF)]
    }

    static let noReaders = 0x8010_002E  // SCARD_E_NO_READERS_AVAILABLE
    static let noCard = 0x8010_000C  // SCARD_E_NO_SMARTCARD
    static let removedCard = 0x8010_0069  // SCARD_W_REMOVED_CARD
    /// What SCardConnect says while a card is arriving or being powered: no card yet, removed, unresponsive,
    /// unpowered, just reset, reader not ready.
    static let cardNotReady: Set<LONG> = [noCard, removedCard, 0x8010_0066, 0x8010_0067, 0x8010_0068, 0x8010_0010]
    /// How long ``connect()`` waits for a card to be in the reader.
    package var cardWaitMs = 3000

    static func describe(_ rv: LONG) -> String {
        String(cString: pcsc_stringify_error(rv)) + " (0x" + String(UInt32(truncatingIfNeeded: rv), radix: 16) + ")"
    }
}
