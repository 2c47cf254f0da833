import CHIDAPI

#if canImport(Glibc)
import Glibc
#endif

/// Why a HID device cannot be listed, opened, read or written, or an address is not one.
package struct HIDDeviceError: Error, Equatable, CustomStringConvertible {
    package var message: String

    package init(_ message: String) {
        self.message = message
    }

    package var description: String { message }
}

/// Where a key is: `udp:HOST:PORT`, `hid:/dev/hidrawN` (or any hidapi path), `hid:VID:PID` (hexadecimal) or
/// `hid:auto`; or a card in a PC/SC reader, `pcsc:NAME` (the one reader whose name contains NAME).
package enum DeviceAddress: Equatable, Sendable, CustomStringConvertible {
    /// `udp:HOST:PORT`, with `?reply-port=N` for a key that answers to a fixed port (solo1's simulation: 7112).
    case udp(host: String, port: UInt16, replyPort: UInt16? = nil)
    case pcsc(reader: String)
    case hidPath(String)
    case hidID(vendor: UInt16, product: UInt16)
    case hidAuto

    /// `VID:PID` in hexadecimal (`1209:f1d0`), or nil.
    package static func parseVIDPID(_ text: some StringProtocol) -> (vendor: UInt16, product: UInt16)? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ (1...4).contains($0.count) }),
            let vendor = UInt16(parts[0], radix: 16), let product = UInt16(parts[1], radix: 16)
        else { return nil }
        return (vendor, product)
    }

    /// `VID:PID` as four lowercase hex digits each.
    package static func formatVIDPID(_ vendor: UInt16, _ product: UInt16) -> String {
        func four(_ v: UInt16) -> String {
            let digits = String(v, radix: 16)
            return String(repeating: "0", count: 4 - digits.count) + digits
        }
        return four(vendor) + ":" + four(product)
    }

    package init(parsing text: String) throws(HIDDeviceError) {
        if text == "hid:auto" {
            self = .hidAuto
        } else if text.hasPrefix("pcsc:") {
            guard text.count > 5 else {
                throw HIDDeviceError("'\(text)': expected pcsc:READER (a part of the reader's name)")
            }
            self = .pcsc(reader: String(text.dropFirst(5)))
        } else if text.hasPrefix("hid:"), let (vendor, product) = Self.parseVIDPID(text.dropFirst(4)) {
            self = .hidID(vendor: vendor, product: product)
        } else if text.hasPrefix("hid:"), text.count > 4 {
            self = .hidPath(String(text.dropFirst(4)))
        } else if text.hasPrefix("udp:") {
            let parts = text.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            let address = parts[0]
            guard let colon = address.lastIndex(of: ":"), colon > address.index(address.startIndex, offsetBy: 3)
            else {
                throw HIDDeviceError("'\(text)': expected udp:HOST:PORT with a port from 1 to 65535")
            }
            let host = String(address[address.index(address.startIndex, offsetBy: 4)..<colon])
            guard !host.isEmpty, let port = UInt16(address[address.index(after: colon)...]), port > 0 else {
                throw HIDDeviceError("'\(text)': expected udp:HOST:PORT with a port from 1 to 65535")
            }
            var replyPort: UInt16?
            if parts.count == 2 {
                guard parts[1].hasPrefix("reply-port="), let value = UInt16(parts[1].dropFirst(11)), value > 0 else {
                    throw HIDDeviceError(
                        "'\(text)': the only option of a udp: address is ?reply-port=N (a port from 1 to 65535)"
                    )
                }
                replyPort = value
            }
            self = .udp(host: host, port: port, replyPort: replyPort)
        } else {
            throw HIDDeviceError(
                "'\(text)': expected hid:/dev/hidrawN, hid:VID:PID, hid:auto, udp:HOST:PORT or pcsc:READER"
            )
        }
    }

    package var description: String {
        switch self {
        case .udp(let host, let port, let reply): "udp:\(host):\(port)" + (reply.map { "?reply-port=\($0)" } ?? "")
        case .hidPath(let path): "hid:\(path)"
        case .hidID(let vendor, let product): "hid:" + Self.formatVIDPID(vendor, product)
        case .hidAuto: "hid:auto"
        case .pcsc(let reader): "pcsc:\(reader)"
        }
    }
}

/// Which hidapi backend opens HID devices: hidraw (linked) or libusb (loaded when asked for, because both
/// libraries define the same symbols).
package enum HIDBackend: String, Sendable, CaseIterable {
    case hidraw
    case libusb
}

