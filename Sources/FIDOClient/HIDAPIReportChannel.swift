package import HIDAPIDevice

/// CTAPHID reports through a HID device opened with hidapi (``HIDDevice``), its errors as ``ClientError``.
package final class HIDAPIReportChannel: ReportChannel {
    package let device: HIDDevice
    package var name: String { device.name }
    package var path: String { device.path }
    /// Reads that returned no bytes (timeouts and zero-length reports).
    package var zeroLengthReads: Int { device.zeroLengthReads }

    package init(device: HIDDevice) {
        self.device = device
    }

    /// Every HID device the backend lists; `fidoOnly` keeps those on the FIDO usage page.
    package static func devices(
        backend: HIDBackend = .hidraw,
        fidoOnly: Bool = true
    ) throws(ClientError)
        -> [HIDDeviceInfo]
    {
        do {
            return try HIDDevice.devices(backend: backend, fidoOnly: fidoOnly)
        } catch {
            throw .transport(error.message)
        }
    }

    package convenience init(path: String, backend: HIDBackend = .hidraw) throws(ClientError) {
        do {
            self.init(device: try HIDDevice(path: path, backend: backend))
        } catch {
            throw .transport(error.message)
        }
    }

    /// Opens the first FIDO device hidapi lists.
    package convenience init(auto backend: HIDBackend = .hidraw) throws(ClientError) {
        do {
            self.init(device: try HIDDevice(auto: backend))
        } catch {
            throw .transport(error.message)
        }
    }

    package func send(_ report: [UInt8]) throws(ClientError) {
        do {
            try device.send(report)
        } catch {
            throw .transport(error.message)
        }
    }

    package func receive(timeoutMs: Int) throws(ClientError) -> [UInt8]? {
        do {
            return try device.receive(timeoutMs: timeoutMs)
        } catch {
            throw .transport(error.message)
        }
    }
}
