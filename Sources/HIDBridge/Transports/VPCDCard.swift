import CDatagrams
import CTAPCBOR
import CTAPNFC
package import VirtualKey

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The key as a virtual smart card in vsmartcard's vpcd reader (`serve --transport pcsc`): a TCP client of the
/// port vpcd listens on (35963 by default), which pcscd presents as a card in the reader "Virtual PCD".
///
/// The card is "in the field" while the connection stands. Taking it out (``remove()``) closes the connection;
/// presenting it again connects anew, which vpcd shows to every PC/SC client as a card removed and inserted. When
/// vpcd is not there (pcscd not running, or restarting) the card tries again every ``retryInterval``.
///
/// Whoever listens on the port gets the card, so the listener must pass ``PeerAccess`` (root's pcscd, or the key's
/// user's): a program of another user that took the port while pcscd was away is left at once. A reader that stops
/// reading is left after ``sendTimeout``, so it cannot hold the loop that serves everything else.
package final class VPCDCard {
    package let host: String
    package let port: UInt16
    package let access: PeerAccess
    /// How long a response may wait for the reader to take it.
    package static let sendTimeout: Duration = .seconds(1)
    /// How often a card that is not connected tries again.
    package static let retryInterval: Duration = .milliseconds(500)
    /// How long a card taken out for a power cycle stays out: pcscd looks for cards every 400 ms, and a card
    /// back before it looked would seem never to have left.
    package static let replugDelay: Duration = .seconds(1)

    var fd: Int32 = -1
    var framer = VPCDFramer()
    /// Whether the card is to be in the reader (false while the control plane holds it out).
    package private(set) var present = true
    /// When the next connection attempt is due.
    var retryAt: ContinuousClock.Instant
    let clock = ContinuousClock()
    /// Whether the last attempt failed (so a failure is reported once, not every retry).
    var reportedAbsent = false

    package init(host: String, port: UInt16, access: PeerAccess) throws(TransportError) {
        guard let numeric = IPv4.numericHost(host) else {
            throw TransportError("invalid --vpcd-host '\(host)': give an IPv4 address such as 127.0.0.1")
        }
        self.host = numeric
        self.port = port
        self.access = access
        retryAt = clock.now
    }

    deinit { disconnect() }

    /// Where the card is, for the start-up line and `status`.
    package var summary: String { "pcsc (vpcd \(host):\(port))" }

    /// Whether the card is connected to the reader.
    package var connected: Bool { fd >= 0 }

    /// The descriptor to poll (-1, which poll skips, while not connected).
    package var descriptor: Int32 { fd }

    /// Milliseconds until the next connection attempt, at most `cap`.
    package func timeout(cap: Int32) -> Int32 {
        guard !connected, present else { return cap }
        let wait = retryAt - clock.now
        if wait <= .zero { return 0 }
        return Int32(min(Int64(cap), wait.wholeMilliseconds + 1))
    }

    /// Connects when it is time to; returns what happened.
    package func maintain() -> [CardEvent] {
        guard !connected, present, clock.now >= retryAt else { return [] }
        retryAt = clock.now + Self.retryInterval
        let socketFD = IPv4.streamSocket()
        guard socketFD >= 0 else { return [.note("pcsc: cannot create a socket: \(IPv4.errnoText())")] }
        // Connecting and sending wait at most this long (SO_SNDTIMEO bounds both).
        var limit = timeval(tv_sec: Int(Self.sendTimeout.components.seconds), tv_usec: 0)
        setsockopt(socketFD, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard IPv4.connectTo(socketFD, IPv4.address(host, port: port)) else {
            let reason = IPv4.errnoText()
            close(socketFD)
            if reportedAbsent { return [] }
            reportedAbsent = true
            return [
                .note(
                    "pcsc: no vpcd reader on \(host):\(port) (\(reason)); is pcscd running with vsmartcard-vpcd? "
                        + "trying again every \(Self.retryInterval.wholeMilliseconds) ms"
                )
            ]
        }
        if let why = listenerRefusal(socketFD) {
            close(socketFD)
            let line = PeerAccess.note(door: "pcsc", peer: "the listener on \(host):\(port)", refusal: why)
            return refusalNotes.line(line, now: clock.now - started).map { [.note($0)] } ?? []
        }
        var one: Int32 = 1
        setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        fd = socketFD
        framer = VPCDFramer()
        reportedAbsent = false
        return [.note("pcsc: the card is in the vpcd reader at \(host):\(port)")]
    }

    /// Why the program listening where vpcd should be may not have the card (``PeerAccess``), if it may not: the
    /// owner of the socket at the other end of the connection, asked of the kernel for this one connection (an
    /// end the listener has not accepted yet has its listener's owner, and no process holds it yet).
    func listenerRefusal(_ fd: Int32) -> String? {
        guard let peer = IPv4.peerEndpoint(fd), let local = IPv4.localEndpoint(fd) else {
            return "its address cannot be read"
        }
        // The listener's end of this connection has vpcd's address as its own and the card's as its remote one.
        return access.refusal(of: KernelSockets().streamPeer(peer, server: local, acceptedYet: false))
    }

    var refusalNotes = RefusalNotes()
    let started = ContinuousClock.now

    /// Reads what the reader sent; answers ATR requests itself.
    package func receive() -> [CardEvent] {
        guard connected else { return [] }
        var buffer = [UInt8](repeating: 0, count: 70_000)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return [] }
        guard count > 0 else {
            disconnect()
            return [.fieldOff, .note("pcsc: the vpcd reader closed the connection; reconnecting")]
        }
        let messages: [VPCDMessage]
        do {
            messages = try framer.feed(Array(buffer[..<count]))
        } catch {
            disconnect()
            return [.fieldOff, .note("pcsc: a message of length 0 from vpcd: the stream is out of step; reconnecting")]
        }
        var events: [CardEvent] = []
        for message in messages {
            switch message {
            case .powerOn: events.append(.fieldOn)
            case .reset: events += [.fieldOff, .fieldOn]
            case .powerOff: events.append(.fieldOff)
            case .getATR: send(VPCDFramer.atr)
            case .apdu(let apdu): events.append(.apdu(apdu))
            case .unknownControl(let code):
                events.append(.note("pcsc: unknown vpcd control code \(code), ignored"))
            }
        }
        return events
    }

    /// Sends one response APDU (or the ATR).
    package func send(_ payload: [UInt8]) {
        guard connected else { return }
        let frame = VPCDFramer.frame(payload)
        var offset = 0
        while offset < frame.count {
            let sent = frame[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 && errno == EINTR { continue }
            guard sent > 0 else {
                // An error, or the reader took nothing for sendTimeout (EAGAIN): the card leaves the field.
                disconnect()
                return
            }
            offset += sent
        }
    }

    /// Takes the card out of the field until ``insert()``.
    package func remove() {
        present = false
        disconnect()
    }

    /// Puts the card back into the field after `delay`.
    package func insert(after delay: Duration) {
        present = true
        retryAt = clock.now + delay
    }

    func disconnect() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

}
