import Dispatch
package import HIDAPIDevice
import Synchronization
import SystemPackage
package import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// A HID device opened through hidapi, shared by the reader thread (which reads) and the run loop (which writes).
/// hidapi allows one thread to read while another writes to the same device, in both its backends.
final class SharedHIDChannel: @unchecked Sendable {
    let channel: HIDDevice
    let stopped = Atomic<Bool>(false)

    init(_ channel: HIDDevice) { self.channel = channel }
}

/// The key served through a real HID device opened with hidapi: a bridge board that relays 64-byte reports between
/// fidosim and the machine it is plugged into (where it is the security key). Reports the board delivers are the
/// host's output reports; what fidosim writes goes back to the host as input reports.
package final class HIDAPITransport: ReportTransport {
    let shared: SharedHIDChannel
    let queue: UHIDEventQueue
    package let summary: String

    /// Opens the board by `VID:PID` (hexadecimal) or by a hidapi path (`/dev/hidrawN`).
    package init(device: String, backend: HIDBackend = .hidraw) throws(TransportError) {
        let channel: HIDDevice
        do {
            if let (vendor, product) = Self.parseVIDPID(device) {
                channel = try HIDDevice(vendorID: vendor, productID: product, backend: backend)
            } else {
                channel = try HIDDevice(path: device, backend: backend)
            }
        } catch {
            throw TransportError("--device \(device): \(error.description)")
        }
        shared = SharedHIDChannel(channel)
        queue = try UHIDEventQueue()
        summary = "hid \(channel.path) (\(backend.rawValue) backend, device \(device))"
        let shared = self.shared
        let queue = self.queue
        DispatchQueue(label: "fidosim.hidapi.reader").async { Self.readForever(shared, queue) }
    }

    deinit { shared.stopped.store(true, ordering: .relaxed) }

    /// `VID:PID` in hexadecimal (`1209:0001`), or nil for anything else.
    package static func parseVIDPID(_ text: String) -> (UInt16, UInt16)? {
        DeviceAddress.parseVIDPID(text)
    }

    static func readForever(_ shared: SharedHIDChannel, _ queue: UHIDEventQueue) {
        while !shared.stopped.load(ordering: .relaxed) {
            do {
                guard let report = try shared.channel.receive(timeoutMs: 200) else { continue }
                queue.push(report)
            } catch {
                queue.push([])  // an empty event: the device is gone
                return
            }
        }
    }

    package var descriptor: Int32 { queue.wakeRead.rawValue }

    package func receive() -> TransportEvent? {
        guard let report = queue.next() else { return nil }
        if report.isEmpty { return .note("hid: the device stopped answering (unplugged?)") }
        return .report(report)
    }

    package func send(_ report: [UInt8]) {
        try? shared.channel.send(report)
    }

    /// A bridge board stays plugged in: a power cycle restarts the firmware only.
    package func replug() throws(TransportError) {}
}
