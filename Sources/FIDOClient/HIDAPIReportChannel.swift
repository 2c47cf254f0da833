import HIDAPIDevice

/// CTAPHID reports through a HID device opened with hidapi (``HIDDevice``), its errors as ``ClientError``.
public final class HIDAPIReportChannel: ReportChannel {
    public let device: HIDDevice
    public var name: String { device.name }
    public var path: String { device.path }
    /// Reads that returned no bytes (timeouts and zero-length reports).
    public var zeroLengthReads: Int { device.zeroLengthReads }

    public init(device: HIDDevice) {
        self.device = device
    }

    /// Every HID device the backend lists; `fidoOnly` keeps those on the FIDO usage page.
    public static func devices(
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

    public convenience init(path: String, backend: HIDBackend = .hidraw) throws(ClientError) {
        do {
            self.init(device: try HIDDevice(path: path, backend: backend))
        } catch {
            throw .transport(error.message)
        }
    }

    /// Opens the first FIDO device hidapi lists.
    public convenience init(auto backend: HIDBackend = .hidraw) throws(ClientError) {
        do {
            self.init(device: try HIDDevice(auto: backend))
        } catch {
            throw .transport(error.message)
        }
    }

    public func send(_ report: [UInt8]) throws(ClientError) {
        do {
            try device.send(report)
        } catch {
            throw .transport(error.message)
        }
    }

    public func receive(timeoutMs: Int) throws(ClientError) -> [UInt8]? {
        do {
            return try device.receive(timeoutMs: timeoutMs)
        } catch {
            throw .transport(error.message)
        }
    }
}