/// A HID device hidapi lists.
package struct HIDDeviceInfo: Sendable, Equatable {
    package var path: String
    package var vendorID: UInt16
    package var productID: UInt16
    package var usagePage: UInt16
    package var usage: UInt16
    package var product: String
    package var manufacturer: String
    package var serial: String

    /// The FIDO usage page (CTAP 2.1, "HID report descriptor and device discovery").
    package static let fidoUsagePage: UInt16 = 0xF1D0
}

extension DeviceAddress {
    /// The path of the HID device this address names among `devices`, or nil. `hid:VID:PID` takes the first
    /// device with those IDs, `hid:auto` the first on the FIDO usage page, `hid:PATH` that path.
    ///
    /// `knownSerial` is the serial number of the key opened first, when it has one. Then only a device with that
    /// serial number is taken, whatever the address: after an unplug and replug the key may come back under another
    /// path, and until it is back its old path may belong to another key.
    package func hidDevicePath(among devices: [HIDDeviceInfo], knownSerial: String?) -> String? {
        var candidates = devices
        switch self {
        case .hidID(let vendor, let product):
            candidates = devices.filter { $0.vendorID == vendor && $0.productID == product }
        case .hidAuto: candidates = devices.filter { $0.usagePage == HIDDeviceInfo.fidoUsagePage }
        case .hidPath, .udp, .pcsc: break
        }
        if let knownSerial, !knownSerial.isEmpty {
            return candidates.first { $0.serial == knownSerial }?.path
        }
        switch self {
        case .hidPath(let given): return given
        case .udp, .pcsc: return nil
        case .hidID, .hidAuto: return candidates.first?.path
        }
    }
}

/// The hidapi calls FIDOClient makes, from the linked hidraw library or from a dlopened libusb one.
struct HIDAPI: @unchecked Sendable {
    // @unchecked: C function pointers, immutable after loading.
    typealias Enumerate = @convention(c) (UInt16, UInt16) -> UnsafeMutablePointer<hid_device_info>?
    typealias FreeEnumeration = @convention(c) (UnsafeMutablePointer<hid_device_info>?) -> Void
    typealias OpenPath = @convention(c) (UnsafePointer<CChar>?) -> OpaquePointer?
    typealias Write = @convention(c) (OpaquePointer?, UnsafePointer<UInt8>?, Int) -> Int32
    typealias ReadTimeout = @convention(c) (OpaquePointer?, UnsafeMutablePointer<UInt8>?, Int, Int32) -> Int32
    typealias Close = @convention(c) (OpaquePointer?) -> Void
    typealias Init = @convention(c) () -> Int32

    let initialize: Init
    let enumerate: Enumerate
    let freeEnumeration: FreeEnumeration
    let openPath: OpenPath
    let write: Write
    let readTimeout: ReadTimeout
    let close: Close

    static let hidraw = HIDAPI(
        initialize: { hid_init() },
        enumerate: { hid_enumerate($0, $1) },
        freeEnumeration: { hid_free_enumeration($0) },
        openPath: { hid_open_path($0) },
        write: { hid_write($0, $1, $2) },
        readTimeout: { hid_read_timeout($0, $1, $2, $3) },
        close: { hid_close($0) }
    )

    static func load(_ backend: HIDBackend) throws(HIDDeviceError) -> HIDAPI {
        switch backend {
        case .hidraw:
            return .hidraw
        case .libusb:
            guard let handle = dlopen("libhidapi-libusb.so.0", RTLD_NOW | RTLD_LOCAL) else {
                throw HIDDeviceError(
                    "hidapi's libusb backend: \(String(cString: dlerror())) (install libhidapi-libusb0)"
                )
            }
            func symbol<T>(_ name: String, as type: T.Type) throws(HIDDeviceError) -> T {
                guard let pointer = dlsym(handle, name) else { throw HIDDeviceError("libhidapi-libusb has no \(name)") }
                return unsafeBitCast(pointer, to: type)
            }
            return HIDAPI(
                initialize: try symbol("hid_init", as: Init.self),
                enumerate: try symbol("hid_enumerate", as: Enumerate.self),
                freeEnumeration: try symbol("hid_free_enumeration", as: FreeEnumeration.self),
                openPath: try symbol("hid_open_path", as: OpenPath.self),
                write: try symbol("hid_write", as: Write.self),
                readTimeout: try symbol("hid_read_timeout", as: ReadTimeout.self),
                close: try symbol("hid_close", as: Close.self)
            )
        }
    }

