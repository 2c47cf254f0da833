import CUHID
import DequeModule
import Dispatch
import HIDAPIDevice
import Synchronization
import SystemPackage
package import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// How the virtual key presents itself on the USB bus.
package struct UHIDDeviceInfo: Sendable, Equatable {
    /// The product name the kernel and browsers show.
    package var name: String
    /// USB vendor id; the default 0x1209 is the pid.codes open-source vendor id.
    package var vendorID: UInt32
    /// USB product id; the default 0xF1D0 is fidosim's.
    package var productID: UInt32
    /// Device release number.
    package var version: UInt32
    /// HID country code.
    package var country: UInt32
    /// The serial number (uniq): stable per flash image so a host sees the same key after a restart.
    package var serial: String

    package static let defaultVendorID: UInt32 = 0x1209
    package static let defaultProductID: UInt32 = 0xF1D0

    package init(
        name: String = "fidosim virtual FIDO2 key",
        vendorID: UInt32 = UHIDDeviceInfo.defaultVendorID,
        productID: UInt32 = UHIDDeviceInfo.defaultProductID,
        version: UInt32 = 0x0100,
        country: UInt32 = 0,
        serial: String
    ) {
        self.name = name
        self.vendorID = vendorID
        self.productID = productID
        self.version = version
        self.country = country
        self.serial = serial
    }

    /// The HID report descriptor of a FIDO key: usage page 0xF1D0, usage 0x01, 64-byte input and output
    /// reports, no report ids.
    package static let reportDescriptor: [UInt8] = [
        0x06, 0xD0, 0xF1,  // Usage Page (FIDO Alliance)
        0x09, 0x01,  // Usage (CTAPHID)
        0xA1, 0x01,  // Collection (Application)
        0x09, 0x20,  //   Usage (Input Report Data)
        0x15, 0x00,  //   Logical Minimum (0)
        0x26, 0xFF, 0x00,  //   Logical Maximum (255)
        0x75, 0x08,  //   Report Size (8)
        0x95, 0x40,  //   Report Count (64)
        0x81, 0x02,  //   Input (Data, Variable, Absolute)
        0x09, 0x21,  //   Usage (Output Report Data)
        0x15, 0x00,  //   Logical Minimum (0)
        0x26, 0xFF, 0x00,  //   Logical Maximum (255)
        0x75, 0x08,  //   Report Size (8)
        0x95, 0x40,  //   Report Count (64)
        0x91, 0x02,  //   Output (Data, Variable, Absolute)
        0xC0,  // End Collection
    ]
}

/// The bytes of `struct uhid_event` (packed, little endian), built and parsed by offset.
enum UHIDEvent {
    static let size = MemoryLayout<uhid_event>.size

    static func create2(_ info: UHIDDeviceInfo) -> [UInt8] {
        var e = [UInt8](repeating: 0, count: size)
        put32(&e, 0, UHID_CREATE2.rawValue)
        putString(&e, 4, info.name, max: 128)
        putString(&e, 132, "fidosim", max: 64)
        putString(&e, 196, info.serial, max: 64)
        let rd = UHIDDeviceInfo.reportDescriptor
        put16(&e, 260, UInt16(rd.count))
        put16(&e, 262, 0x03)  // BUS_USB
        put32(&e, 264, info.vendorID)
        put32(&e, 268, info.productID)
        put32(&e, 272, info.version)
        put32(&e, 276, info.country)
        e.replaceSubrange(280..<(280 + rd.count), with: rd)
        return e
    }

    static func destroy() -> [UInt8] {
        var e = [UInt8](repeating: 0, count: size)
        put32(&e, 0, UHID_DESTROY.rawValue)
        return e
    }

    static func input2(_ report: [UInt8]) -> [UInt8] {
        var e = [UInt8](repeating: 0, count: 6 + report.count)
        put32(&e, 0, UHID_INPUT2.rawValue)
        put16(&e, 4, UInt16(report.count))
        e.replaceSubrange(6..<(6 + report.count), with: report)
        return e
    }

    static func getReportReply(id: UInt32, error: UInt16) -> [UInt8] {
        var e = [UInt8](repeating: 0, count: size)
        put32(&e, 0, UHID_GET_REPORT_REPLY.rawValue)
        put32(&e, 4, id)
        put16(&e, 8, error)
        return e
    }

