#if canImport(Glibc)
import Glibc
#endif
import ControlProtocol

/// Why a control socket could not be opened.
public struct ControlSocketError: Error, CustomStringConvertible, Sendable {
    public var description: String

    init(_ description: String) { self.description = description }

    static func errno(_ what: String) -> ControlSocketError {
        ControlSocketError("\(what): \(String(cString: strerror(Glibc.errno)))")
    }
}

/// The Unix socket of the control plane: newline-delimited JSON requests in, responses and events out.
///
/// The socket is created with mode 0600 in a directory of mode 0700, and a peer whose uid is not the server's
/// is answered `permission-denied` and disconnected. Everything is non-blocking and driven by the I/O loop's
/// `poll`; a client that does not read its output (more than ``maxPendingOutput`` bytes) is disconnected.
public final class ControlServer {
    public static let maxPendingOutput = 16 << 20
    public static let maxClients = 64

    struct Client {
        var fd: Int32
        var input = ControlLineBuffer()
        var output: [UInt8] = []
        var subscribed = false
        /// Close once the output is written (after a refusal).
        var closeAfterWrite = false
    }

    public let path: String
    let listener: Int32
    var clients: [Client] = []

    /// Creates the socket at `path`, creating its directory (0700) when missing. A stale socket left by a
    /// process that ended is replaced; one that still answers is not.
    public init(path: String) throws(ControlSocketError) {
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw ControlSocketError("the control socket path \(path) is longer than 107 bytes; choose a shorter --control")
        }
        self.path = path
        let directory = String(path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropLast()
            .map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/"))
        if !directory.isEmpty { try Self.makePrivateDirectory(directory) }
        try Self.removeStaleSocket(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
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

    /// Creates `directory` and its parents (0700); the last one must belong to this user and be closed to others.
    static func makePrivateDirectory(_ directory: String) throws(ControlSocketError) {
        var current = ""
        for component in directory.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0 && Glibc.errno != EEXIST { throw .errno("cannot create \(current)") }
        }
        var info = stat()
        guard stat(directory, &info) == 0 else { throw .errno("cannot read \(directory)") }
        guard info.st_uid == geteuid() else {
            throw ControlSocketError("\(directory) belongs to another user; the control socket needs a private directory")
        }
        if info.st_mode & 0o077 != 0 && chmod(directory, 0o700) != 0 {
            throw .errno("cannot make \(directory) private (chmod 0700)")
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
        return [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            + clients.map {
                pollfd(fd: $0.fd, events: Int16(POLLIN) | ($0.output.isEmpty ? 0 : Int16(POLLOUT)), revents: 0)
            }
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
            guard fd >= 0 else { return }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var client = Client(fd: fd)
            if let uid = Self.peerUID(fd), uid != geteuid() {
                client.output = Array(
                    (ControlMessage.failure(
                        id: nil,
                        error: ControlError(.permissionDenied, "uid \(uid) may not control a key of uid \(geteuid())"))
                        + "\n").utf8)
                client.closeAfterWrite = true
            } else if clients.count >= Self.maxClients {
                client.output = Array(
                    (ControlMessage.failure(id: nil, error: ControlError(.failed, "too many control connections")) + "\n")
                        .utf8)
                client.closeAfterWrite = true
            }
            clients.append(client)
            flush(client: clients.count - 1)
        }
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
            for item in clients[index].input.append(buffer[0..<n]) {
                let line: String
                switch item {
                case .tooLarge:
                    line = ControlMessage.failure(
                        id: nil,
                        error: ControlError(
                            .tooLarge, "a request line is longer than \(ControlLineBuffer.maxLineLength) bytes"))
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
        if clients[index].output.count > Self.maxPendingOutput { disconnect(index) }
    }

    func flush(client index: Int) {
        while clients[index].fd >= 0 && !clients[index].output.isEmpty {
            let n = clients[index].output.withUnsafeBytes { send(clients[index].fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if Glibc.errno == EAGAIN || Glibc.errno == EINTR { return }
                disconnect(index)
                return
            }
            clients[index].output.removeFirst(n)
        }
        if clients[index].fd >= 0 && clients[index].closeAfterWrite && clients[index].output.isEmpty {
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

    /// Sends an event line to every subscribed client.
    func broadcast(_ line: String) {
        for index in clients.indices where clients[index].subscribed {
            queue(line, to: index)
            flush(client: index)
        }
    }

    /// Whether any client listens to events (events are only built when one does).
    var hasSubscribers: Bool { clients.contains { $0.subscribed && $0.fd >= 0 } }
}