    func devices() -> [HIDDeviceInfo] {
        _ = initialize()
        var list: [HIDDeviceInfo] = []
        let head = enumerate(0, 0)
        var node = head
        while let info = node?.pointee {
            func text(_ wide: UnsafeMutablePointer<wchar_t>?) -> String {
                guard let wide else { return "" }
                var scalars = String.UnicodeScalarView()
                var i = 0
                while wide[i] != 0, i < 256 {
                    if let scalar = Unicode.Scalar(UInt32(bitPattern: wide[i])) { scalars.append(scalar) }
                    i += 1
                }
                return String(scalars)
            }
            list.append(
                HIDDeviceInfo(
                    path: info.path.map { String(cString: $0) } ?? "",
                    vendorID: info.vendor_id,
                    productID: info.product_id,
                    usagePage: info.usage_page,
                    usage: info.usage,
                    product: text(info.product_string),
                    manufacturer: text(info.manufacturer_string),
                    serial: text(info.serial_number)
                )
            )
            node = info.next
        }
        freeEnumeration(head)
        return list
    }
}

/// A HID device opened with hidapi: 64-byte reports out and in, paced as a full-speed USB endpoint takes them.
package final class HIDDevice {
    let api: HIDAPI
    let device: OpaquePointer
    package let name: String
    package let path: String

    /// Every HID device the backend lists; `fidoOnly` keeps those on the FIDO usage page.
    ///
    /// hidapi's libusb backend (0.13) reports no usage page: reading the report descriptor would mean detaching the
    /// kernel's driver. Where usbhid has the interface, its sysfs node has the descriptor, so the usage comes from
    /// there (`/sys/bus/usb/devices/<path>/*/report_descriptor`, hidapi-libusb's path being the interface's name).
    package static func devices(
        backend: HIDBackend = .hidraw,
        fidoOnly: Bool = true
    ) throws(HIDDeviceError) -> [HIDDeviceInfo] {
        var all = try HIDAPI.load(backend).devices()
        if backend == .libusb {
            for i in all.indices where all[i].usagePage == 0 {
                if let (page, usage) = usageFromSysfs(interface: all[i].path) {
                    all[i].usagePage = page
                    all[i].usage = usage
                }
            }
        }
        return fidoOnly ? all.filter { $0.usagePage == HIDDeviceInfo.fidoUsagePage } : all
    }

    /// The top-level usage of a USB interface's report descriptor, as usbhid exposes it in sysfs.
    static func usageFromSysfs(interface: String, root: String = "/sys/bus/usb/devices") -> (UInt16, UInt16)? {
        // An interface name such as 1-1:1.0; anything else (a path with '/' or '..') is not looked up.
        guard !interface.isEmpty, !interface.contains("/"), !interface.hasPrefix(".") else { return nil }
        for name in SysfsFiles.names(in: "\(root)/\(interface)") {
            if let bytes = SysfsFiles.read("\(root)/\(interface)/\(name)/report_descriptor"),
                let usage = ReportDescriptor.topLevelUsage(bytes)
            {
                return usage
            }
        }
        return nil
    }

    package convenience init(path: String, backend: HIDBackend = .hidraw) throws(HIDDeviceError) {
        try self.init(path: path, api: try HIDAPI.load(backend))
    }

    init(path: String, api: HIDAPI) throws(HIDDeviceError) {
        self.api = api
        _ = api.initialize()
        guard let device = api.openPath(path) else {
            throw HIDDeviceError(
                "hid:\(path): cannot open it (\(String(cString: strerror(errno))); is it there, and may you read it?)"
            )
        }
        self.device = device
        self.path = path
        name = "hid:\(path)"
    }

    /// Opens the first FIDO device hidapi lists.
    package convenience init(auto backend: HIDBackend = .hidraw) throws(HIDDeviceError) {
        guard let first = try Self.devices(backend: backend).first else {
            throw HIDDeviceError("hid:auto: no HID device on the FIDO usage page 0xF1D0")
        }
        try self.init(path: first.path, backend: backend)
    }

    /// The first device with this vendor and product ID, whatever its usage page (a bridge board is not on FIDO's).
    package convenience init(vendorID: UInt16, productID: UInt16, backend: HIDBackend = .hidraw) throws(HIDDeviceError)
    {
        let matches = try Self.devices(backend: backend, fidoOnly: false).filter {
            $0.vendorID == vendorID && $0.productID == productID
        }
        guard let first = matches.first else {
            throw HIDDeviceError(
                "no HID device \(String(vendorID, radix: 16)):\(String(productID, radix: 16)) (hidapi lists none with that ID)"
            )
        }
        try self.init(path: first.path, backend: backend)
    }

    deinit { api.close(device) }

    /// Bursts of up to 16 reports, then one per millisecond: the pace of a full-speed USB interrupt endpoint
    /// (bInterval 1), where a write blocks until the key takes the report. A uhid key has no such flow control: the
    /// kernel queues 32 reports for it and drops what a faster writer sends.
    var pacer = ReportPacer(burst: 16, intervalNs: 1_000_000)
    /// Reads that returned no bytes (timeouts and zero-length reports).
    package private(set) var zeroLengthReads = 0

    package func send(_ report: [UInt8]) throws(HIDDeviceError) {
        pacer.wait()
        // hidapi takes the report ID first: 0 for a device without numbered reports.
        let framed = [0] + report
        let written = framed.withUnsafeBufferPointer { api.write(device, $0.baseAddress, $0.count) }
        guard written >= 0 else { throw HIDDeviceError("\(name): write failed (unplugged?)") }
    }

    /// The next report, or nil when none came within `timeoutMs`.
    ///
    /// hidapi returns 0 both for a timeout and for a zero-length report. Through the libusb backend a USB device
    /// can send zero-length packets (the Linux HID gadget on dummy_hcd follows each 64-byte report with one), and
    /// usbhid drops them, so they are skipped here too: only a read that waited out its time is a timeout.
    package func receive(timeoutMs: Int) throws(HIDDeviceError) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 64)
        let deadline = ReportPacer.nowNs() + Double(max(0, timeoutMs)) * 1e6
        while true {
            let left = Int(((deadline - ReportPacer.nowNs()) / 1e6).rounded(.up))
            let count = buffer.withUnsafeMutableBufferPointer {
                api.readTimeout(device, $0.baseAddress, $0.count, Int32(clamping: max(0, left)))
            }
            guard count >= 0 else { throw HIDDeviceError("\(name): read failed (unplugged?)") }
            if count > 0 { return Array(buffer[0..<Int(count)]) }
            zeroLengthReads += 1
            if left <= 0 || ReportPacer.nowNs() >= deadline { return nil }
        }
    }
}