    static func setReportReply(id: UInt32, error: UInt16) -> [UInt8] {
        var e = [UInt8](repeating: 0, count: size)
        put32(&e, 0, UHID_SET_REPORT_REPLY.rawValue)
        put32(&e, 4, id)
        put16(&e, 8, error)
        return e
    }

    /// The report carried by a UHID_OUTPUT event, without a leading report id 0 when the host sent 65 bytes.
    static func outputReport(_ e: [UInt8]) -> [UInt8]? {
        guard e.count >= 4103 else { return nil }
        let length = Int(get16(e, 4100))
        guard length <= 4096 else { return nil }
        var data = Array(e[4..<(4 + length)])
        if data.count == 65 && data[0] == 0 { data.removeFirst() }
        return data
    }

    static func put16(_ e: inout [UInt8], _ at: Int, _ v: UInt16) {
        e[at] = UInt8(v & 0xFF)
        e[at + 1] = UInt8(v >> 8)
    }

    static func put32(_ e: inout [UInt8], _ at: Int, _ v: UInt32) {
        for i in 0..<4 { e[at + i] = UInt8((v >> (8 * UInt32(i))) & 0xFF) }
    }

    static func get16(_ e: [UInt8], _ at: Int) -> UInt16 { UInt16(e[at]) | UInt16(e[at + 1]) << 8 }

    static func get32(_ e: [UInt8], _ at: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(e[at + $1]) << (8 * UInt32($1)) }
    }

    static func putString(_ e: inout [UInt8], _ at: Int, _ s: String, max: Int) {
        let bytes = Array(s.utf8.prefix(max - 1))
        e.replaceSubrange(at..<(at + bytes.count), with: bytes)
    }
}

/// Events read from /dev/uhid by the reader thread, waiting for the run loop.
///
/// The kernel keeps only 32 events for a uhid device and drops the rest, and a host writes a long message
/// (up to 129 reports) without waiting: so a dedicated thread reads the device as fast as it can and the run
/// loop is woken through a pipe.
final class UHIDEventQueue: Sendable {
    let events = Mutex<Deque<[UInt8]>>([])
    let wakeRead: FileDescriptor
    let wakeWrite: FileDescriptor
    /// Closed by ``close()``: events are dropped from then on, and the pipe is gone (its numbers may be reused, so
    /// nothing writes to it after).
    let closed = Mutex<Bool>(false)

    init() throws(TransportError) {
        do {
            (wakeRead, wakeWrite) = try FileDescriptor.pipe()
        } catch {
            throw TransportError("cannot create a pipe: \(error)")
        }
        for fd in [wakeRead.rawValue, wakeWrite.rawValue] {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
    }

    deinit { close() }

    /// Gives the pipe back before the queue goes (a key removed while its device lives on, as a private node does in
    /// umockdev's testbed): later events are dropped.
    func close() {
        closed.withLock { closed in
            guard !closed else { return }
            closed = true
            try? wakeRead.close()
            try? wakeWrite.close()
        }
    }

    /// Reads events from `fd` until it fails (the device is closed); runs on its own thread.
    func readForever(fd: FileDescriptor) {
        var buffer = [UInt8](repeating: 0, count: UHIDEvent.size)
        while true {
            // swift-system's read retries after a signal.
            guard let n = try? buffer.withUnsafeMutableBytes({ try fd.read(into: $0) }), n > 0 else { return }
            push(Array(buffer.prefix(n)))
        }
    }

    /// Queues an event and wakes the run loop.
    func push(_ event: [UInt8]) {
        closed.withLock { closed in
            guard !closed else { return }
            events.withLock { $0.append(event) }
            _ = try? wakeWrite.writeAll([UInt8(1)])
        }
    }

    /// The oldest queued event, after clearing the wake-up pipe.
    func next() -> [UInt8]? {
        closed.withLock { closed in
            guard !closed else { return nil }
            var sink = [UInt8](repeating: 0, count: 256)
            while let n = try? sink.withUnsafeMutableBytes({ try wakeRead.read(into: $0) }), n > 0 {}
            return events.withLock { $0.popFirst() }
        }
    }
}

/// A virtual USB HID device made through the kernel's uhid driver: the key appears as /dev/hidrawN.
///
/// The kernel removes the device when the file descriptor closes, so a crashed simulator leaves nothing
/// behind.
package final class UHIDTransport: ReportTransport {
    package let path: String
    package let info: UHIDDeviceInfo
    let fd: Int32
    let queue: UHIDEventQueue

    /// Opens the uhid character device and creates the key.
    package init(path: String = "/dev/uhid", info: UHIDDeviceInfo) throws(TransportError) {
        self.path = path
        self.info = info
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw Self.openError(path: path, errno: errno) }
        self.fd = fd
        do {
            queue = try UHIDEventQueue()
        } catch {
            close(fd)
            throw error
        }
        try create()
        let queue = self.queue
        DispatchQueue(label: "fidosim.uhid.reader").async { queue.readForever(fd: FileDescriptor(rawValue: fd)) }
    }

