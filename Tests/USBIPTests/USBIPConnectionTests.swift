import Testing

@testable import USBIP

/// USB/IP as exact byte sequences: what `usbip list` and `usbip attach` send, then what Linux's vhci-hcd and usbhid
/// submit while enumerating and using a HID device, and what malformed clients send.
@Suite struct USBIPConnectionTests {
    static let reportDescriptor: [UInt8] = [0x06, 0xD0, 0xF1, 0x09, 0x01, 0xA1, 0x01, 0xC0]
    static let device = USBDevice(
        vendorID: 0x1209,
        productID: 0xF1D0,
        manufacturer: "fidosim",
        product: "fidosim virtual FIDO2 key",
        serial: "S1",
        reportDescriptor: reportDescriptor
    )
    static let devid: UInt32 = 0x0001_0002

    static func op(_ code: UInt16, busID: String? = nil) -> [UInt8] {
        be16(0x0111) + be16(code) + be(0) + (busID.map { fixed($0, 32) } ?? [])
    }

    static func submit(
        seqnum: UInt32,
        in directionIn: Bool,
        endpoint: UInt32,
        length: Int,
        setup: [UInt8] = zeros(8),
        data: [UInt8] = [],
        devid: UInt32 = devid,
        packets: UInt32 = 0xFFFF_FFFF
    ) -> [UInt8] {
        be(1) + be(seqnum) + be(devid) + be(directionIn ? 1 : 0) + be(endpoint) + be(0) + be(UInt32(length))
            + be(0) + be(packets) + be(0) + setup + data
    }

    static func setup(_ type: UInt8, _ request: UInt8, value: UInt16, index: UInt16 = 0, length: UInt16) -> [UInt8] {
        [type, request] + le(value) + le(index) + le(length)
    }

    /// A connection that imported the device and configured it.
    static func attached() -> USBIPConnection {
        var connection = USBIPConnection(device: device)
        _ = connection.receive(op(0x8003, busID: "1-1"), importable: true)
        _ = connection.receive(
            submit(seqnum: 1, in: false, endpoint: 0, length: 0, setup: setup(0x00, 0x09, value: 1, length: 0)),
            importable: true
        )
        return connection
    }

    /// The RET_SUBMIT a transfer gets: status, actual length and data.
    static func retSubmit(_ actions: [USBIPAction]) -> (seqnum: UInt32, status: Int32, length: Int, data: [UInt8])? {
        guard case .send(let bytes) = actions.last, bytes.count >= 48, USBIPConnection.read32(bytes, 0) == 3 else {
            return nil
        }
        return (
            USBIPConnection.read32(bytes, 4), Int32(bitPattern: USBIPConnection.read32(bytes, 20)),
            Int(USBIPConnection.read32(bytes, 24)), Array(bytes[48...])
        )
    }

    @Test func theDeviceListDescribesOneFullSpeedHIDDevice() throws {
        var connection = USBIPConnection(device: Self.device)
        let actions = connection.receive(Self.op(0x8005), importable: true)
        guard case .send(let reply) = actions.first else { throw Failure("no reply") }
        #expect(actions.last == .close("device list sent"))
        #expect(reply.count == 12 + 0x138 + 4)
        #expect(Array(reply[0..<12]) == be16(0x0111) + be16(0x0005) + be(0) + be(1))
        #expect(Array(reply[0x10C..<0x10F]) == Array("1-1".utf8) && reply[0x10F] == 0)
        #expect(USBIPConnection.read32(reply, 0x12C) == 1 && USBIPConnection.read32(reply, 0x130) == 2)
        #expect(USBIPConnection.read32(reply, 0x134) == 2)  // full speed
        #expect(USBIPConnection.read16(reply, 0x138) == 0x1209 && USBIPConnection.read16(reply, 0x13A) == 0xF1D0)
        #expect(Array(reply[0x141...0x143]) == [1, 1, 1])
        #expect(Array(reply[0x144...]) == [0x03, 0x00, 0x00, 0x00])
    }