/// A token bucket of reports: `burst` at once, then one per `intervalNs`.
package struct ReportPacer: Sendable {
    let burst: Double
    let intervalNs: Double
    var tokens: Double
    var lastNs: Double = 0

    package init(burst: Int, intervalNs: Int) {
        self.burst = Double(burst)
        self.intervalNs = Double(intervalNs)
        tokens = Double(burst)
    }

    package static func nowNs() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) * 1e9 + Double(now.tv_nsec)
    }

    /// Takes one token, sleeping until one is there.
    package mutating func wait() {
        let now = Self.nowNs()
        tokens = min(burst, tokens + (now - lastNs) / intervalNs)
        lastNs = now
        if tokens < 1 {
            let ns = (1 - tokens) * intervalNs
            var pause = timespec(tv_sec: 0, tv_nsec: Int(ns))
            _ = nanosleep(&pause, nil)
            lastNs = Self.nowNs()
            tokens = 1
        }
        tokens -= 1
    }
}

/// Just enough of a HID report descriptor (HID 1.11 §6.2.2) to find its first top-level usage.
enum ReportDescriptor {
    /// The usage page and usage in force at the first Collection item: what hidraw and hidapi call the device's.
    static func topLevelUsage(_ bytes: [UInt8]) -> (page: UInt16, usage: UInt16)? {
        var page: UInt32?
        var usage: UInt32?
        var i = 0
        while i < bytes.count {
            let prefix = bytes[i]
            if prefix == 0xFE {  // a long item: data size in the next byte, then its tag, then the data
                guard i + 1 < bytes.count else { return nil }
                i += 3 + Int(bytes[i + 1])
                continue
            }
            let size = [0, 1, 2, 4][Int(prefix & 0x03)]
            guard i + 1 + size <= bytes.count else { return nil }
            var value: UInt32 = 0
            for k in 0..<size { value |= UInt32(bytes[i + 1 + k]) << (8 * k) }
            switch prefix & 0xFC {
            case 0x04: page = value  // Usage Page (global)
            case 0x08:  // Usage (local); a 4-byte usage carries its own page in the high half
                if size == 4 {
                    page = value >> 16
                    usage = value & 0xFFFF
                } else {
                    usage = value
                }
            case 0xA0:  // Collection
                guard let page, let usage else { return nil }
                return (UInt16(truncatingIfNeeded: page), UInt16(truncatingIfNeeded: usage))
            default: break
            }
            i += 1 + size
        }
        return nil
    }
}

extension HIDDeviceInfo {
    /// One line of a device list: path, VID:PID, FIDO or the usage page, names and serial, separated by tabs.
    package var listingLine: String {
        let id = DeviceAddress.formatVIDPID(vendorID, productID)
        let fido = usagePage == Self.fidoUsagePage ? "FIDO" : "page 0x" + String(usagePage, radix: 16)
        return "\(path)\t\(id)\t\(fido)\t\(manufacturer) \(product)\tserial \(serial)"
    }
}
