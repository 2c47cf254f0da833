import Console
import ControlClient
import ControlProtocol
import Dispatch
package import HIDBridge
import Profiles
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `fidosim webdriver`'s HTTP endpoint: a W3C WebDriver client (Selenium, …) is pointed at it instead of the driver.
/// It answers the WebAuthn extension commands itself with real fidosim keys (``WebAuthnRoute``: a virtual
/// authenticator is a key added through the process's hub, its credentials and user verification the key's control
/// commands) and forwards every other request to the real driver it fronts (chromedriver, started in the keys'
/// private tree, so that its browser sees the keys through its own security-key path).
///
/// Who may connect is the control socket's rule (``PeerAccess``, the control door: the key's user and root), since
/// the commands read the keys' private keys. One connection, one request: each answer says `Connection: close`.
package final class WebDriverFront: Sendable {
    let listener: Int32
    /// The port the front listens on (127.0.0.1).
    package let port: UInt16
    let driverPort: UInt16
    let hubPath: String
    let access: PeerAccess
    /// The secret path every request starts with (`/SECRET`, or empty with `--no-secret`): the URL the owner was
    /// given, in the 0600 ready file, is the only way in, whoever finds the port.
    let pathPrefix: String
    /// The driver's own secret path (chromedriver's `--url-base`), put before each forwarded request's path.
    let driverPrefix: String
    /// Each session's keys (authenticator ids) and each key's control socket.
    let state = Mutex<State>(State())

    struct State {
        var sessions: [String: [String]] = [:]
        var controls: [String: String] = [:]
        /// Each key's protocol, as Add Virtual Authenticator named it.
        var protocols: [String: String] = [:]
    }

    /// Listens on 127.0.0.1:`port` (0: a free one); requests for the driver go to 127.0.0.1:`driverPort`.
    package init(
        port: UInt16,
        driverPort: UInt16,
        hubPath: String,
        access: PeerAccess,
        pathPrefix: String = "",
        driverPrefix: String = ""
    ) throws(WebDriverFrontError) {
        let fd = IPv4.streamSocket()
        guard fd >= 0 else { throw .errno("socket") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        guard IPv4.bindTo(fd, IPv4.address("127.0.0.1", port: port)), listen(fd, 64) == 0 else {
            let error = WebDriverFrontError.errno("cannot listen on 127.0.0.1:\(port)")
            close(fd)
            throw error
        }
        listener = fd
        self.port = IPv4.localPort(fd)
        self.driverPort = driverPort
        self.hubPath = hubPath
        self.access = access
        self.pathPrefix = pathPrefix
        self.driverPrefix = driverPrefix
    }

    /// A secret for a path: 32 hex digits from the system's random source.
    package static func secret() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16)
        }.joined()
    }

    deinit { close(listener) }

    /// Accepts connections until the process ends, each served on a thread of its own.
    package func serve() {
        while true {
            let fd = accept(listener, nil, nil)
            if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                // Out of descriptors or memory: wait a moment instead of spinning.
                usleep(100_000)
                continue
            }
            DispatchQueue.global().async { self.handle(connection: fd) }
        }
    }

    /// Whether the driver answers on its port (the command waits for it before it says the front is ready).
    package static func driverAnswers(port: UInt16) -> Bool {
        let fd = IPv4.streamSocket()
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return connectLoopback(fd, port: port)
    }

    /// The most connections served at once; one more is answered 503 and closed (each waits for its request and
    /// then for the driver: a client that opens many and sends nothing holds at most these).
    static let maxConnections = 16
    /// How long a client may take to send its request (a WebDriver client sends it at once).
    static let requestTimeout = timeval(tv_sec: 30, tv_usec: 0)
    let connections = Atomic<Int>(0)

    func handle(connection fd: Int32) {
        defer { close(fd) }
        var timeout = Self.requestTimeout
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let (peer, refused) = StreamPeer.judge(fd, access: access, door: .control)
        guard connections.add(1, ordering: .relaxed).newValue <= Self.maxConnections else {
            connections.subtract(1, ordering: .relaxed)
            if refused == nil {
                answer(
                    fd,
                    503,
                    "Service Unavailable",
                    "unknown error",
                    "busy: \(Self.maxConnections) connections are being served; try again"
                )
            }
            return
        }
        defer { connections.subtract(1, ordering: .relaxed) }
        if let refused {
            forbid(fd, peer: peer, refused)
            return
        }
        let request: HTTPMessage
        switch read(fd, maxBody: HTTPMessage.maxRequestBody) {
        case .success(let message): request = message
        case .failure(let error):
            answer(fd, 400, "Bad Request", "invalid argument", "bad request: \(error)")
            return
        }
        if let refused = request.browserRefusal(port: port) {
            forbid(fd, peer: peer, refused)
            return
        }
        let method = request.startLine[0]
        guard let path = Self.path(request.startLine[1], under: pathPrefix) else {
            answer(
                fd,
                404,
                "Not Found",
                "unknown command",
                "no such path (the endpoint's URL has a secret path: see the ready file)"
            )
            return
        }
        let route: WebAuthnRoute?
        do {
            route = try WebAuthnRoute.route(method: method, path: path, body: request.body)
        } catch {
            let (status, body) = WebAuthnRoute.failure(error)
            write(fd, HTTPMessage.response(status: status, reason: "Error", json: body))
            return
        }
        guard let route, !isDeleteSession(route) else {
            // To the driver, under its own secret path.
            var outgoing = request
            outgoing.startLine[1] = driverPrefix + path
            if method == "POST", path == "/session" || path == "/session/", let body = NewSession.adjusted(request.body)
            {
                outgoing.body = body
            }
            let answer = forward(outgoing)
            // The session's keys go before the client hears that it ended.
            if let route, answer.startLine.count > 1, answer.startLine[1] == "200" { endSession(route.session) }
            write(fd, answer)
            return
        }
        switch perform(route) {
        case .success(let value):
            write(fd, HTTPMessage.response(status: 200, reason: "OK", json: WebAuthnRoute.success(value)))
        case .failure(let refusal):
            let (status, body) = WebAuthnRoute.failure(refusal)
            write(fd, HTTPMessage.response(status: status, reason: "Error", json: body))
        }
    }

    /// The path under `prefix` (which it must start with, followed by `/` or the end), or nil.
    static func path(_ path: String, under prefix: String) -> String? {
        guard !prefix.isEmpty else { return path }
        guard path.hasPrefix(prefix) else { return nil }
        let rest = String(path.dropFirst(prefix.count))
        guard rest.isEmpty || rest.hasPrefix("/") || rest.hasPrefix("?") else { return nil }
        return rest.isEmpty || rest.hasPrefix("?") ? "/" + rest : rest
    }

    /// Answers `fd` with a WebDriver error (`error`, `message`) and the HTTP status.
    func answer(_ fd: Int32, _ status: Int, _ reason: String, _ error: String, _ message: String) {
        let (_, body) = WebAuthnRoute.failure(WebAuthnRoute.Refusal(error: error, message: message))
        write(fd, HTTPMessage.response(status: status, reason: reason, json: body))
    }

    /// Logs a refused peer and answers it 403.
    func forbid(_ fd: Int32, peer: String, _ refused: String) {
        printError(PeerAccess.note(door: "webdriver", peer: peer, refusal: refused))
        answer(fd, 403, "Forbidden", "unknown error", "permission denied: \(refused)")
    }

    func isDeleteSession(_ route: WebAuthnRoute) -> Bool {
        if case .deleteSession = route { return true }
        return false
    }

    /// Carries out one of the front's own commands against the hub or a key.
    func perform(_ route: WebAuthnRoute) -> Result<JSONValue, WebAuthnRoute.Refusal> {
        do {
            switch route {
            case .addAuthenticator(let session, let options):
                if let refusal = Self.fileRefusal(options) { return .failure(refusal) }
                let added = try hub("addVirtualAuthenticator", .object(options))
                guard let id = added["authenticatorId"]?.stringValue, let control = added["control"]?.stringValue
                else { return .failure(.init(error: "unknown error", message: "the hub said \(added.encoded)")) }
                state.withLock { state in
                    state.sessions[session, default: []].append(id)
                    state.controls[id] = control
                    state.protocols[id] = options["protocol"]?.stringValue
                }
                return .success(.string(id))
            case .removeAuthenticator(let session, let id):
                try owned(id, by: session)
                _ = try hub("removeVirtualAuthenticator", ["authenticatorId": .string(id)])
                state.withLock { state in
                    state.sessions[session]?.removeAll { $0 == id }
                    state.controls[id] = nil
                    state.protocols[id] = nil
                }
                return .success(.null)
            case .addCredential(let session, let id, let credential):
                if credential["isResidentCredential"] == .boolean(true),
                    state.withLock({ $0.protocols[id] }) == "ctap1/u2f"
                {
                    return .failure(
                        .init(
                            error: "invalid argument",
                            message: "a U2F authenticator cannot hold a resident credential"
                        )
                    )
                }
                // signCount null: the credential has no counter. The key takes it at 0 and then without one (its
                // assertions report 0 for ever and leave the key's counter alone).
                var given = credential
                let counterless = credential["signCount"] == .null
                if counterless { given["signCount"] = 0 }
                _ = try key(id, of: session, "addCredential", .object(given))
                if counterless, let credentialId = credential["credentialId"] {
                    _ = try key(
                        id,
                        of: session,
                        "setCredentialProperties",
                        ["credentialId": credentialId, "signCount": -1]
                    )
                }
                return .success(.null)
            case .getCredentials(let session, let id):
                let result = try key(id, of: session, "getCredentials", [:])
                return .success(result["credentials"] ?? .array([]))
            case .removeCredential(let session, let id, let credentialId):
                _ = try key(id, of: session, "removeCredential", ["credentialId": .string(credentialId)])
                return .success(.null)
            case .removeAllCredentials(let session, let id):
                _ = try key(id, of: session, "removeAllCredentials", [:])
                return .success(.null)
            case .setUserVerified(let session, let id, let verified):
                _ = try key(id, of: session, "setUserVerified", ["isUserVerified": verified])
                return .success(.null)
            case .setCredentialProperties(let session, let id, let credentialId, var properties):
                properties["credentialId"] = .string(credentialId)
                _ = try key(id, of: session, "setCredentialProperties", .object(properties))
                return .success(.null)
            case .deleteSession:
                return .success(.null)
            }
        } catch let refusal as WebAuthnRoute.Refusal {
            return .failure(refusal)
        } catch {
            return .failure(.init(error: "unknown error", message: "\(error)"))
        }
    }

    /// A WebDriver client names no file: the key's image and a profile file are the owner's to choose, on
    /// `fidosim webdriver`'s command line (firmware-spec/security.md). From a client, `flash` may only be `memory`
    /// and `profile` only a built-in profile's name.
    static func fileRefusal(_ options: [String: JSONValue]) -> WebAuthnRoute.Refusal? {
        if let flash = options["flash"], flash != .string("memory") {
            return .init(
                error: "invalid argument",
                message: "flash: a WebDriver client names no file (only \"memory\"); the owner gives images on the "
                    + "command line"
            )
        }
        if let profile = options["profile"], !ProfileFile.builtInNames.contains(profile.stringValue ?? "") {
            return .init(
                error: "invalid argument",
                message: "profile: a WebDriver client names a built-in profile only ("
                    + ProfileFile.builtInNames.joined(separator: ", ") + "), never a file"
            )
        }
        return nil
    }

    /// The session's keys are removed when it ends (the browser has gone with it).
    func endSession(_ session: String) {
        let ids = state.withLock { state in
            let ids = state.sessions.removeValue(forKey: session) ?? []
            for id in ids {
                state.controls[id] = nil
                state.protocols[id] = nil
            }
            return ids
        }
        for id in ids { _ = try? hub("removeVirtualAuthenticator", ["authenticatorId": .string(id)]) }
    }

    func owned(_ id: String, by session: String) throws(WebAuthnRoute.Refusal) {
        let known = state.withLock { $0.sessions[session]?.contains(id) ?? false }
        guard known else {
            throw .init(error: "invalid argument", message: "no virtual authenticator \(id) in session \(session)")
        }
    }

    func hub(_ command: String, _ params: JSONValue) throws(WebAuthnRoute.Refusal) -> JSONValue {
        try request(path: hubPath, command, params)
    }

    func key(
        _ id: String,
        of session: String,
        _ command: String,
        _ params: JSONValue
    ) throws(WebAuthnRoute.Refusal)
        -> JSONValue
    {
        try owned(id, by: session)
        guard let control = state.withLock({ $0.controls[id] }) else {
            throw .init(error: "invalid argument", message: "no virtual authenticator \(id)")
        }
        return try request(path: control, command, params)
    }

    func request(path: String, _ command: String, _ params: JSONValue) throws(WebAuthnRoute.Refusal) -> JSONValue {
        do {
            let connection = try ControlConnection(path: path)
            return try connection.request(command, params)
        } catch .refused(let code, let message) {
            throw WebAuthnRoute.refusal(code: code, message: message)
        } catch {
            throw .init(error: "unknown error", message: "\(path): \(error)")
        }
    }

    /// Sends the request to the driver and returns its answer (a 502 with a WebDriver error when it cannot).
    func forward(_ request: HTTPMessage) -> HTTPMessage {
        var outgoing = request
        outgoing.headers.removeAll { $0.name.lowercased() == "host" }
        outgoing.headers.insert(("Host", "127.0.0.1:\(driverPort)"), at: 0)
        let fd = IPv4.streamSocket()
        defer { if fd >= 0 { close(fd) } }
        var timeout = timeval(tv_sec: 600, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard fd >= 0, Self.connectLoopback(fd, port: driverPort) else {
            return unreachable("the driver does not answer on 127.0.0.1:\(driverPort)")
        }
        write(fd, outgoing)
        switch read(fd) {
        case .success(let answer): return answer
        case .failure(let error): return unreachable("the driver's answer: \(error)")
        }
    }

    func unreachable(_ why: String) -> HTTPMessage {
        let (_, body) = WebAuthnRoute.failure(.init(error: "unknown error", message: why))
        return HTTPMessage.response(status: 502, reason: "Bad Gateway", json: body)
    }

    static func connectLoopback(_ fd: Int32, port: UInt16) -> Bool {
        IPv4.connectTo(fd, IPv4.address("127.0.0.1", port: port))
    }

    /// Reads one whole message from `fd` (a body of at most `maxBody` bytes).
    func read(_ fd: Int32, maxBody: Int = HTTPMessage.maxBody) -> Result<HTTPMessage, HTTPMessage.ParseError> {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            do {
                if let (message, _) = try HTTPMessage.parse(bytes, maxBody: maxBody) { return .success(message) }
            } catch {
                return .failure(error)
            }
            let n = recv(fd, &chunk, chunk.count, 0)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return .failure(.malformed(n == 0 ? "the connection ended early" : "read failed")) }
            bytes += chunk[0..<n]
        }
    }

    func write(_ fd: Int32, _ message: HTTPMessage) {
        let bytes = message.bytes
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            sent += n
        }
    }
}

/// Why the front could not start.
package struct WebDriverFrontError: Error, CustomStringConvertible {
    package var description: String

    static func errno(_ what: String) -> WebDriverFrontError {
        WebDriverFrontError(description: "\(what): \(String(cString: strerror(Glibc.errno)))")
    }
}
