import ControlProtocol
import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// Why a control socket could not be opened.
package struct ControlSocketError: Error, CustomStringConvertible, Sendable {
    package var description: String

    init(_ description: String) { self.description = description }

    static func errno(_ what: String) -> ControlSocketError {
        ControlSocketError("\(what): \(String(cString: strerror(Glibc.errno)))")
    }
}

/// The Unix socket of the control plane: newline-delimited JSON requests in, responses and events out.
///
/// The socket is created with mode 0600 (in a directory of mode 0700 when it creates the directory), and a peer
/// whose uid is not the server's, or whose uid cannot be read, is answered `permission-denied` and disconnected.
/// Everything is non-blocking and driven by the I/O loop's `poll`. What a flood of clients can cost is bounded: at
/// most ``maxClients`` connections (the one idle longest makes room when it has been idle a minute, otherwise the
/// newcomer is refused), at most ``maxPendingOutput`` bytes queued for a client, and a subscriber more than
/// ``maxPendingEvents`` bytes behind on its events is dropped (the others get a `clientDropped` event).
package final class ControlServer {
    package static let maxPendingOutput = 16 << 20
    package static let maxPendingEvents = 64 << 10
    /// At most 64 clients, and never so many that they would take the descriptors the key needs (a process with
    /// few descriptors, `ulimit -n`, admits fewer).
    package static let maxClients: Int = {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < 1 << 20 else { return 64 }
        return max(1, min(64, (Int(limit.rlim_cur) - 32) / 2))
    }()
    /// How long a client must have been idle to make room for a new one when every place is taken.
    package static let idleLimit: Duration = .seconds(60)
    /// Refused connections whose refusal is still being read, at most this many (the rest are closed at once).
    static let maxRefused = 64

    struct Client {
        var fd: Int32
        var input = ControlLineBuffer()
        var output: [UInt8] = []
        /// How much of `output` has been sent.
        var sent = 0
        var subscribed = false
        /// Close once the output is written (after a refusal).
        var closeAfterWrite = false
        var lastActivity: Duration
        var pending: Int { output.count - sent }
    }

    package let path: String
    let listener: Int32
    var clients: [Client] = []
    let clock = ContinuousClock()
    let start: ContinuousClock.Instant
    var now: Duration { clock.now - start + skipped }
    /// Time the tests let pass without waiting for it.
    var skipped: Duration = .zero
    /// While accept has no descriptors left (EMFILE), the listener is not polled until then, so the loop does not
    /// spin on a connection it cannot take.
    var acceptPausedUntil: Duration?
    /// A descriptor kept in reserve: when the process has none left, it is given up for a moment to accept the
    /// waiting connection, tell it why it is refused, and close it.
    var spare: Int32 = ControlServer.reserveDescriptor()

    /// The reserve: an unbound socket, not /dev/null: under umockdev's preload library (the private key) every
    /// descriptor opened on a /dev path takes one of its 50 places for as long as it is open, so a key per /dev/null
    /// would cap the keys one process serves.
    static func reserveDescriptor() -> Int32 {
        socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    }

    /// Creates the socket at `path`, creating its directory (0700) when missing. A stale socket left by a
    /// process that ended is replaced; one that still answers is not.
    package init(path: String) throws(ControlSocketError) {
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw ControlSocketError(
                "the control socket path \(path) is longer than 107 bytes; choose a shorter --control"
            )
        }
        self.path = path
        start = clock.now
        let directory = String(
            path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropLast()
                .map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
        )
        if !directory.isEmpty { try Self.makePrivateDirectory(directory) }
        try Self.removeStaleSocket(path)
        let fd = socket(
            AF_UNIX,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
            0
        )
        guard fd >= 0 else { throw .errno("socket") }
        // The socket file is created 0600 from the start (no window in which others could connect).
        let oldMask = umask(0o177)
        let bound = Self.withAddress(path) { bind(fd, $0, $1) }
        umask(oldMask)
        guard bound == 0 else {
            let error = ControlSocketError.errno("cannot bind the control socket \(path)")
            close(fd)
            throw error
        }
        guard chmod(path, 0o600) == 0, listen(fd, 16) == 0 else {
            let error = ControlSocketError.errno("cannot listen on \(path)")
            close(fd)
            unlink(path)
            throw error
        }
        listener = fd
    }

    deinit {
        if spare >= 0 { close(spare) }
        for client in clients { close(client.fd) }
        close(listener)
        unlink(path)
    }

    static func withAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() where i < raw.count - 1 { raw[i] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// Creates the missing parts of `directory` (absolute, or relative to the current directory) with mode 0700.
    /// A directory that exists is left as it is: the socket itself is 0600 and every peer's uid is checked, and
    /// changing the mode of a directory others share (`/tmp`) would break them.
    static func makePrivateDirectory(_ directory: String) throws(ControlSocketError) {
        var current = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0 && Glibc.errno != EEXIST { throw .errno("cannot create \(current)") }
        }
    }

    static func removeStaleSocket(_ path: String) throws(ControlSocketError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw ControlSocketError("\(path) exists and is not a socket; remove it or choose another --control")
        }
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { throw .errno("socket") }
        defer { close(probe) }
        if withAddress(path, { connect(probe, $0, $1) }) == 0 {
            throw ControlSocketError("another fidosim answers on \(path); give this key another --name or --control")
        }
        unlink(path)
    }

    /// The descriptors to poll: the listener, then each client (write interest while output is pending).
    /// Drops disconnected clients first.
    func pollDescriptors() -> [pollfd] {
        clients.removeAll { $0.fd < 0 }
        if let until = acceptPausedUntil, now >= until { acceptPausedUntil = nil }
        return [pollfd(fd: listener, events: acceptPausedUntil == nil ? Int16(POLLIN) : 0, revents: 0)]
            + clients.map {
                pollfd(fd: $0.fd, events: Int16(POLLIN) | ($0.pending == 0 ? 0 : Int16(POLLOUT)), revents: 0)
            }
    }

    /// Milliseconds until the listener is polled again after running out of descriptors.
    func timeout(cap: Int32) -> Int32 {
        guard let until = acceptPausedUntil else { return cap }
        return Int32(min(Int64(cap), max(0, (until - now).wholeMilliseconds + 1)))
    }

    /// Accepts, reads and writes after a `poll` of ``pollDescriptors``; each complete request goes to `handle`,
    /// whose response line is queued for that client. `handle` gets the command and whether the client is
    /// subscribed, and returns the result and the new subscription state.
    func service(
        _ fds: ArraySlice<pollfd>,
        handle: (ControlCommand, inout Bool) -> Result<JSONValue, ControlError>
    ) {
        guard let first = fds.first else { return }
        let clientEvents = Array(fds.dropFirst())
        var index = 0
        for event in clientEvents {
            defer { index += 1 }
            guard index < clients.count, clients[index].fd == event.fd else { continue }
            if event.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { read(client: index, handle: handle) }
            if event.revents & Int16(POLLOUT) != 0 { flush(client: index) }
        }
        if first.revents & Int16(POLLIN) != 0 { acceptClients() }
    }

    func acceptClients() {
        while true {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else {
                let exhausted = Glibc.errno == EMFILE || Glibc.errno == ENFILE
                if exhausted && spare >= 0 {
                    close(spare)
                    let waiting = accept(listener, nil, nil)
                    if waiting >= 0 {
                        let line = Array(
                            (ControlMessage.failure(
                                id: nil,
                                error: ControlError(.failed, "the key has no file descriptors left")
                            )
                                + "\n").utf8
                        )
                        _ = line.withUnsafeBytes {
                            send(waiting, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                        }
                        close(waiting)
                    }
                    spare = Self.reserveDescriptor()
                    if waiting >= 0 && spare >= 0 { continue }
                }
                if exhausted || Glibc.errno == ENOBUFS || Glibc.errno == ENOMEM {
                    // No way to take the connection now: the listener rests instead of waking the loop at once.
                    acceptPausedUntil = now + .milliseconds(100)
                }
                return
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let time = now
            var client = Client(fd: fd, lastActivity: time)
            var refusal = Self.refusal(peerUID: Self.peerUID(fd), serverUID: geteuid())
            let active = clients.filter { $0.fd >= 0 && !$0.closeAfterWrite }
            if refusal == nil && active.count >= Self.maxClients {
                // Every place is taken: the client idle longest makes room if it has been idle long enough.
                let idle = clients.indices.filter { clients[$0].fd >= 0 && !clients[$0].closeAfterWrite }
                    .min { clients[$0].lastActivity < clients[$1].lastActivity }
                if let idle, time - clients[idle].lastActivity >= Self.idleLimit {
                    queue(
                        ControlMessage.failure(
                            id: nil,
                            error: ControlError(.failed, "closed: idle while another client needed the place")
                        ),
                        to: idle
                    )
                    clients[idle].closeAfterWrite = true
                    flush(client: idle)
                } else {
                    refusal = ControlError(.failed, "too many control connections (at most \(Self.maxClients))")
                }
            }
            if let refusal {
                let line = Array((ControlMessage.failure(id: nil, error: refusal) + "\n").utf8)
                let refusing = clients.filter { $0.fd >= 0 && $0.closeAfterWrite }.count
                guard refusing < Self.maxRefused else {
                    // Too many refusals in flight: this one is told what it can be told in one write, then closed.
                    _ = line.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                    close(fd)
                    continue
                }
                client.output = line
                client.closeAfterWrite = true
            }
            clients.append(client)
            flush(client: clients.count - 1)
        }
    }

    /// Why a peer is refused, if it is (``PeerAccess`` at the control door: the key's user and root only, whatever
    /// `--any-local-user` says; credentials that cannot be read are refused).
    static func refusal(peerUID: uid_t?, serverUID: uid_t) -> ControlError? {
        guard let why = PeerAccess(owner: serverUID).refusal(of: .unixSocket(uid: peerUID), at: .control) else {
            return nil
        }
        return ControlError(.permissionDenied, "refused: \(why)")
    }

    /// The uid of the process at the other end (SO_PEERCRED: pid, uid, gid as 32-bit integers).
    static func peerUID(_ fd: Int32) -> uid_t? {
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        return credentials.1
    }

    func read(client index: Int, handle: (ControlCommand, inout Bool) -> Result<JSONValue, ControlError>) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while clients[index].fd >= 0 {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(clients[index].fd, $0.baseAddress, $0.count) }
            if n == 0 || (n < 0 && Glibc.errno != EAGAIN && Glibc.errno != EINTR) {
                disconnect(index)
                return
            }
            if n < 0 { break }
            if clients[index].closeAfterWrite { continue }  // a refused peer's requests are not read
            clients[index].lastActivity = now
            for item in clients[index].input.append(buffer[0..<n]) {
                let line: String
                switch item {
                case .tooLarge:
                    line = ControlMessage.failure(
                        id: nil,
                        error: ControlError(
                            .tooLarge,
                            "a request line is longer than \(ControlLineBuffer.maxLineLength) bytes"
                        )
                    )
                case .line(let bytes):
                    switch ControlRequest.parse(bytes) {
                    case .failure(let failure):
                        line = ControlMessage.failure(id: failure.id, error: failure.error)
                    case .success(let request):
                        var subscribed = clients[index].subscribed
                        switch handle(request.command, &subscribed) {
                        case .success(let result): line = ControlMessage.success(id: request.id, result: result)
                        case .failure(let error): line = ControlMessage.failure(id: request.id, error: error)
                        }
                        clients[index].subscribed = subscribed
                    }
                }
                queue(line, to: index)
            }
        }
        if clients[index].fd >= 0 { flush(client: index) }
    }

    func queue(_ line: String, to index: Int) {
        guard clients[index].fd >= 0 else { return }
        clients[index].output += Array(line.utf8)
        clients[index].output.append(0x0A)
        if clients[index].pending > Self.maxPendingOutput { disconnect(index) }
    }

    func flush(client index: Int) {
        while clients[index].fd >= 0 && clients[index].pending > 0 {
            let sent = clients[index].sent
            let n = clients[index].output.withUnsafeBytes {
                send(clients[index].fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if Glibc.errno == EAGAIN || Glibc.errno == EINTR { break }
                disconnect(index)
                return
            }
            clients[index].sent += n
        }
        guard clients[index].fd >= 0 else { return }
        if clients[index].pending == 0 {
            clients[index].output.removeAll(keepingCapacity: clients[index].output.count <= 65536)
            clients[index].sent = 0
        } else if clients[index].sent >= 65536 {
            clients[index].output.removeFirst(clients[index].sent)
            clients[index].sent = 0
        }
        if clients[index].closeAfterWrite && clients[index].pending == 0 {
            // End our side only: closing with the peer's request still unread would reset the connection
            // before the peer reads the refusal. Its remaining bytes are discarded until it closes.
            shutdown(clients[index].fd, Int32(SHUT_WR))
        }
    }

    func disconnect(_ index: Int) {
        guard clients[index].fd >= 0 else { return }
        close(clients[index].fd)
        clients[index].fd = -1
    }

    /// Sends an event line to every subscribed client. A subscriber that has not read ``maxPendingEvents`` bytes
    /// is dropped, and the others are told.
    func broadcast(_ line: String) {
        var dropped: [Int] = []
        for index in clients.indices where clients[index].subscribed && clients[index].fd >= 0 {
            if clients[index].pending > Self.maxPendingEvents {
                dropped.append(index)
                disconnect(index)
                continue
            }
            queue(line, to: index)
            flush(client: index)
        }
        guard !dropped.isEmpty else { return }
        let notice = ControlMessage.event(
            "clientDropped",
            [
                "reason": .string("a subscriber did not read \(Self.maxPendingEvents / 1024) KiB of events"),
                "count": JSONValue(dropped.count),
            ]
        )
        for index in clients.indices where clients[index].subscribed && clients[index].fd >= 0 {
            queue(notice, to: index)
            flush(client: index)
        }
    }

    /// Whether any client listens to events (events are only built when one does).
    var hasSubscribers: Bool { clients.contains { $0.subscribed && $0.fd >= 0 } }
}
