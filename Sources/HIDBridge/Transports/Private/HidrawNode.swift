#if canImport(Glibc)
import Glibc
#endif

/// What the kernel's hidraw driver answers on a node, without the node: the ioctls a FIDO key's node knows, and
/// the rules of its reads and writes (firmware-spec/private-key.md). The private hidraw key answers its clients
/// through it.
package struct HidrawNode: Sendable, Equatable {
    /// Bus, vendor and product, name, physical path and serial, as `HIDIOCGRAWINFO` and the string ioctls give them.
    package var info: UHIDDeviceInfo
    package var phys: String
    package var descriptor: [UInt8] = UHIDDeviceInfo.reportDescriptor

    package init(info: UHIDDeviceInfo, phys: String) {
        self.info = info
        self.phys = phys
    }

    /// An ioctl request as `_IOC` packs it.
    package struct Request: Sendable, Equatable {
        package var raw: UInt
        package init(_ raw: UInt) { self.raw = raw }
        package var number: UInt { raw & 0xFF }
        package var type: UInt { (raw >> 8) & 0xFF }
        package var size: Int { Int((raw >> 16) & 0x3FFF) }
        package var direction: UInt { (raw >> 30) & 0x3 }

        static func make(direction: UInt, number: UInt, size: Int) -> Request {
            Request(direction << 30 | UInt(size) << 16 | UInt(UInt8(ascii: "H")) << 8 | number)
        }
        package static let read: UInt = 2
        package static let write: UInt = 1
        package static let getDescriptorSize = make(direction: read, number: 0x01, size: 4)
        package static let getDescriptor = make(direction: read, number: 0x02, size: 4 + 4096)
        package static let getInfo = make(direction: read, number: 0x03, size: 8)
        package static func getName(_ length: Int) -> Request { make(direction: read, number: 0x04, size: length) }
        package static func getPhys(_ length: Int) -> Request { make(direction: read, number: 0x05, size: length) }
        package static func getUniq(_ length: Int) -> Request { make(direction: read, number: 0x08, size: length) }
    }

    /// How one ioctl is answered.
    package enum Answer: Sendable, Equatable {
        /// Read `load` bytes of the caller's argument, hand them to ``Step/fill``, write them back, return `result`.
        case fill(load: Int)
        /// Return -1 with this errno, touching nothing.
        case error(Int32)
    }

    /// The first step of an ioctl: how much of the caller's memory it touches (never more than the kernel would
    /// write), or the error it fails with.
    package func answer(_ request: Request) -> Answer {
        // The kernel's hidraw answers ioctls of other drivers (a terminal's TCGETS from isatty) with EINVAL.
        guard request.type == UInt(UInt8(ascii: "H")) else { return .error(EINVAL) }
        switch (request.direction, request.number) {
        case (Request.read, 0x01): return request.size == 4 ? .fill(load: 4) : .error(ENOTTY)
        case (Request.read, 0x02):
            // struct hidraw_report_descriptor: the caller's size, then the bytes; only min(size, ours) are written.
            return request.size == 4 + 4096 ? .fill(load: 4 + descriptor.count) : .error(ENOTTY)
        case (Request.read, 0x03): return request.size == 8 ? .fill(load: 8) : .error(ENOTTY)
        case (Request.read, 0x04): return .fill(load: min(request.size, info.name.utf8.count + 1))
        case (Request.read, 0x05): return .fill(load: min(request.size, phys.utf8.count + 1))
        case (Request.read, 0x08): return .fill(load: min(request.size, info.serial.utf8.count + 1))
        case (Request.read | Request.write, 0x06), (Request.read | Request.write, 0x07),
            (Request.read | Request.write, 0x09), (Request.read | Request.write, 0x0A),
            (Request.read | Request.write, 0x0B), (Request.read | Request.write, 0x0C):
            // A FIDO key has no feature, input or output reports to get or set by control transfer: its USB
            // endpoint stalls the request, which hidraw returns as EPIPE.
            return .error(EPIPE)
        default: return .error(ENOTTY)
        }
    }

    /// The second step: the caller's `argument` (as loaded) becomes what the kernel writes there; returns the
    /// ioctl's result, or an errno.
    package func fill(_ request: Request, _ argument: inout [UInt8]) -> Result<Int, HidrawError> {
        switch request.number {
        case 0x01:
            put32(&argument, 0, UInt32(descriptor.count))
            return .success(0)
        case 0x02:
            guard argument.count >= 4 else { return .failure(HidrawError(EFAULT)) }
            let asked = Int(
                UInt32(argument[0]) | UInt32(argument[1]) << 8 | UInt32(argument[2]) << 16
                    | UInt32(argument[3]) << 24
            )
            // The kernel refuses a size past its largest descriptor (4096 - 1).
            guard asked < 4096 else { return .failure(HidrawError(EINVAL)) }
            let count = min(asked, descriptor.count, argument.count - 4)
            argument.replaceSubrange(4..<(4 + count), with: descriptor[0..<count])
            return .success(0)
        case 0x03:
            guard argument.count >= 8 else { return .failure(HidrawError(EFAULT)) }
            put32(&argument, 0, 0x03)  // BUS_USB
            argument[4] = UInt8(info.vendorID & 0xFF)
            argument[5] = UInt8((info.vendorID >> 8) & 0xFF)
            argument[6] = UInt8(info.productID & 0xFF)
            argument[7] = UInt8((info.productID >> 8) & 0xFF)
            return .success(0)
        case 0x04: return .success(Self.putString(info.name, &argument))
        case 0x05: return .success(Self.putString(phys, &argument))
        case 0x08: return .success(Self.putString(info.serial, &argument))
        default: return .failure(HidrawError(ENOTTY))
        }
    }

    /// The report a host's `write()` carries: hidraw takes the first byte as the report number; on a device without
    /// numbered reports, number 0 is dropped and the rest is the report, and any other first byte stays part of it
    /// (as usbhid sends it). The errno the kernel gives for a write it refuses.
    package static func report(fromWrite bytes: [UInt8]) -> Result<[UInt8], HidrawError> {
        // hidraw refuses an empty write and one longer than HID_MAX_BUFFER_SIZE (16384).
        guard !bytes.isEmpty, bytes.count <= 16384 else { return .failure(HidrawError(EINVAL)) }
        return .success(bytes[0] == 0 ? Array(bytes.dropFirst()) : bytes)
    }

    /// What one `read()` of `count` bytes returns of a waiting report: one report, cut to the buffer (the rest of
    /// it is lost, as hidraw loses it).
    package static func readResult(_ report: [UInt8], count: Int) -> [UInt8] {
        Array(report.prefix(max(0, count)))
    }

    /// hidraw keeps this many reports per reader; a report that finds the buffer full is dropped.
    package static let bufferedReports = 64

    /// Writes `text` and its terminating zero, cut to the caller's buffer; returns the bytes written.
    static func putString(_ text: String, _ argument: inout [UInt8]) -> Int {
        let bytes = Array(text.utf8) + [0]
        let count = min(bytes.count, argument.count)
        argument.replaceSubrange(0..<count, with: bytes[0..<count])
        return count
    }

    func put32(_ e: inout [UInt8], _ at: Int, _ v: UInt32) {
        for i in 0..<4 { e[at + i] = UInt8((v >> (8 * UInt32(i))) & 0xFF) }
    }
}

/// An errno the node answers with.
package struct HidrawError: Error, Sendable, Equatable {
    package var code: Int32
    package init(_ code: Int32) { self.code = code }
}
