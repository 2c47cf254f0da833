/// What the NFC machine asks of the key.
package enum NFCAction: Equatable, Sendable {
    /// A response APDU for the reader (data and status word).
    case respond([UInt8])
    /// Run this CTAP2 request (command byte and CBOR); hand its answer to ``NFCMachine/complete(_:now:)``.
    case ctap2([UInt8])
    /// Run this U2F raw message (the whole command APDU); hand its answer (data and status word) to
    /// ``NFCMachine/complete(_:now:)``.
    case u2f([UInt8])
    /// The client cancelled the CTAP2 request in flight (NFCCTAP_GETRESPONSE with P1 0x11).
    case cancel
}

/// What a CTAP2 request in flight is doing, as NFCCTAP_GETRESPONSE status updates say it.
package enum NFCStatus: UInt8, Sendable {
    case processing = 0x01
    case upNeeded = 0x02
}

/// The CTAP NFC binding (CTAP 2.1 §11.3) over ISO 7816-4 APDUs: applet selection, NFCCTAP_MSG and
/// NFCCTAP_GETRESPONSE, U2F raw messages, command chaining and response chaining with GET RESPONSE.
///
/// A pure value, like the CTAPHID machine: command APDUs and time in, actions out. The reader waits for a response
/// to each command APDU; while a CTAP2 request runs, a client that allowed status updates (P1 0x80) gets one
/// (`STATUS 9100`) every ``updateInterval`` and asks again with NFCCTAP_GETRESPONSE (firmware-spec/nfc.md).
package struct NFCMachine: Sendable {
    /// The FIDO applet's AID.
    package static let aid: [UInt8] = [0xA0, 0x00, 0x00, 0x06, 0x47, 0x2F, 0x00, 0x01]
    /// How long a request may run before a client that allows updates gets one.
    package static let updateInterval: Duration = .milliseconds(100)

    /// Whether the key speaks U2F: SELECT then answers "U2F_V2" (else "FIDO_2_0"), and U2F messages are served.
    package let u2f: Bool
    /// The largest command a chain may assemble (the key's maxMsgSize) and the largest response.
    package let maxMessageSize: Int

    package private(set) var selected = false
    /// The command chain being assembled: its first header and the data so far.
    var chain: (header: [UInt8], data: [UInt8])?
    /// Response bytes waiting for GET RESPONSE, and the status word of their last part.
    var remaining: [UInt8] = []
    var remainingStatus = StatusWord.ok
    /// The request handed to the key and not yet answered.
    var inFlight: InFlight?
    /// What a request in flight is doing.
    var status = NFCStatus.processing

    struct InFlight: Sendable {
        /// The client takes NFCCTAP_GETRESPONSE status updates.
        var updates: Bool
        /// The reader waits for a response to a command APDU now (it always does, except between an update and
        /// the client's next NFCCTAP_GETRESPONSE).
        var readerWaiting: Bool
        /// When the waiting reader gets a status update.
        var updateAt: Duration?
        /// The answer, when it came while the reader was not waiting.
        var answer: [UInt8]?
        /// Ne of the command that the answer goes to.
        var expectedLength: Int
        var isU2F: Bool
    }

    package init(u2f: Bool = true, maxMessageSize: Int = 7609) {
        self.u2f = u2f
        self.maxMessageSize = maxMessageSize
    }

    /// When ``tick(now:)`` has something to send.
    package var nextDeadline: Duration? { inFlight?.readerWaiting == true ? inFlight?.updateAt : nil }

    /// Whether a request is with the key.
    package var busy: Bool { inFlight != nil && inFlight?.answer == nil }

    /// The card left the field or lost power: nothing selected, no chain, no pending response.
    package mutating func powerOff() {
        selected = false
        chain = nil
        remaining = []
        inFlight = nil
        status = .processing
    }

    /// What the request in flight is doing (the next status update says it).
    package mutating func setStatus(_ status: NFCStatus) { self.status = status }

    package mutating func receive(_ bytes: [UInt8], now: Duration) -> [NFCAction] {
        let apdu: CommandAPDU
        do {
            apdu = try CommandAPDU.parse(bytes)
        } catch {
            chain = nil
            return [.respond(error.bytes)]
        }
        if var flight = inFlight {
            // While the key works, the client may only ask how it goes (or cancel).
            guard apdu.cla == 0x80, apdu.ins == 0x11, flight.updates else {
                return [.respond(StatusWord.conditionsNotSatisfied.bytes)]
            }
            if let answer = flight.answer {
                inFlight = nil
                return [.respond(respond(answer, expectedLength: flight.expectedLength, u2f: flight.isU2F))]
            }
            flight.readerWaiting = true
            flight.updateAt = now + Self.updateInterval
            inFlight = flight
            return apdu.p1 == 0x11 ? [.cancel] : []
        }
        let cla = apdu.cla & ~0x10
        guard cla == 0x00 || cla == 0x80 else {
            chain = nil
            return [.respond(StatusWord.claNotSupported.bytes)]
        }
        // Command chaining (CLA bit 0x10): collect, answer 9000, run at the last part.
        var command = apdu
        if apdu.cla & 0x10 != 0 || chain != nil {
            let header = [cla, apdu.ins, apdu.p1, apdu.p2]
            if let current = chain, current.header != header {
                chain = nil
                return [.respond(StatusWord.lastCommandOfChainExpected.bytes)]
            }
            let data = (chain?.data ?? []) + apdu.data
            guard data.count <= maxMessageSize else {
                chain = nil
                return [.respond(StatusWord.wrongLength.bytes)]
            }
            if apdu.cla & 0x10 != 0 {
                chain = (header, data)
                return [.respond(StatusWord.ok.bytes)]
            }
            chain = nil
            command = CommandAPDU(
                cla: cla,
                ins: apdu.ins,
                p1: apdu.p1,
                p2: apdu.p2,
                data: data,
                expectedLength: apdu.expectedLength,
                extended: apdu.extended || data.count > 255
            )
        }
        return execute(command, now: now)
    }

    mutating func execute(_ apdu: CommandAPDU, now: Duration) -> [NFCAction] {
        let ne = apdu.expectedLength ?? 0
        switch (apdu.cla, apdu.ins) {
        case (0x00, 0xA4):
            return [.respond(select(apdu))]
        case (0x00, 0xC0):
            guard !remaining.isEmpty else { return [.respond(StatusWord.conditionsNotSatisfied.bytes)] }
            let rest = remaining
            remaining = []
            return [.respond(respondChunks(rest, expectedLength: apdu.expectedLength ?? 256, last: remainingStatus))]
        default:
            break
        }
        guard selected else { return [.respond(StatusWord.insNotSupported.bytes)] }
        remaining = []
        switch (apdu.cla, apdu.ins) {
        case (0x80, 0x10):
            guard apdu.p1 == 0x00 || apdu.p1 == 0x80, apdu.p2 == 0x00 else {
                return [.respond(StatusWord.incorrectP1P2.bytes)]
            }
            guard !apdu.data.isEmpty else { return [.respond(StatusWord.wrongLength.bytes)] }
            status = .processing
            inFlight = InFlight(
                updates: apdu.p1 == 0x80,
                readerWaiting: true,
                updateAt: apdu.p1 == 0x80 ? now + Self.updateInterval : nil,
                expectedLength: ne,
                isU2F: false
            )
            return [.ctap2(apdu.data)]
        case (0x80, 0x11):
            return [.respond(StatusWord.conditionsNotSatisfied.bytes)]  // nothing in flight
        case (0x80, 0x01), (0x80, 0x02), (0x80, 0x03):
            // A U2F instruction under the applet's other class: the U2F layer takes class 0 only, and says so as it
            // does over CTAPHID_MSG.
            return [.respond((u2f ? StatusWord.claNotSupported : StatusWord.insNotSupported).bytes)]
        case (0x00, 0x01), (0x00, 0x02), (0x00, 0x03):
            guard u2f else { return [.respond(StatusWord.insNotSupported.bytes)] }
            inFlight = InFlight(updates: false, readerWaiting: true, expectedLength: ne, isU2F: true)
            return [.u2f(apdu.bytes)]
        default:
            return [.respond(StatusWord.insNotSupported.bytes)]
        }
    }

    /// SELECT by name of the FIDO applet: its version string; any other name deselects it.
    mutating func select(_ apdu: CommandAPDU) -> [UInt8] {
        guard apdu.p1 == 0x04, apdu.p2 == 0x00 else { return StatusWord.incorrectP1P2.bytes }
        guard apdu.data == Self.aid else {
            selected = false
            return StatusWord.fileNotFound.bytes
        }
        selected = true
        chain = nil
        let version = Array((u2f ? "U2F_V2" : "FIDO_2_0").utf8)
        return respond(version + StatusWord.ok.bytes, expectedLength: apdu.expectedLength ?? 256, u2f: true)
    }

    /// The key's answer to the request in flight: for CTAP2 the status byte and CBOR, for U2F the data and its
    /// status word.
    package mutating func complete(_ answer: [UInt8], now: Duration) -> [NFCAction] {
        guard var flight = inFlight else { return [] }
        guard flight.readerWaiting else {
            flight.answer = answer
            inFlight = flight
            return []
        }
        inFlight = nil
        return [.respond(respond(answer, expectedLength: flight.expectedLength, u2f: flight.isU2F))]
    }

    /// A status update for a waiting reader whose client takes them, once ``updateInterval`` has passed.
    package mutating func tick(now: Duration) -> [NFCAction] {
        guard var flight = inFlight, flight.readerWaiting, let at = flight.updateAt, now >= at else { return [] }
        flight.readerWaiting = false
        flight.updateAt = nil
        inFlight = flight
        return [.respond([status.rawValue] + StatusWord.update.bytes)]
    }

    /// A response APDU for `answer`: CTAP2 answers end in 9000; U2F answers carry their own status word. What
    /// does not fit in Ne waits for GET RESPONSE.
    mutating func respond(_ answer: [UInt8], expectedLength: Int, u2f: Bool) -> [UInt8] {
        var data = answer
        var last = StatusWord.ok
        if u2f && answer.count >= 2 {
            last = StatusWord(UInt16(answer[answer.count - 2]) << 8 | UInt16(answer[answer.count - 1]))
            data.removeLast(2)
        }
        return respondChunks(data, expectedLength: expectedLength == 0 ? 256 : expectedLength, last: last)
    }

    mutating func respondChunks(_ data: [UInt8], expectedLength: Int, last: StatusWord) -> [UInt8] {
        guard data.count > expectedLength else {
            remaining = []
            return data + last.bytes
        }
        remaining = Array(data[expectedLength...])
        remainingStatus = last
        return Array(data[..<expectedLength]) + StatusWord.moreData(remaining.count).bytes
    }
}