    @Test func importTakesTheDeviceOnlyByItsBusIDAndWhenFree() {
        var connection = USBIPConnection(device: Self.device)
        let imported = connection.receive(Self.op(0x8003, busID: "1-1"), importable: true)
        #expect(imported.count == 2 && imported.last == .attached)
        if case .send(let reply) = imported.first {
            #expect(reply.count == 8 + 0x138)
            #expect(Array(reply[0..<8]) == be16(0x0111) + be16(0x0003) + be(0))
        }
        #expect(connection.phase == .attached)
        var other = USBIPConnection(device: Self.device)
        let wrong = other.receive(Self.op(0x8003, busID: "2-1"), importable: true)
        #expect(wrong.first == .send(be16(0x0111) + be16(0x0003) + be(1)))
        #expect(other.phase == .closed)
        var busy = USBIPConnection(device: Self.device)
        #expect(
            busy.receive(Self.op(0x8003, busID: "1-1"), importable: false).first
                == .send(
                    be16(0x0111) + be16(0x0003) + be(1)
                )
        )
    }

    @Test func enumerationAsLinuxDoesIt() throws {
        var connection = USBIPConnection(device: Self.device)
        _ = connection.receive(Self.op(0x8003, busID: "1-1"), importable: true)
        func control(_ seq: UInt32, _ setup: [UInt8], length: Int) -> (UInt32, Int32, Int, [UInt8])? {
            Self.retSubmit(
                connection.receive(
                    Self.submit(seqnum: seq, in: setup[0] & 0x80 != 0, endpoint: 0, length: length, setup: setup),
                    importable: true
                )
            )
        }
        let first = try #require(control(1, Self.setup(0x80, 0x06, value: 0x0100, length: 64), length: 64))
        #expect(first.0 == 1 && first.1 == 0 && first.2 == 18)
        #expect(first.3 == [18, 1, 0, 2, 0, 0, 0, 64, 0x09, 0x12, 0xD0, 0xF1, 0, 1, 1, 2, 3, 1])
        let head = try #require(control(2, Self.setup(0x80, 0x06, value: 0x0200, length: 9), length: 9))
        #expect(head.3.count == 9 && head.3[2] == 41)
        let whole = try #require(control(3, Self.setup(0x80, 0x06, value: 0x0200, length: 41), length: 41))
        #expect(whole.3.count == 41)
        #expect(Array(whole.3[9..<18]) == [9, 4, 0, 0, 2, 3, 0, 0, 0])  // one HID interface, two endpoints
        #expect(Array(whole.3[18..<27]) == [9, 0x21, 0x11, 0x01, 0, 1, 0x22, 8, 0])
        #expect(Array(whole.3[27...]) == [7, 5, 0x81, 3, 64, 0, 5, 7, 5, 0x01, 3, 64, 0, 5])
        let languages = try #require(control(4, Self.setup(0x80, 0x06, value: 0x0300, length: 255), length: 255))
        #expect(languages.3 == [4, 3, 0x09, 0x04])
        let serial = try #require(control(5, Self.setup(0x80, 0x06, value: 0x0303, length: 255), length: 255))
        #expect(serial.3 == [6, 3, 0x53, 0, 0x31, 0])
        let qualifier = try #require(control(6, Self.setup(0x80, 0x06, value: 0x0600, length: 10), length: 10))
        #expect(qualifier.1 == -32 && qualifier.2 == 0)  // a full-speed device: STALL
        let configured = try #require(control(7, Self.setup(0x00, 0x09, value: 1, length: 0), length: 0))
        #expect(configured.1 == 0 && connection.configuration == 1)
        let idle = try #require(control(8, Self.setup(0x21, 0x0A, value: 0, length: 0), length: 0))
        #expect(idle.1 == 0)
        let report = try #require(control(9, Self.setup(0x81, 0x06, value: 0x2200, length: 8), length: 8))
        #expect(report.3 == Self.reportDescriptor)
        let unknown = try #require(control(10, Self.setup(0xC0, 0x33, value: 0, length: 4), length: 4))
        #expect(unknown.1 == -32)
    }

    @Test func interruptINWaitsForTheKeysReport() throws {
        var connection = Self.attached()
        #expect(
            connection.receive(Self.submit(seqnum: 20, in: true, endpoint: 1, length: 64), importable: true).isEmpty
        )
        #expect(connection.waitingTransfers == 1)
        let report = Array(repeating: UInt8(0xAB), count: 64)
        let answer = try #require(Self.retSubmit(connection.deliver(report: report)))
        #expect(answer.seqnum == 20 && answer.status == 0 && answer.length == 64 && answer.data == report)
        // A report before a transfer waits for it.
        #expect(connection.deliver(report: [1] + report.dropFirst()).isEmpty)
        let queued = try #require(
            Self.retSubmit(
                connection.receive(Self.submit(seqnum: 21, in: true, endpoint: 1, length: 64), importable: true)
            )
        )
        #expect(queued.seqnum == 21 && queued.data.first == 1)
    }

    @Test func interruptOUTCarriesTheHostsReport() throws {
        var connection = Self.attached()
        let report = Array(repeating: UInt8(0x5A), count: 64)
        let actions = connection.receive(
            Self.submit(seqnum: 30, in: false, endpoint: 1, length: 64, data: report),
            importable: true
        )
        #expect(actions.first == .report(report))
        let ret = try #require(Self.retSubmit(actions))
        #expect(ret.seqnum == 30 && ret.status == 0 && ret.length == 64 && ret.data.isEmpty)
    }

    @Test func splitAnywhereTheStreamMeansTheSame() {
        let report = Array(repeating: UInt8(0x5A), count: 64)
        let stream =
            Self.op(0x8003, busID: "1-1")
            + Self.submit(
                seqnum: 1,
                in: false,
                endpoint: 0,
                length: 0,
                setup: Self.setup(0x00, 0x09, value: 1, length: 0)
            )
            + Self.submit(seqnum: 2, in: false, endpoint: 1, length: 64, data: report)
        var whole = USBIPConnection(device: Self.device)
        let expected = whole.receive(stream, importable: true)
        var bytewise = USBIPConnection(device: Self.device)
        let actions = stream.flatMap { bytewise.receive([$0], importable: true) }
        #expect(actions == expected)
        #expect(expected.contains(.report(report)))
    }

    @Test func unlinkCancelsAWaitingTransfer() throws {
        var connection = Self.attached()
        _ = connection.receive(Self.submit(seqnum: 40, in: true, endpoint: 1, length: 64), importable: true)
        let unlink = be(2) + be(41) + be(Self.devid) + be(0) + be(0) + be(40) + zeros(24)
        let answer = connection.receive(unlink, importable: true)
        #expect(answer == [.send(be(4) + be(41) + zeros(12) + be(UInt32(bitPattern: -104)) + zeros(24))])
        #expect(connection.waitingTransfers == 0)
        // The report that comes next waits for a new transfer instead of answering the unlinked one.
        #expect(connection.deliver(report: zeros(64)).isEmpty)
        let late = connection.receive(
            be(2) + be(42) + be(Self.devid) + be(0) + be(0) + be(40) + zeros(24),
            importable: true
        )
        #expect(late == [.send(be(4) + be(42) + zeros(12) + be(0) + zeros(24))])
    }

    @Test func beforeSetConfigurationTheEndpointsStall() throws {
        var connection = USBIPConnection(device: Self.device)
        _ = connection.receive(Self.op(0x8003, busID: "1-1"), importable: true)
        let ret = try #require(
            Self.retSubmit(
                connection.receive(Self.submit(seqnum: 1, in: true, endpoint: 1, length: 64), importable: true)
            )
        )
        #expect(ret.status == -32)
        var configured = Self.attached()
        let noSuchEndpoint = configured.receive(
            Self.submit(seqnum: 2, in: true, endpoint: 2, length: 64),
            importable: true
        )
        let other = try #require(Self.retSubmit(noSuchEndpoint))
        #expect(other.status == -32)
    }

    @Test(
        arguments: [
            (be16(0x0106) + be16(0x8005) + be(0), "version"),
            (be16(0x0111) + be16(0x8004) + be(0), "operation code"),
        ] as [([UInt8], String)]
    )
    func malformedOperationsClose(bytes: [UInt8], why: String) {
        var connection = USBIPConnection(device: Self.device)
        let actions = connection.receive(bytes, importable: true)
        guard case .close(let text) = actions.last else {
            Issue.record("no close")
            return
        }
        #expect(text.contains(why))
        #expect(connection.phase == .closed)
        #expect(connection.receive(Self.op(0x8005), importable: true).isEmpty)
    }

    @Test(
        arguments: [
            (USBIPConnectionTests.submit(seqnum: 1, in: true, endpoint: 1, length: 64, devid: 0x0002_0002), "devid"),
            (USBIPConnectionTests.submit(seqnum: 1, in: true, endpoint: 1, length: 64, packets: 8), "isochronous"),
            (USBIPConnectionTests.submit(seqnum: 1, in: true, endpoint: 16, length: 64), "endpoint 16"),
            (USBIPConnectionTests.submit(seqnum: 1, in: true, endpoint: 1, length: 70_000), "70000 bytes"),
            (be(9) + zeros(44), "URB command 9"),
            (be(1) + be(1) + be(USBIPConnectionTests.devid) + be(2) + zeros(32), "direction 2"),
        ] as [([UInt8], String)]
    )
    func malformedURBsClose(bytes: [UInt8], why: String) {
        var connection = Self.attached()
        let actions = connection.receive(bytes, importable: true)
        guard case .close(let text) = actions.last else {
            Issue.record("no close for \(why)")
            return
        }
        #expect(text.contains(why))
        #expect(connection.deliver(report: zeros(64)).isEmpty)
    }

    @Test func aHostThatReadsNothingIsDisconnected() {
        var connection = Self.attached()
        var closed = false
        for _ in 0...USBIPConnection.maxQueued {
            if case .close = connection.deliver(report: zeros(64)).last { closed = true }
        }
        #expect(closed && connection.phase == .closed)
    }

    @Test func aHostThatLeavesTransfersWaitingWithoutEndIsDisconnected() {
        var connection = Self.attached()
        var last: [USBIPAction] = []
        for seqnum in 0...UInt32(USBIPConnection.maxWaiting) {
            last = connection.receive(
                Self.submit(seqnum: 10 + seqnum, in: true, endpoint: 1, length: 64),
                importable: true
            )
            #expect(connection.waitingTransfers <= USBIPConnection.maxWaiting)
        }
        guard case .close(let why) = last.last else {
            Issue.record("no close after \(USBIPConnection.maxWaiting + 1) waiting transfers")
            return
        }
        #expect(why.contains("interrupt IN transfers left waiting"))
    }
}

struct Failure: Error {
    var text: String
    init(_ text: String) { self.text = text }
}
