// libFuzzer target: the CTAPHID state machine fed arbitrary event sequences on several channels with a
// fuzzed clock. Compiled together with Sources/CTAPHID. Checks: every sent report is 64 bytes, and after each
// event the next deadline (if any) lies in the future.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCTAPHID(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    var input = UnsafeBufferPointer(start: data, count: size)[...]
    var machine = CTAPHIDMachine(channelSeed: 7)
    var now: Duration = .zero
    let channels: [UInt32] = [0x0102_0304, 0x0A0B_0C0D, 0xFFFF_FFFF, 0]

    func take(_ n: Int) -> [UInt8] {
        let bytes = Array(input.prefix(n))
        input = input.dropFirst(n)
        return bytes
    }

    while let op = input.first {
        input = input.dropFirst()
        var actions: [CTAPHIDAction] = []
        switch op % 8 {
        case 0, 1, 2:  // a report on one of a few channels, with fuzzed contents
            var report = take(60)
            let cid = channels[Int(op >> 3) % channels.count]
            report =
                [UInt8(cid >> 24), UInt8((cid >> 16) & 0xFF), UInt8((cid >> 8) & 0xFF), UInt8(cid & 0xFF)]
                + report
            actions = machine.receive(report: report, now: now)
        case 3:  // a raw report of fuzzed length
            let length = Int(take(1).first ?? 0) % 80
            actions = machine.receive(report: take(length), now: now)
        case 4:  // time passes
            now += .milliseconds(Int(take(1).first ?? 0) * 10)
            actions = machine.tick(now: now)
        case 5:  // the authenticator answers the request in flight
            let length = Int(take(2).reduce(0) { $0 << 8 | Int($1) }) % 8000
            if let busy = machine.busyChannel {
                actions = machine.complete(channel: busy, payload: Array(repeating: 0x42, count: length), now: now)
            }
        case 6:
            actions = machine.setKeepaliveStatus(op & 0x10 == 0 ? .processing : .upNeeded, now: now)
        default:
            machine.powerCycle()
        }
        for case .send(let report) in actions {
            precondition(report.count == 64, "a sent report is not 64 bytes")
        }
        if let deadline = machine.nextDeadline {
            precondition(deadline > now, "next deadline \(deadline) is not after now \(now)")
        }
    }
    return 0
}
