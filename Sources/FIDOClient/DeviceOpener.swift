package import HIDAPIDevice

extension CTAPHIDClient {
    /// Opens the key at `address` each time it is called, with a new client. After a replug the kernel may give the
    /// key another hidraw node: from the second time on it is found by the serial number it had the first time.
    package static func opener(_ address: DeviceAddress, backend: HIDBackend) -> () throws -> CTAPHIDClient {
        let serial = HIDSerialMemo()
        let shared = SharedChannel()
        return {
            switch address {
            case .pcsc:
                throw ClientError.transport("\(address) is a card, not a HID key")
            case .udp(let host, let port, let replyPort?):
                // One socket can hold the reply port: every opening shares it (a new INIT makes a new channel).
                if let channel = shared.value { return CTAPHIDClient(channel: channel) }
                let channel = try UDPReportChannel(host: host, port: port, replyPort: replyPort)
                shared.value = channel
                return CTAPHIDClient(channel: channel)
            case .udp(let host, let port, nil):
                return CTAPHIDClient(channel: try UDPReportChannel(host: host, port: port))
            case .hidPath, .hidAuto, .hidID:
                let devices = try HIDAPIReportChannel.devices(backend: backend, fidoOnly: false)
                guard let path = address.hidDevicePath(among: devices, knownSerial: serial.value) else {
                    if let known = serial.value {
                        throw ClientError.transport("\(address): the key with serial number \(known) is not connected")
                    }
                    throw ClientError.transport(
                        "\(address): no such HID device (fidosim conform --list-devices shows them)"
                    )
                }
                if serial.value == nil, let info = devices.first(where: { $0.path == path }), !info.serial.isEmpty {
                    serial.value = info.serial
                }
                return CTAPHIDClient(channel: try HIDAPIReportChannel(path: path, backend: backend))
            }
        }
    }
}

extension KeyLink {
    /// Opens the key at `address` each time it is called: a HID key as ``CTAPHIDClient/opener(_:backend:)`` does,
    /// a card by connecting to it in its reader.
    package static func opener(_ address: DeviceAddress, backend: HIDBackend) -> () throws -> KeyLink {
        if case .pcsc(let reader) = address {
            return { .card(try PCSCCard(readerMatch: reader)) }
        }
        let hid = CTAPHIDClient.opener(address, backend: backend)
        return { .hid(try hid()) }
    }
}

/// The serial number of the HID key first opened.
final class HIDSerialMemo {
    var value: String?
}

/// The socket every opening of a key on a fixed reply port shares.
final class SharedChannel {
    var value: UDPReportChannel?
}