    deinit {
        _ = try? write(UHIDEvent.destroy())
        close(fd)
    }

    /// The error for a failed open of /dev/uhid, saying what to do.
    static func openError(path: String, errno code: Int32) -> TransportError {
        switch code {
        case ENOENT, ENODEV, ENXIO:
            return TransportError(
                "\(path) does not exist: load the uhid kernel module (sudo modprobe uhid; to load it at boot, "
                    + "echo uhid | sudo tee /etc/modules-load.d/uhid.conf), or use --transport udp"
            )
        case EACCES, EPERM:
            return TransportError(
                "permission denied on \(path): install the udev rules (sudo make install-udev), add yourself to "
                    + "the fidosim group (sudo usermod -aG fidosim $USER) and log in again, or run as root; "
                    + "or use --transport udp"
            )
        default:
            return TransportError("cannot open \(path): \(String(cString: strerror(code)))")
        }
    }

    /// True when `path` can be opened for writing (what `--transport auto` checks).
    package static func isUsable(path: String = "/dev/uhid") -> Bool {
        access(path, W_OK) == 0
    }

    package var descriptor: Int32 { queue.wakeRead.rawValue }
    package var summary: String { "uhid \(path) (\(info.name), serial \(info.serial))" }

    func create() throws(TransportError) {
        try write(UHIDEvent.create2(info))
    }

    func write(_ event: [UInt8]) throws(TransportError) {
        let n = event.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard n == event.count else {
            throw TransportError("writing to \(path) failed: \(String(cString: strerror(errno)))")
        }
    }

    package func receive() -> TransportEvent? {
        guard let event = queue.next() else { return nil }
        let n = event.count
        guard n >= 4 else { return .note("uhid: short event") }
        let type = UHIDEvent.get32(event, 0)
        switch type {
        case UHID_OUTPUT.rawValue:
            guard let report = UHIDEvent.outputReport(event) else { return .note("uhid: malformed output event") }
            return .report(report)
        case UHID_START.rawValue: return .note("uhid: device started")
        case UHID_STOP.rawValue: return .note("uhid: device stopped")
        case UHID_OPEN.rawValue: return .note("uhid: opened by a host program")
        case UHID_CLOSE.rawValue: return .note("uhid: closed by the host program")
        case UHID_GET_REPORT.rawValue:
            let id = n >= 8 ? UHIDEvent.get32(event, 4) : 0
            _ = try? write(UHIDEvent.getReportReply(id: id, error: UInt16(EIO)))
            return .note("uhid: refused a GET_REPORT (a FIDO key has no feature reports)")
        case UHID_SET_REPORT.rawValue:
            let id = n >= 8 ? UHIDEvent.get32(event, 4) : 0
            _ = try? write(UHIDEvent.setReportReply(id: id, error: UInt16(EIO)))
            return .note("uhid: refused a SET_REPORT (a FIDO key has no feature reports)")
        default:
            return .note("uhid: ignored event type \(type)")
        }
    }

    package func send(_ report: [UInt8]) {
        pacer.wait()
        _ = try? write(UHIDEvent.input2(report))
    }

    /// Paces input reports like a full-speed USB interrupt endpoint: bursts of up to 32 reports, then one per
    /// millisecond. hidraw keeps 64 reports per reader and drops the newest when a reader falls behind; a USB host
    /// polls the endpoint, so a real key never outruns it. Only a long message (a 7609-byte PING is 130 reports)
    /// ever waits.
    var pacer = ReportPacer(burst: 32, intervalNs: 1_000_000)

    /// Destroys and re-creates the device: the hidraw node goes away and comes back, as on a real replug.
    package func replug() throws(TransportError) {
        try unplug()
        try plug()
    }

    package func unplug() throws(TransportError) {
        try write(UHIDEvent.destroy())
    }

    package func plug() throws(TransportError) {
        try create()
    }
}
