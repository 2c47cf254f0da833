// libFuzzer target: the NFC APDU machine fed arbitrary command APDUs, key answers, status changes and time.
// Compiled together with Sources/CTAPNFC. Checks: every response ends in a status word and is never longer
// than the reader's Ne allows (256 bytes of data for a short APDU, 65536 for an extended one); after a tick the
// next deadline (if any) lies in the future; a request is handed to the key only while none is in flight.
// vpcd's framing (VPCDFramer) takes fuzzed stream pieces: every message it makes has the length its header said,
// and it never holds more than one partial message.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNFC(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    var input = UnsafeBufferPointer(start: data, count: size)[...]
    var machine = NFCMachine(u2f: size % 2 == 0, maxMessageSize: 1024 + size % 7000)
    var now: Duration = .zero
    var framer = VPCDFramer()

    func take(_ n: Int) -> [UInt8] {
        let bytes = Array(input.prefix(n))
        input = input.dropFirst(n)
        return bytes
    }

    while let op = input.first {
        input = input.dropFirst()
        var actions: [NFCAction] = []
        switch op % 9 {
        case 0, 1, 2:  // a command APDU of fuzzed length
            let length = Int(take(2).reduce(0) { $0 << 8 | Int($1) }) % 600
            let wasBusy = machine.busy
            actions = machine.receive(take(length), now: now)
            for action in actions {
                if case .ctap2 = action { precondition(!wasBusy, "a request was handed out while one was in flight") }
                if case .u2f = action { precondition(!wasBusy, "a request was handed out while one was in flight") }
            }
        case 3:  // the select and a short CTAP2 request, so that the rest of the input reaches the applet
            actions = machine.receive([0x00, 0xA4, 0x04, 0x00, 0x08] + NFCMachine.aid + [0x00], now: now)
            actions += machine.receive([0x80, 0x10, 0x80, 0x00, 0x01, 0x04, 0x00], now: now)
        case 4:  // time passes
            now += .milliseconds(Int(take(1).first ?? 0) * 5)
            actions = machine.tick(now: now)
            if let deadline = machine.nextDeadline { precondition(deadline > now, "a deadline in the past") }
        case 5:  // the key answers
            let length = Int(take(2).reduce(0) { $0 << 8 | Int($1) }) % 3000
            actions = machine.complete(Array(repeating: op, count: length), now: now)
        case 6:
            machine.setStatus(op & 0x10 == 0 ? .processing : .upNeeded)
        case 7:  // a piece of vpcd's stream
            let length = Int(take(1).first ?? 0)
            do {
                for message in try framer.feed(take(length)) {
                    if case .apdu(let apdu) = message { precondition(apdu.count >= 2, "an APDU of one byte") }
                }
            } catch {
                precondition(framer.pending == 0, "a malformed stream left bytes behind")
            }
            precondition(framer.pending < 2 + 65536, "more than one partial message held")
        default:
            machine.powerOff()
        }
        for case .respond(let response) in actions {
            precondition(response.count >= 2, "a response without a status word")
            precondition(response.count <= 65536 + 2, "a response longer than any Ne")
        }
    }
    return 0
}
