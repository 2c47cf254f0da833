// libFuzzer target: one USB/IP connection fed fuzzed stream pieces, import permissions and key reports.
// Compiled together with Sources/USBIP. Checks: nothing traps; once a connection closes it stays closed and says
// nothing more; every reply the server sends is a whole message (an operation reply, or a URB reply of at least
// its 48-byte header) and never longer than a header and the largest transfer; transfers waiting never outnumber
// the submits that made them.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzUSBIP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    var input = UnsafeBufferPointer(start: data, count: size)[...]
    let device = USBDevice(
        vendorID: 0x1209,
        productID: 0xF1D0,
        manufacturer: "fidosim",
        product: "fuzz",
        serial: "F1",
        reportDescriptor: [0x06, 0xD0, 0xF1, 0x09, 0x01, 0xA1, 0x01, 0xC0]
    )
    var connection = USBIPConnection(device: device)
    var closed = false

    func take(_ n: Int) -> [UInt8] {
        let bytes = Array(input.prefix(n))
        input = input.dropFirst(n)
        return bytes
    }

    while let op = input.first {
        input = input.dropFirst()
        var actions: [USBIPAction] = []
        switch op % 4 {
        case 0, 1:  // a piece of the stream
            let length = Int(take(2).reduce(0) { $0 << 8 | Int($1) }) % 300
            actions = connection.receive(take(length), importable: op & 0x10 == 0)
        case 2:  // the import and configuration a host does first, so that fuzzed URBs reach the device
            var stream: [UInt8] = [0x01, 0x11, 0x80, 0x03, 0, 0, 0, 0] + Array("1-1".utf8)
            stream += Array(repeating: 0, count: 29)
            stream += [0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
            stream += [0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x09, 0x01, 0x00, 0, 0, 0, 0]
            actions = connection.receive(stream, importable: true)
        default:  // the key sends a report
            actions = connection.deliver(report: take(64))
        }
        for action in actions {
            precondition(!closed, "a closed connection acted: \(action)")
            switch action {
            case .send(let bytes):
                precondition(bytes.count >= 8, "a reply shorter than any USB/IP message")
                precondition(
                    bytes.count <= 48 + USBIPConnection.maxTransfer + 0x148,
                    "a reply longer than any transfer"
                )
            case .close:
                closed = true
            case .report(let report):
                precondition(report.count <= USBIPConnection.maxTransfer, "a report longer than a transfer")
            case .attached:
                break
            }
        }
        if connection.phase == .closed { closed = true }
        precondition(connection.waitingTransfers <= 1 << 20, "transfers pile up")
    }
    return 0
}
