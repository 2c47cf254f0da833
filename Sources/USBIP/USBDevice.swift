/// The USB device a USB/IP server exports: a full-speed HID device with one configuration, one interface (the FIDO
/// report descriptor) and interrupt IN and OUT endpoints of 64 bytes, as FIDO keys are.
package struct USBDevice: Sendable, Equatable {
    package var vendorID: UInt16
    package var productID: UInt16
    /// bcdDevice, the device's release number.
    package var release: UInt16 = 0x0100
    package var manufacturer: String
    package var product: String
    package var serial: String
    package var reportDescriptor: [UInt8]
    /// The bus id USB/IP lists and imports (`usbip attach -b BUSID`).
    package var busID = "1-1"
    package var busNumber: UInt32 = 1
    package var deviceNumber: UInt32 = 2
    /// The interrupt endpoints' polling interval, in frames (milliseconds at full speed).
    package var interval: UInt8 = 5

    package init(
        vendorID: UInt16,
        productID: UInt16,
        manufacturer: String,
        product: String,
        serial: String,
        reportDescriptor: [UInt8]
    ) {
        self.vendorID = vendorID
        self.productID = productID
        self.manufacturer = manufacturer
        self.product = product
        self.serial = serial
        self.reportDescriptor = reportDescriptor
    }

    /// USB/IP's device id: the bus number above the device number.
    package var deviceID: UInt32 { busNumber << 16 | deviceNumber }

    /// USB speeds as USB/IP numbers them (the kernel's `enum usb_device_speed`): 2 is full speed.
    static let fullSpeed: UInt32 = 2
    /// The interrupt endpoints' size.
    package static let reportSize = 64
    static let endpointIn: UInt8 = 0x81
    static let endpointOut: UInt8 = 0x01

    /// The device descriptor (USB 2.0 §9.6.1): USB 2.0, class at the interface, 64-byte endpoint 0, strings 1–3.
    package var deviceDescriptor: [UInt8] {
        var descriptor: [UInt8] = [18, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 64]
        descriptor += le(vendorID)
        descriptor += le(productID)
        descriptor += le(release)
        return descriptor + [1, 2, 3, 1]
    }

    /// The HID class descriptor (HID 1.11 §6.2.1): one report descriptor.
    var hidDescriptor: [UInt8] {
        let header: [UInt8] = [9, 0x21, 0x11, 0x01, 0x00, 1, 0x22]
        return header + le(UInt16(reportDescriptor.count))
    }

    /// The configuration descriptor with its interface, HID and endpoint descriptors (USB 2.0 §9.6.3–6).
    package var configurationDescriptor: [UInt8] {
        let interface: [UInt8] = [9, 0x04, 0, 0, 2, 0x03, 0x00, 0x00, 0]
        var body = interface + hidDescriptor
        for address in [Self.endpointIn, Self.endpointOut] {
            body += [7, 0x05, address, 0x03]
            body += le(UInt16(Self.reportSize))
            body.append(interval)
        }
        // Bus powered, 100 mA.
        var descriptor: [UInt8] = [9, 0x02]
        descriptor += le(UInt16(9 + body.count))
        descriptor += [1, 1, 0, 0x80, 50]
        return descriptor + body
    }

    /// String descriptor `index`: 0 is the language list (US English), 1–3 manufacturer, product, serial.
    package func stringDescriptor(_ index: UInt8) -> [UInt8]? {
        let text: String
        switch index {
        case 0: return [4, 0x03, 0x09, 0x04]
        case 1: text = manufacturer
        case 2: text = product
        case 3: text = serial
        default: return nil
        }
        let units = Array(text.utf16.prefix(126))
        return [UInt8(2 + 2 * units.count), 0x03] + units.flatMap { le($0) }
    }

    /// The device as OP_REP_DEVLIST and OP_REP_IMPORT describe it (0x138 bytes): path, bus id, numbers, speed,
    /// ids, class, configuration, counts.
    func summary(configuration: UInt8) -> [UInt8] {
        var out = fixed("/sys/devices/fidosim/usb1/\(busID)", 256)
        out += fixed(busID, 32)
        out += be(busNumber)
        out += be(deviceNumber)
        out += be(Self.fullSpeed)
        out += be16(vendorID)
        out += be16(productID)
        out += be16(release)
        return out + [0x00, 0x00, 0x00, configuration, 1, 1]
    }

    /// The interfaces OP_REP_DEVLIST appends: HID, no subclass, no protocol, padding.
    var interfaces: [UInt8] { [0x03, 0x00, 0x00, 0x00] }
}

func le(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
func be16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
func be(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
}

/// `text` in UTF-8, cut or padded with zero bytes to `count` bytes, the last always zero.
func fixed(_ text: String, _ count: Int) -> [UInt8] {
    let bytes = Array(text.utf8.prefix(count - 1))
    return bytes + Array(repeating: 0, count: count - bytes.count)
}
