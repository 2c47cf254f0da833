/// The sysfs devices that make one private key a USB HID key with a hidraw node, as the kernel lays them out: the
/// USB device, its HID interface, the HID device (its uevent properties and `report_descriptor` file) and the hidraw
/// class device with its `device` link back to the HID device. Written in umockdev-record's text format, parents
/// first (firmware-spec/private-key.md, "The device").
package struct PrivateDeviceTree: Sendable, Equatable {
    /// The key's number in this run (0 for the first): its USB port.
    package var index: Int
    /// The hidraw minor of this plug-in (`hidrawM`) and the HID device's sequence number: as on a kernel, each
    /// plug-in takes new ones (the first plug-in of key N has minor N and sequence N + 1).
    package var minor: Int
    package var sequence: Int
    package var info: UHIDDeviceInfo
    package var manufacturer: String

    /// hidraw's dynamic character major on a typical kernel; the node only needs to be a character device.
    static let hidrawMajor = 240

    package init(index: Int, minor: Int? = nil, sequence: Int? = nil, info: UHIDDeviceInfo, manufacturer: String) {
        self.index = index
        self.minor = minor ?? index
        self.sequence = sequence ?? index + 1
        self.info = info
        self.manufacturer = manufacturer
    }

    /// `hidrawM`.
    package var nodeName: String { "hidraw\(minor)" }
    /// `/dev/hidrawN`, as the clients in the tree see it.
    package var devnode: String { "/dev/\(nodeName)" }
    /// The USB port path (`1-N`): one port per key on bus 1.
    var port: String { "1-\(index + 1)" }
    var usbPath: String { "/devices/pci0000:00/0000:00:14.0/usb1/\(port)" }
    var interfacePath: String { "\(usbPath)/\(port):1.0" }
    /// `0003:VVVV:PPPP.NNNN`, the kernel's name for a HID device.
    var hidName: String {
        "0003:\(hex(info.vendorID, 4)):\(hex(info.productID, 4)).\(hex(UInt32(sequence), 4))"
    }
    var hidPath: String { "\(interfacePath)/\(hidName)" }
    var hidrawPath: String { "\(hidPath)/hidraw/\(nodeName)" }
    /// The physical path hidraw reports (`HIDIOCGRAWPHYS`, `HID_PHYS`).
    package var phys: String { "usb-0000:00:14.0-\(index + 1)/input0" }

    /// The sysfs paths, children first: the order a removal goes in.
    package var syspathsChildrenFirst: [String] { [hidrawPath, hidPath, interfacePath, usbPath].map { "/sys" + $0 } }

    /// The four devices in umockdev-record's format, parents first: the order they are added in.
    package var records: [String] {
        let vid = hex(info.vendorID, 4).lowercased()
        let pid = hex(info.productID, 4).lowercased()
        let version = hex(info.version, 4).lowercased()
        let usb = [
            "P: \(usbPath)",
            "E: SUBSYSTEM=usb",
            "E: DEVTYPE=usb_device",
            "E: PRODUCT=\(String(info.vendorID, radix: 16))/\(String(info.productID, radix: 16))/"
                + String(info.version, radix: 16),
            "E: BUSNUM=001",
            "E: DEVNUM=\(pad(sequence + 1, 3))",
            "A: idVendor=\(vid)",
            "A: idProduct=\(pid)",
            "A: bcdDevice=\(version)",
            "A: manufacturer=\(clean(manufacturer))",
            "A: product=\(clean(info.name))",
            "A: serial=\(clean(info.serial))",
            "A: busnum=1",
            "A: devnum=\(sequence + 1)",
            "A: speed=12",
            "A: bDeviceClass=00",
            "A: bNumInterfaces= 1",
            "A: bConfigurationValue=1",
        ]
        let interface = [
            "P: \(interfacePath)",
            "E: SUBSYSTEM=usb",
            "E: DEVTYPE=usb_interface",
            "E: DRIVER=usbhid",
            "E: INTERFACE=3/0/0",
            "A: bInterfaceClass=03",
            "A: bInterfaceSubClass=00",
            "A: bInterfaceProtocol=00",
            "A: bInterfaceNumber=00",
            "A: bNumEndpoints=02",
        ]
        let hid = [
            "P: \(hidPath)",
            "E: SUBSYSTEM=hid",
            "E: DRIVER=hid-generic",
            "E: HID_ID=0003:0000\(hex(info.vendorID, 4)):0000\(hex(info.productID, 4))",
            "E: HID_NAME=\(clean(info.name))",
            "E: HID_PHYS=\(phys)",
            "E: HID_UNIQ=\(clean(info.serial))",
            "E: MODALIAS=hid:b0003g0001v0000\(hex(info.vendorID, 4))p0000\(hex(info.productID, 4))",
            "H: report_descriptor=" + UHIDDeviceInfo.reportDescriptor.map { hex(UInt32($0), 2) }.joined(),
        ]
        let hidraw = [
            "P: \(hidrawPath)",
            "N: \(nodeName)",
            "E: DEVNAME=\(devnode)",
            "E: SUBSYSTEM=hidraw",
            "E: MAJOR=\(Self.hidrawMajor)",
            "E: MINOR=\(minor)",
            "A: dev=\(Self.hidrawMajor):\(minor)",
            // The kernel's link from the class device to its parent: hidapi reads the report descriptor through it.
            "L: device=../../../\(hidName)",
        ]
        return [usb, interface, hid, hidraw].map { $0.joined(separator: "\n") + "\n" }
    }

    /// A value as it may stand in one line of the record: no line breaks, no control characters.
    func clean(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }))
    }

    func hex(_ value: UInt32, _ digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }

    func pad(_ value: Int, _ digits: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
