import HIDAPIDevice
package import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// The key as a real USB device through the Linux USB gadget framework: a configfs gadget with one HID function
/// (FIDO report descriptor, 64-byte reports) bound to a USB device controller. The host side enumerates it over
/// USB, binds usbhid, and sees a hidraw security key; fidosim reads and writes the function's `/dev/hidgN`. This is
/// how the firmware runs on a board with a USB device controller; on a PC, `dummy_hcd` is a loopback controller
/// whose host side is the same kernel.
package final class GadgetTransport: ReportTransport {
    package let gadget: String
    package let udc: String
    package let node: String
    let fd: Int32
    package var descriptor: Int32 { fd }
    package var summary: String { "gadget \(node) (USB device controller \(udc), configfs \(gadget))" }

    static let configfs = "/sys/kernel/config/usb_gadget"

    /// Creates the gadget `fidosim-NAME` and binds it to `udc` (default: the first controller listed).
    package init(name: String, info: UHIDDeviceInfo, udc requested: String? = nil) throws(TransportError) {
        guard Self.isDirectory(Self.configfs) else {
            throw TransportError(
                "\(Self.configfs) is missing: load the gadget framework and mount configfs (modprobe libcomposite; "
                    + "mount -t configfs none /sys/kernel/config) as root"
            )
        }
        let controllers = Self.list("/sys/class/udc")
        guard let udc = requested ?? controllers.first else {
            throw TransportError(
                "no USB device controller in /sys/class/udc: on a PC, modprobe dummy_hcd gives a loopback one"
            )
        }
        guard controllers.contains(udc) else {
            throw TransportError("no USB device controller \(udc) (there are: \(controllers.joined(separator: ", ")))")
        }
        let gadget = "\(Self.configfs)/fidosim-\(name)"
        guard !Self.isDirectory(gadget) else {
            throw TransportError("\(gadget) exists: another fidosim serves this name (or remove the gadget)")
        }
        self.gadget = gadget
        self.udc = udc
        do throws(TransportError) {
            try Self.make(gadget: gadget, info: info)
            try Self.writeFile("\(gadget)/UDC", Array(udc.utf8))
            let node = try Self.hidgNode(function: "\(gadget)/functions/hid.fido")
            let fd = open(node, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { throw TransportError("cannot open \(node): \(String(cString: strerror(errno)))") }
            self.node = node
            self.fd = fd
        } catch {
            Self.remove(gadget: gadget)
            throw error
        }
    }

    deinit {
        close(fd)
        Self.remove(gadget: gadget)
    }

    package func receive() -> TransportEvent? {
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return .report(Array(buffer.prefix(n)))
    }

    /// Writes one input report. The function holds one report until the host polls for it: while the previous one
    /// is still queued the write would block, so it is retried for up to a second (a host that stopped reading).
    package func send(_ report: [UInt8]) {
        for _ in 0..<1000 {
            let n = report.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n == report.count || (n < 0 && errno != EAGAIN && errno != EINTR) { return }
            var pause = timespec(tv_sec: 0, tv_nsec: 1_000_000)
            _ = nanosleep(&pause, nil)
        }
    }

    /// A soft disconnect: unbind the controller and bind it again; the host sees the device go and come back.
    package func replug() throws(TransportError) {
        try Self.writeFile("\(gadget)/UDC", Array("\n".utf8))
        try Self.writeFile("\(gadget)/UDC", Array(udc.utf8))
    }

    // MARK: configfs

    static func make(gadget: String, info: UHIDDeviceInfo) throws(TransportError) {
        let hex = { (value: UInt32) in "0x" + String(value, radix: 16) }
        for dir in [
            gadget, "\(gadget)/strings/0x409", "\(gadget)/configs/c.1", "\(gadget)/configs/c.1/strings/0x409",
            "\(gadget)/functions/hid.fido",
        ] {
            guard mkdir(dir, 0o755) == 0 || errno == EEXIST else {
                throw TransportError("cannot create \(dir): \(String(cString: strerror(errno))) (as root?)")
            }
        }
        let files: [(String, [UInt8])] = [
            ("idVendor", Array(hex(info.vendorID).utf8)), ("idProduct", Array(hex(info.productID).utf8)),
            ("bcdDevice", Array("0x0100".utf8)), ("bcdUSB", Array("0x0200".utf8)),
            ("strings/0x409/serialnumber", Array(info.serial.utf8)),
            ("strings/0x409/manufacturer", Array("fidosim".utf8)),
            ("strings/0x409/product", Array(info.name.utf8)),
            ("configs/c.1/strings/0x409/configuration", Array("FIDO".utf8)),
            ("configs/c.1/MaxPower", Array("100".utf8)),
            ("functions/hid.fido/protocol", Array("0".utf8)), ("functions/hid.fido/subclass", Array("0".utf8)),
            ("functions/hid.fido/report_length", Array("64".utf8)),
            ("functions/hid.fido/report_desc", UHIDDeviceInfo.reportDescriptor),
        ]
        for (file, value) in files { try writeFile("\(gadget)/\(file)", value) }
        guard symlink("\(gadget)/functions/hid.fido", "\(gadget)/configs/c.1/hid.fido") == 0 || errno == EEXIST else {
            throw TransportError(
                "cannot add the HID function to the configuration: \(String(cString: strerror(errno)))"
            )
        }
    }

    /// Undoes `make`, in the order configfs requires; what does not exist is skipped.
    static func remove(gadget: String) {
        _ = try? writeFile("\(gadget)/UDC", Array("\n".utf8))
        unlink("\(gadget)/configs/c.1/hid.fido")
        for dir in ["configs/c.1/strings/0x409", "configs/c.1", "functions/hid.fido", "strings/0x409", ""] {
            rmdir(dir.isEmpty ? gadget : "\(gadget)/\(dir)")
        }
    }

    /// The `/dev/hidgN` of a HID function, from its `dev` attribute (major:minor).
    static func hidgNode(function: String) throws(TransportError) -> String {
        guard let dev = readFile("\(function)/dev")?.split(separator: "\n").first.map(String.init) else {
            throw TransportError("\(function)/dev is missing: is usb_f_hid loaded?")
        }
        for entry in list("/sys/class/hidg") where readFile("/sys/class/hidg/\(entry)/dev")?.hasPrefix(dev) == true {
            let node = "/dev/\(entry)"
            for _ in 0..<50 where access(node, F_OK) != 0 {
                var pause = timespec(tv_sec: 0, tv_nsec: 20_000_000)
                _ = nanosleep(&pause, nil)
            }
            return node
        }
        throw TransportError("no /dev/hidgN for \(function) (device number \(dev))")
    }

    static func writeFile(_ path: String, _ value: [UInt8]) throws(TransportError) {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TransportError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let n = value.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        guard n == value.count else {
            throw TransportError("writing \(path) failed: \(String(cString: strerror(errno)))")
        }
    }

    static func readFile(_ path: String) -> String? {
        SysfsFiles.read(path, limit: 256).map { String(decoding: $0, as: UTF8.self) }
    }

    static func list(_ directory: String) -> [String] { SysfsFiles.names(in: directory) }

    static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}
