import CDatagrams
import CTAPCBOR
package import USBIP

#if canImport(Glibc)
import Glibc
#endif

/// The key as a USB device exported over USB/IP (`serve --transport usbip`): a TCP server that Linux's `usbip
/// attach` (vhci-hcd), or usbip-win2 on Windows, imports as a full-speed USB HID device.
///
/// Any number of clients may list the device; one host at a time has it attached. The host detaching it (or its
/// connection dropping) is an unplug: the key power-cycles, and the device is offered again. A power cycle from
/// the control plane detaches the host, as pulling the key out would.
///
/// Its one descriptor is an epoll set of the listening socket and every connection.
package final class USBIPTransport: ReportTransport {
    package let host: String
    package let port: UInt16
    package let device: USBDevice
    let listener: Int32
    let epoll: Int32
    var connections: [Int32: USBIPConnection] = [:]
    /// The connection whose host has the device attached.
    var attachedFD: Int32?
    /// False while the key is unplugged (`powerCycle` with `offMs`): no import.
    var plugged = true
    var pending: [TransportEvent] = []

    /// Listens on `host:port` (IPv4; port 0 picks a free one).
    package init(host: String, port: UInt16, device: USBDevice) throws(TransportError) {
        self.host = host
        self.device = device
        guard let numeric = IPv4.numericHost(host) else {
            throw TransportError("invalid --usbip-host '\(host)': give an IPv4 address such as 127.0.0.1")
        }
        let fd = IPv4.streamSocket()
        guard fd >= 0 else { throw TransportError("cannot create a TCP socket: \(IPv4.errnoText())") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard IPv4.bindTo(fd, IPv4.address(numeric, port: port)), listen(fd, 16) == 0 else {
            let reason = IPv4.errnoText()
            close(fd)
            throw TransportError("cannot listen on tcp \(host):\(port) for USB/IP: \(reason)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        self.port = IPv4.localPort(fd)
        listener = fd
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else {
            close(fd)
            throw TransportError("cannot create an epoll set: \(IPv4.errnoText())")
        }
        watch(fd)
    }

    deinit {
        for fd in connections.keys { close(fd) }
        close(listener)
        close(epoll)
    }

    package var descriptor: Int32 { epoll }

    package var summary: String { "usbip \(host):\(port) (bus id \(device.busID), serial \(device.serial))" }

    /// Whether a host has the device attached.
    package var attached: Bool { attachedFD != nil }

    func watch(_ fd: Int32) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = fd
        epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
    }

    package func receive() -> TransportEvent? {
        if pending.isEmpty { service() }
        return pending.isEmpty ? nil : pending.removeFirst()
    }

    package func receiveAll() -> [TransportEvent] {
        service()
        defer { pending.removeAll() }
        return pending
    }

    /// Accepts connections and reads what the clients sent.
    func service() {
        var events = [epoll_event](repeating: epoll_event(), count: 16)
        let count = epoll_wait(epoll, &events, Int32(events.count), 0)
        guard count > 0 else { return }
        for event in events.prefix(Int(count)) {
            let fd = event.data.fd
            if fd == listener {
                acceptAll()
            } else {
                read(fd)
            }
        }
    }

    func acceptAll() {
        while true {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            connections[fd] = USBIPConnection(device: device)
            watch(fd)
        }
    }

    func read(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return }
        guard count > 0, var connection = connections[fd] else {
            drop(fd, why: nil)
            return
        }
        let actions = connection.receive(Array(buffer[..<count]), importable: plugged && attachedFD == nil)
        connections[fd] = connection
        perform(actions, on: fd)
    }

    func perform(_ actions: [USBIPAction], on fd: Int32) {
        for action in actions {
            switch action {
            case .send(let bytes):
                guard write(bytes, to: fd) else {
                    drop(fd, why: "the client stopped reading")
                    return
                }
            case .report(let report):
                pending.append(.report(report))
            case .attached:
                attachedFD = fd
                pending.append(.note("usbip: a host attached the key"))
            case .close(let why):
                drop(fd, why: why)
                return
            }
        }
    }

    /// Writes all of `bytes`, waiting up to a second for room.
    func write(_ bytes: [UInt8], to fd: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                offset += sent
                continue
            }
            guard sent < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else { return false }
            var waiting = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            guard poll(&waiting, 1, 1000) > 0 else { return false }
        }
        return true
    }

    /// Closes a connection; the attached host going away is an unplug (a power cycle of the key) unless the key
    /// itself detached it.
    func drop(_ fd: Int32, why: String?, byKey: Bool = false) {
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
        close(fd)
        connections[fd] = nil
        if let why, fd != attachedFD || byKey { pending.append(.note("usbip: \(why)")) }
        if fd == attachedFD {
            attachedFD = nil
            if !byKey {
                pending.append(.note("usbip: the host detached the key\(why.map { " (\($0))" } ?? "")"))
                pending.append(.detached)
            }
        }
    }

    package func send(_ report: [UInt8]) {
        guard let fd = attachedFD, var connection = connections[fd] else { return }
        let actions = connection.deliver(report: report)
        connections[fd] = connection
        perform(actions, on: fd)
    }

    /// Detaches the host, as pulling the key out would; the device is offered again at once.
    package func replug() throws(TransportError) {
        if let fd = attachedFD { drop(fd, why: "power cycle: the key left its host", byKey: true) }
        plugged = true
    }

    package func unplug() throws(TransportError) {
        if let fd = attachedFD { drop(fd, why: "unplugged: the key left its host", byKey: true) }
        plugged = false
    }

    package func plug() throws(TransportError) {
        plugged = true
    }

}
