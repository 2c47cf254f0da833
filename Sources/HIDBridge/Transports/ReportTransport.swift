package import VirtualKey

/// A device-side transport of 64-byte HID reports, polled by ``DeviceRunner``.
package protocol ReportTransport: AnyObject {
    /// The file descriptor to poll for input.
    var descriptor: Int32 { get }
    /// Where the key can be reached, for the start-up line and `status`.
    var summary: String { get }
    /// Reads what is waiting, without blocking; nil when nothing is.
    func receive() -> TransportEvent?
    /// Reads everything that is waiting, without blocking (a transport that can reads it in one system call).
    func receiveAll() -> [TransportEvent]
    /// Sends one 64-byte report to the host.
    func send(_ report: [UInt8])
    /// Sends the reports of one answer, in order (a transport that can hands them over in one system call).
    func send(batch reports: [[UInt8]])
    /// Sends the reports of one answer to one of the hosts the key is plugged into (``JoinedTransport``); a
    /// transport with one host sends them to it.
    func send(batch reports: [[UInt8]], host: Int)
    /// Unplugs and re-plugs the device, for a power cycle (a no-op where there is nothing to unplug).
    func replug() throws(TransportError)
    /// Unplugs the device until ``plug()`` (a no-op where there is nothing to unplug).
    func unplug() throws(TransportError)
    /// Plugs an unplugged device back in.
    func plug() throws(TransportError)
    /// Unplugs the device for good, and gives back what outlives the transport object (a key removed at run time):
    /// by default ``unplug()``.
    func retire() throws(TransportError)
}

extension ReportTransport {
    package func receiveAll() -> [TransportEvent] {
        var events: [TransportEvent] = []
        while let event = receive() { events.append(event) }
        return events
    }

    package func send(batch reports: [[UInt8]]) {
        for report in reports { send(report) }
    }

    package func send(batch reports: [[UInt8]], host: Int) { send(batch: reports) }

    package func retire() throws(TransportError) { try unplug() }

    package func unplug() throws(TransportError) {}
    package func plug() throws(TransportError) { try replug() }
}

/// The HID side of a key that has none (`--transport pcsc` alone): nothing to poll, nothing to send.
package final class NoReportTransport: ReportTransport {
    package init() {}
    package var descriptor: Int32 { -1 }
    package var summary: String { "" }
    package func receive() -> TransportEvent? { nil }
    package func send(_ report: [UInt8]) {}
    package func replug() throws(TransportError) {}
}
