/// What one USB/IP connection asks of the server.
package enum USBIPAction: Equatable, Sendable {
    /// Bytes for the client.
    case send([UInt8])
    /// A report the host wrote on the interrupt OUT endpoint, for the key.
    case report([UInt8])
    /// OP_REQ_IMPORT succeeded: this connection is the device's host from now on (a plug).
    case attached
    /// End this connection, after what was sent before; the text says why (a log line).
    case close(String)
}

/// One TCP connection of a USB/IP server (Linux `Documentation/usb/usbip_protocol.rst`), without I/O: bytes in,
/// actions out. Before an import it answers OP_REQ_DEVLIST and OP_REQ_IMPORT; once the device is imported it
/// serves USBIP_CMD_SUBMIT and USBIP_CMD_UNLINK for the exported ``USBDevice``: control requests on endpoint 0,
/// interrupt IN transfers that wait until the key has a report, interrupt OUT transfers that carry the host's
/// reports. Anything malformed closes this connection, saying why; nothing traps.
package struct USBIPConnection: Sendable {
    package enum Phase: Equatable, Sendable {
        case operation, attached, closed
    }

    struct PendingIn: Equatable, Sendable {
        var seqnum: UInt32
        var length: Int
        var startFrame: UInt32
        var packets: UInt32
    }

    package let device: USBDevice
    package private(set) var phase: Phase = .operation
    var buffer: [UInt8] = []
    /// Interrupt IN transfers waiting for a report, oldest first.
    var pendingIn: [PendingIn] = []
    /// Reports the key sent before an IN transfer was there to take them.
    var queued: [[UInt8]] = []
    /// SET_CONFIGURATION's value (0: not configured).
    package private(set) var configuration: UInt8 = 0

    package static let version: UInt16 = 0x0111
    /// The longest transfer a client may submit (a control transfer of the longest descriptor is 1 KiB).
    package static let maxTransfer = 65_536
    /// Reports kept for a host that does not read (a CTAP answer of 7609 bytes is 129 reports).
    package static let maxQueued = 1024
    /// Interrupt IN transfers a host may leave waiting (Linux's usbhid keeps one, libusb programs a few): a host past
    /// it is disconnected.
    package static let maxWaiting = 64
    static let headerSize = 48
    static let epipe: Int32 = -32
    static let econnreset: Int32 = -104

    package init(device: USBDevice) {
        self.device = device
    }

    /// Interrupt IN transfers waiting for a report.
    package var waitingTransfers: Int { pendingIn.count }

    /// Bytes from the client. `importable`: whether OP_REQ_IMPORT may take the device now (no other host has it,
    /// and the key is plugged in).
    package mutating func receive(_ bytes: [UInt8], importable: Bool) -> [USBIPAction] {
        guard phase != .closed else { return [] }
        buffer += bytes
        var out: [USBIPAction] = []
        while phase != .closed {
            let step = phase == .operation ? operation(importable: importable) : urb()
            guard let step else { break }
            out += step
        }
        return out
    }

    /// A report from the key: it completes the oldest waiting IN transfer, or waits for the next one.
    package mutating func deliver(report: [UInt8]) -> [USBIPAction] {
        guard phase == .attached else { return [] }
        guard pendingIn.isEmpty else {
            let transfer = pendingIn.removeFirst()
            return [.send(Self.retSubmit(transfer, data: Array(report.prefix(transfer.length))))]
        }
        queued.append(report)
        if queued.count > Self.maxQueued { return fail("the host reads no reports (\(Self.maxQueued) waiting)") }
        return []
    }

    mutating func fail(_ why: String) -> [USBIPAction] {
        phase = .closed
        buffer = []
        pendingIn = []
        queued = []
        return [.close(why)]
    }

    // MARK: Before the import

    /// One operation request, when it has all come; nil while waiting for more.
    mutating func operation(importable: Bool) -> [USBIPAction]? {
        guard buffer.count >= 8 else { return nil }
        let version = Self.read16(buffer, 0)
        let code = Self.read16(buffer, 2)
        guard version == Self.version else {
            return fail("USB/IP version \(Self.hex(UInt32(version), 4)) (this server speaks 0111)")
        }
        switch code {
        case 0x8005:  // OP_REQ_DEVLIST
            buffer.removeFirst(8)
            var reply: [UInt8] = Self.opHeader(0x0005, status: 0)
            reply += be(1)
            reply += device.summary(configuration: 1)
            reply += device.interfaces
            phase = .closed
            return [.send(reply), .close("device list sent")]
        case 0x8003:  // OP_REQ_IMPORT
            guard buffer.count >= 40 else { return nil }
            let busID = String(decoding: buffer[8..<40].prefix { $0 != 0 }, as: UTF8.self)
            buffer.removeFirst(40)
            guard busID == device.busID, importable else {
                phase = .closed
                let why =
                    busID == device.busID
                    ? "import of \(busID) refused: another host has it, or the key is unplugged"
                    : "import of bus id '\(busID)': this server exports \(device.busID)"
                return [.send(Self.opHeader(0x0003, status: 1)), .close(why)]
            }
            phase = .attached
            configuration = 0
            return [.send(Self.opHeader(0x0003, status: 0) + device.summary(configuration: 1)), .attached]
        default:
            return fail("operation code \(Self.hex(UInt32(code), 4)) is not one of OP_REQ_DEVLIST or OP_REQ_IMPORT")
        }
    }

    // MARK: Once imported

    /// One URB command, when it has all come; nil while waiting for more.
    mutating func urb() -> [USBIPAction]? {
        guard buffer.count >= Self.headerSize else { return nil }
        let command = Self.read32(buffer, 0)
        let seqnum = Self.read32(buffer, 4)
        let devid = Self.read32(buffer, 8)
        let direction = Self.read32(buffer, 12)
        let endpoint = Self.read32(buffer, 16)
        switch command {
        case 1:  // USBIP_CMD_SUBMIT
            let length = Int(Self.read32(buffer, 24))
            let startFrame = Self.read32(buffer, 28)
            let packets = Self.read32(buffer, 32)
            guard devid == device.deviceID else {
                return fail("devid \(Self.hex(devid, 8)) is not this device's (\(Self.hex(device.deviceID, 8)))")
            }
            guard direction <= 1 else { return fail("direction \(direction) is neither OUT (0) nor IN (1)") }
            guard endpoint <= 15 else { return fail("endpoint \(endpoint) does not exist on any USB device") }
            guard length <= Self.maxTransfer else {
                return fail("a transfer of \(length) bytes (at most \(Self.maxTransfer))")
            }
            guard packets == 0 || packets == 0xFFFF_FFFF else {
                return fail("an isochronous transfer (\(packets) packets): the device has no isochronous endpoint")
            }
            let dataLength = direction == 0 ? length : 0
            guard buffer.count >= Self.headerSize + dataLength else { return nil }
            let setup = Array(buffer[40..<48])
            let data = Array(buffer[Self.headerSize..<(Self.headerSize + dataLength)])
            buffer.removeFirst(Self.headerSize + dataLength)
            let transfer = PendingIn(seqnum: seqnum, length: length, startFrame: startFrame, packets: packets)
            return submit(transfer, endpoint: endpoint, in: direction == 1, setup: setup, data: data)
        case 2:  // USBIP_CMD_UNLINK
            let target = Self.read32(buffer, 20)
            buffer.removeFirst(Self.headerSize)
            var status: Int32 = 0
            if let index = pendingIn.firstIndex(where: { $0.seqnum == target }) {
                pendingIn.remove(at: index)
                status = Self.econnreset
            }
            var reply: [UInt8] = be(4) + be(seqnum)
            reply += zeros(12)
            reply += be(UInt32(bitPattern: status))
            reply += zeros(24)
            return [.send(reply)]
        default:
            return fail("URB command \(command) is not CMD_SUBMIT (1) or CMD_UNLINK (2)")
        }
    }

    mutating func submit(
        _ transfer: PendingIn,
        endpoint: UInt32,
        in directionIn: Bool,
        setup: [UInt8],
        data: [UInt8]
    ) -> [USBIPAction] {
        switch (endpoint, directionIn) {
        case (0, _):
            let (status, answer) = control(setup, data: data)
            let sent = directionIn ? Array(answer.prefix(transfer.length)) : []
            let actual = directionIn ? sent.count : (status == 0 ? data.count : 0)
            return [.send(Self.retSubmit(transfer, status: status, actualLength: actual, data: sent))]
        case (1, true):
            guard configuration != 0 else {
                return [.send(Self.retSubmit(transfer, status: Self.epipe, actualLength: 0, data: []))]
            }
            guard queued.isEmpty else {
                let report = queued.removeFirst()
                return [.send(Self.retSubmit(transfer, data: Array(report.prefix(transfer.length))))]
            }
            guard pendingIn.count < Self.maxWaiting else {
                return fail("more than \(Self.maxWaiting) interrupt IN transfers left waiting")
            }
            pendingIn.append(transfer)
            return []
        case (1, false):
            guard configuration != 0 else {
                return [.send(Self.retSubmit(transfer, status: Self.epipe, actualLength: 0, data: []))]
            }
            return [
                .report(data),
                .send(Self.retSubmit(transfer, status: 0, actualLength: data.count, data: [])),
            ]
        default:
            // An endpoint the device does not have: a STALL, as a device answers.
            return [.send(Self.retSubmit(transfer, status: Self.epipe, actualLength: 0, data: []))]
        }
    }

    /// A control request on endpoint 0 (USB 2.0 §9.4, HID 1.11 §7.2): its status (0, or -EPIPE for a STALL) and
    /// the data of an IN request.
    mutating func control(_ setup: [UInt8], data: [UInt8]) -> (Int32, [UInt8]) {
        let requestType = setup[0]
        let request = setup[1]
        let value = UInt16(setup[2]) | UInt16(setup[3]) << 8
        let stall: (Int32, [UInt8]) = (Self.epipe, [])
        switch (requestType, request) {
        case (0x80, 0x06):  // GET_DESCRIPTOR, device
            switch value >> 8 {
            case 1: return (0, device.deviceDescriptor)
            case 2: return (0, device.configurationDescriptor)
            case 3: return device.stringDescriptor(UInt8(value & 0xFF)).map { (0, $0) } ?? stall
            default: return stall  // a full-speed device has no device qualifier or other-speed descriptor
            }
        case (0x81, 0x06):  // GET_DESCRIPTOR, interface: the HID class's
            switch value >> 8 {
            case 0x21: return (0, device.hidDescriptor)
            case 0x22: return (0, device.reportDescriptor)
            default: return stall
            }
        case (0x00, 0x09):  // SET_CONFIGURATION
            guard value <= 1 else { return stall }
            configuration = UInt8(value)
            if value == 0 {
                pendingIn = []
                queued = []
            }
            return (0, [])
        case (0x80, 0x08):  // GET_CONFIGURATION
            return (0, [configuration])
        case (0x80, 0x00), (0x81, 0x00), (0x82, 0x00):  // GET_STATUS: bus powered, no remote wakeup, not halted
            return (0, [0, 0])
        case (0x01, 0x0B):  // SET_INTERFACE: alternate setting 0 only
            return value == 0 ? (0, []) : stall
        case (0x81, 0x0A):  // GET_INTERFACE
            return (0, [0])
        case (0x02, 0x01):  // CLEAR_FEATURE(ENDPOINT_HALT)
            return (0, [])
        case (0x21, 0x0A):  // HID SET_IDLE
            return (0, [])
        default:
            return stall
        }
    }

    // MARK: Encoding

    static func retSubmit(_ transfer: PendingIn, data: [UInt8]) -> [UInt8] {
        retSubmit(transfer, status: 0, actualLength: data.count, data: data)
    }

    /// USBIP_RET_SUBMIT: devid, direction and endpoint 0, the request's start frame and packet count echoed, as
    /// Linux's stub driver answers.
    static func retSubmit(_ transfer: PendingIn, status: Int32, actualLength: Int, data: [UInt8]) -> [UInt8] {
        var reply: [UInt8] = be(3) + be(transfer.seqnum)
        reply += zeros(12)
        reply += be(UInt32(bitPattern: status))
        reply += be(UInt32(actualLength))
        reply += be(transfer.startFrame)
        reply += be(transfer.packets)
        reply += zeros(12)  // error count, padding
        return reply + data
    }

    /// The common header of an operation reply.
    static func opHeader(_ code: UInt16, status: UInt32) -> [UInt8] {
        be16(version) + be16(code) + be(status)
    }

    static func read16(_ bytes: [UInt8], _ at: Int) -> UInt16 { UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1]) }

    static func read32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }

    static func hex(_ value: UInt32, _ digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}

func zeros(_ count: Int) -> [UInt8] { Array(repeating: 0, count: count) }
