import CDatagrams
import CTAPCBOR
package import USBIP
package import VirtualKey

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
/// Who may connect is ``PeerAccess``'s rule, asked once per connection, before any of its bytes is read, with the
/// owner of the peer's socket as the kernel gives it for this one connection while it is established (no other
/// socket can have that address pair while the connection lasts; ``KernelSockets``). Connections are
/// bounded (``maxConnections``; one idle for ``idleLimit`` gives its place to a new one), as are the transfers a host
/// leaves waiting (``USBIPConnection/maxWaiting``) and the bytes queued for a host that does not read
/// (``maxOutbox``): a host past a bound is dropped, never waited for, so no host can stall the loop that serves the
/// key's other transports.
///
/// Its one descriptor is an epoll set of the listening socket and every connection.
package final class USBIPTransport: ReportTransport {
    package let host: String
    package let port: UInt16
    package let device: USBDevice
    package let access: PeerAccess
    let listener: Int32
    let epoll: Int32
    var connections: [Int32: USBIPConnection] = [:]
    /// Bytes not yet taken by each connection's socket, and when each connection last sent something.
    var outboxes: [Int32: [UInt8]] = [:]
    var lastActivity: [Int32: ContinuousClock.Instant] = [:]
    /// A descriptor kept in reserve, closed to take and refuse a connection when the process has none left.
    var spare: Int32 = -1
    var refusalNotes = RefusalNotes()
    let clock = ContinuousClock()
    let started = ContinuousClock.now

    /// Connections at once (listing hosts and the attached one).
    package static let maxConnections = 8
    /// A connection silent this long gives its place when every place is taken.
    package static let idleLimit: Duration = .seconds(10)
    /// Bytes queued for a host that does not read (a CTAP answer of 7,609 bytes is about 14 KiB of URB replies).
    package static let maxOutbox = 256 * 1024
    /// The connection whose host has the device attached.
    var attachedFD: Int32?
    /// False while the key is unplugged (`powerCycle` with `offMs`): no import.
    var plugged = true
    var pending: [TransportEvent] = []

    /// Listens on `host:port` (IPv4; port 0 picks a free one).
    package init(host: String, port: UInt16, device: USBDevice, access: PeerAccess) throws(TransportError) {
        self.host = host
        self.device = device
        self.access = access
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
        spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    deinit {
        for fd in connections.keys { close(fd) }
        close(listener)
        close(epoll)
        if spare >= 0 { close(spare) }
    }

    package var descriptor: Int32 { epoll }

    package var summary: String { "usbip \(host):\(port) (bus id \(device.busID), serial \(device.serial))" }

    /// Whether a host has the device attached.
    package var attached: Bool { attachedFD != nil }

    func watch(_ fd: Int32, writable: Bool = false, change: Bool = false) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | (writable ? EPOLLOUT.rawValue : 0)
        event.data.fd = fd
        epoll_ctl(epoll, change ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event)
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
                if event.events & EPOLLOUT.rawValue != 0, connections[fd] != nil { flush(fd) }
                if event.events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0,
                    connections[fd] != nil
                {
                    read(fd)
                }
            }
        }
    }

    var now: Duration { clock.now - started }

    func acceptAll() {
        while true {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else {
                guard errno == EMFILE || errno == ENFILE, spare >= 0 else { return }
                // No descriptor left: the spare one makes room to take the connection and close it, so that the
                // listener does not stay readable and wake the loop for nothing.
                close(spare)
                let waiting = accept(listener, nil, nil)
                if waiting >= 0 { close(waiting) }
                spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
                if waiting < 0 || spare < 0 { return }
                refuse(peer: "a host", why: "the key has no file descriptors left")
                continue
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            let peer = IPv4.peerEndpoint(fd)
            let name = peer.map { "\($0)" } ?? "a host"
            // The cheap refusal first: a flood of connections costs no lookup once every place is taken.
            if connections.count >= Self.maxConnections {
                let idle = connections.keys.filter { $0 != attachedFD }.min {
                    lastActivity[$0, default: .now] < lastActivity[$1, default: .now]
                }
                guard let idle, clock.now - lastActivity[idle, default: clock.now] >= Self.idleLimit else {
                    close(fd)
                    refuse(peer: name, why: "too many connections (at most \(Self.maxConnections))")
                    continue
                }
                if let why = refusal(fd) {
                    close(fd)
                    refuse(peer: name, why: why)
                    continue
                }
                drop(idle, why: "closed: idle while another host needed the place")
            } else if let why = refusal(fd) {
                close(fd)
                refuse(peer: name, why: why)
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            connections[fd] = USBIPConnection(device: device)
            lastActivity[fd] = clock.now
            watch(fd)
        }
    }

    /// Why the peer of a new connection may not use the key (``PeerAccess``), if it may not: the kernel is asked
    /// about this one connection (``KernelSockets``).
    func refusal(_ fd: Int32) -> String? {
        StreamPeer.judge(fd, access: access, door: .transport, kernel: kernelSockets).refusal
    }

    /// Logs a refusal (at most one line a second).
    func refuse(peer: String, why: String) {
        if let line = refusalNotes.line(PeerAccess.note(door: "usbip", peer: peer, refusal: why), now: now) {
            pending.append(.note(line))
        }
    }

    /// The netlink socket the peers are asked about, opened once (a flood of connections may leave no descriptor).
    lazy var kernelSockets = KernelSockets()

    func read(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return }
        guard count > 0, var connection = connections[fd] else {
            drop(fd, why: nil)
            return
        }
        lastActivity[fd] = clock.now
        let actions = connection.receive(Array(buffer[..<count]), importable: plugged && attachedFD == nil)
        connections[fd] = connection
        perform(actions, on: fd)
    }

    func perform(_ actions: [USBIPAction], on fd: Int32) {
        for action in actions {
            switch action {
            case .send(let bytes):
                guard write(bytes, to: fd) else {
                    drop(fd, why: "the host does not read (more than \(Self.maxOutbox) bytes waiting for it)")
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

    /// Sends `bytes` after what is queued, without waiting: what the socket does not take now is queued, and sent
    /// when it becomes writable. False when the queue would pass ``maxOutbox`` or the connection failed.
    func write(_ bytes: [UInt8], to fd: Int32) -> Bool {
        if outboxes[fd]?.isEmpty == false {
            outboxes[fd]! += bytes
            return outboxes[fd]!.count <= Self.maxOutbox
        }
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if sent > 0 {
                offset += sent
                continue
            }
            if sent < 0 && errno == EINTR { continue }
            guard sent < 0, errno == EAGAIN || errno == EWOULDBLOCK else { return false }
            outboxes[fd] = Array(bytes[offset...])
            watch(fd, writable: true, change: true)
            return bytes.count - offset <= Self.maxOutbox
        }
        return true
    }

    /// Sends what is queued for a connection that became writable.
    func flush(_ fd: Int32) {
        guard let queued = outboxes[fd], !queued.isEmpty else { return }
        outboxes[fd] = []
        watch(fd, writable: false, change: true)
        if !write(queued, to: fd) { drop(fd, why: "the host stopped reading") }
    }

    /// Closes a connection; the attached host going away is an unplug (a power cycle of the key) unless the key
    /// itself detached it.
    func drop(_ fd: Int32, why: String?, byKey: Bool = false) {
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nil)
        close(fd)
        connections[fd] = nil
        outboxes[fd] = nil
        lastActivity[fd] = nil
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
