import Testing

@testable import HIDBridge

#if canImport(Glibc)
import Glibc
#endif

/// The private hidraw key's pure parts: what its node answers (as the kernel's hidraw driver does) and the sysfs
/// devices it is made of. The node itself is tested with real clients in tools/interop/test_private_key.py.
@Suite struct PrivateKeyTests {
    let node = HidrawNode(
        info: UHIDDeviceInfo(name: "fidosim virtual FIDO2 key", serial: "SER-1"),
        phys: "usb-0000:00:14.0-1/input0"
    )

    @Test func theDescriptorSizeAndDescriptor() throws {
        var size = [UInt8](repeating: 0xEE, count: 4)
        #expect(node.answer(.getDescriptorSize) == .fill(load: 4))
        #expect(node.fill(.getDescriptorSize, &size) == .success(0))
        #expect(size == [34, 0, 0, 0])
        // The caller's size comes first; the kernel writes min(size, 34) bytes after it and nothing more.
        #expect(node.answer(.getDescriptor) == .fill(load: 4 + 34))
        var full = [UInt8](repeating: 0, count: 38)
        full[0] = 0xFF
        full[1] = 0x0F
        #expect(node.fill(.getDescriptor, &full) == .success(0))
        #expect(Array(full[4...]) == UHIDDeviceInfo.reportDescriptor)
        var short = [UInt8](repeating: 0xEE, count: 38)
        short[0...3] = [5, 0, 0, 0]
        #expect(node.fill(.getDescriptor, &short) == .success(0))
        #expect(Array(short[4..<9]) == Array(UHIDDeviceInfo.reportDescriptor.prefix(5)))
        #expect(short[9...].allSatisfy { $0 == 0xEE })
        var tooBig = [UInt8](repeating: 0, count: 38)
        tooBig[0...3] = [0, 0x10, 0, 0]  // 4096
        #expect(node.fill(.getDescriptor, &tooBig) == .failure(HidrawError(EINVAL)))
    }

    @Test func rawInfoIsUSBWithTheKeysIDs() {
        var info = [UInt8](repeating: 0, count: 8)
        #expect(node.fill(.getInfo, &info) == .success(0))
        #expect(info == [3, 0, 0, 0, 0x09, 0x12, 0xD0, 0xF1])
    }

    @Test(arguments: [4100, 128, 26, 4, 1])
    func stringsAreCutToTheCallersBufferAndNoFurther(length: Int) {
        // python-fido2 asks with a size of 4100 and a buffer of 128: only the string and its zero come back.
        let expected = min(length, "fidosim virtual FIDO2 key".utf8.count + 1)
        #expect(node.answer(.getName(length)) == .fill(load: expected))
        var name = [UInt8](repeating: 0xEE, count: expected)
        #expect(node.fill(.getName(length), &name) == .success(expected))
        #expect(name == Array(Array("fidosim virtual FIDO2 key".utf8 + [0]).prefix(expected)))
        var uniq = [UInt8](repeating: 0xEE, count: 6)
        #expect(node.answer(.getUniq(length)) == .fill(load: min(length, 6)))
        #expect(node.fill(.getUniq(6), &uniq) == .success(6))
        #expect(uniq == Array("SER-1".utf8) + [0])
    }

    @Test func otherIoctlsFailAsHidrawsDo() {
        // A terminal's TCGETS (isatty): not a hidraw ioctl.
        #expect(node.answer(HidrawNode.Request(0x5401)) == .error(EINVAL))
        // Feature reports (get and set) and the input/output report ioctls: the endpoint stalls.
        for number: UInt in [0x06, 0x07, 0x09, 0x0A, 0x0B, 0x0C] {
            let request = HidrawNode.Request(3 << 30 | 65 << 16 | UInt(UInt8(ascii: "H")) << 8 | number)
            #expect(node.answer(request) == .error(EPIPE))
        }
        #expect(
            node.answer(HidrawNode.Request(2 << 30 | 4 << 16 | UInt(UInt8(ascii: "H")) << 8 | 0x30)) == .error(ENOTTY)
        )
        // A known number with the wrong size is not that ioctl.
        #expect(
            node.answer(HidrawNode.Request(2 << 30 | 8 << 16 | UInt(UInt8(ascii: "H")) << 8 | 0x01)) == .error(ENOTTY)
        )
    }

    @Test func writesAndReadsFollowHidraw() {
        let report = [UInt8](repeating: 7, count: 64)
        #expect(HidrawNode.report(fromWrite: [0] + report) == .success(report))
        #expect(HidrawNode.report(fromWrite: [1] + report) == .success([1] + report))
        #expect(HidrawNode.report(fromWrite: []) == .failure(HidrawError(EINVAL)))
        #expect(HidrawNode.report(fromWrite: [UInt8](repeating: 0, count: 16385)) == .failure(HidrawError(EINVAL)))
        #expect(HidrawNode.readResult(report, count: 4096) == report)
        #expect(HidrawNode.readResult(report, count: 10) == Array(report.prefix(10)))
        #expect(HidrawNode.readResult(report, count: 0) == [])
    }

    @Test func theDeviceTreeIsAUSBHIDKeyWithItsLinks() {
        let tree = PrivateDeviceTree(
            index: 1,
            minor: 3,
            sequence: 7,
            info: UHIDDeviceInfo(name: "Key\nP: /devices/evil", serial: "S1"),
            manufacturer: "fidosim"
        )
        #expect(tree.devnode == "/dev/hidraw3")
        let records = tree.records
        #expect(records.count == 4)
        #expect(records[0].hasPrefix("P: /devices/pci0000:00/0000:00:14.0/usb1/1-2\n"))
        #expect(records[0].contains("A: idVendor=1209\n") && records[0].contains("A: serial=S1\n"))
        #expect(records[2].contains("E: HID_ID=0003:00001209:0000F1D0\n"))
        #expect(records[2].contains("H: report_descriptor=06D0F10901A101"))
        #expect(records[3].contains("/0003:1209:F1D0.0007/hidraw/hidraw3\nN: hidraw3\n"))
        #expect(records[3].contains("L: device=../../../0003:1209:F1D0.0007\n"))
        // A name cannot add lines (or devices) to the record.
        #expect(records.allSatisfy { !$0.contains("\nP: /devices/evil") })
        #expect(records[2].contains("E: HID_NAME=KeyP: /devices/evil\n"))
        #expect(tree.syspathsChildrenFirst.first?.hasSuffix("/hidraw/hidraw3") == true)
        #expect(tree.syspathsChildrenFirst.last == "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-2")
    }

    @Test func thePreloadComesFirstOnce() {
        #expect(PrivateTestbed.preloadValue(existing: nil) == "libumockdev-preload.so.0")
        #expect(
            PrivateTestbed.preloadValue(existing: "libfoo.so:libumockdev-preload.so.0 libbar.so")
                == "libumockdev-preload.so.0:libfoo.so:libbar.so"
        )
        #expect(PrivateKeySetup.shellQuoted("/tmp/a'b") == "'/tmp/a'\\''b'")
    }
}
