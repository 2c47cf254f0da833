import CDatagrams
package import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// Who owns the socket at the other end of a network door, asked of the kernel (sock_diag over netlink, as `ss`
/// asks): one TCP connection by its four addresses, or the UDP sockets on one port. Nothing is read as text and no
/// whole table is read, so what a decision costs does not grow with the sockets other users hold (for UDP the
/// kernel compares each socket's port as it walks its hash table, in the kernel, without copying them out).
///
/// The answers go to ``PeerAccess``, which judges them (firmware-spec/security.md, "Who may reach the key").
package final class KernelSockets {
    /// The netlink socket, opened once (-1 when it cannot be: every question then answers "unknown", and the door
    /// refuses).
    let fd: Int32
    var sequence: UInt32 = 0
    /// The most sockets on one port that are looked at (more are still counted, and the port is then refused).
    static let maxPerPort = 64
    private var found = [fidosim_diag_socket](repeating: fidosim_diag_socket(), count: maxPerPort)

    package init() {
        fd = fidosim_diag_open()
        guard fd >= 0 else { return }
        // A reply never comes late from the kernel, but a door must not hang on one: after a second, "unknown".
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { if fd >= 0 { close(fd) } }

    /// The peer of the TCP connection from `peer` to `server` (addresses as the server's socket sees them): the
    /// owner of the peer's socket while the connection is established and a process holds that socket. A
    /// connection in any other state (closing, closed, TIME_WAIT, whose rows the kernel gives to uid 0) is
    /// ``PeerAccess/Peer/notEstablished(_:)``, refused whoever it was.
    /// `acceptedYet` false: the peer is a listener's end, which may still wait in its accept queue (held by no
    /// process, with the listener's owner).
    package func streamPeer(_ peer: UDPPeer, server: UDPPeer, acceptedYet: Bool = true) -> PeerAccess.Peer {
        guard fd >= 0 else { return .ip(loopback: peer.isLoopback, socketOwners: [], kernelAnswered: false) }
        sequence &+= 1
        var socket = fidosim_diag_socket()
        let answer = fidosim_diag_tcp(fd, peer.address, peer.port, server.address, server.port, sequence, &socket)
        if answer < 0 { return .ip(loopback: peer.isLoopback, socketOwners: [], kernelAnswered: false) }
        // No local socket is the peer's: it is on another machine (or gone).
        if answer == 0 { return .ip(loopback: peer.isLoopback, socketOwners: []) }
        guard socket.localPort == peer.port, socket.remotePort == server.port else {
            // The kernel's lookup fell back to a listener on the peer's port: not the peer's connection.
            return .notEstablished("a listener, not a connection")
        }
        guard socket.state == 1, socket.inode != 0 || !acceptedYet else {
            return .notEstablished(socket.state == 1 ? "no process holds its socket" : Self.tcpState(socket.state))
        }
        return .ip(loopback: peer.isLoopback, socketOwners: [socket.uid])
    }

    /// The owners of every UDP socket on `port`, whatever address each is bound to: a local program can send from
    /// any local address of its choosing (IP_PKTINFO), but only from the port of a socket it holds. Empty: no local
    /// socket has the port (the sender is on another machine). Nil: the kernel could not be asked, or more than
    /// ``maxPerPort`` sockets share the port.
    package func datagramOwners(port: UInt16) -> [UInt32]? {
        guard fd >= 0 else { return nil }
        sequence &+= 2
        let count = found.withUnsafeMutableBufferPointer {
            fidosim_diag_udp_port(fd, port, sequence, $0.baseAddress, UInt32(Self.maxPerPort))
        }
        guard count >= 0, count <= Self.maxPerPort else { return nil }
        return found.prefix(Int(count)).map(\.uid)
    }

    /// ``datagramOwners(port:)`` for several ports with one walk over every UDP socket (for a batch of datagrams
    /// from many ports: a flood from new sockets). Nil when the kernel could not be asked or has more than
    /// ``maxWalked`` UDP sockets.
    package func datagramOwners(ports: Set<UInt16>) -> [UInt16: [UInt32]]? {
        guard fd >= 0 else { return nil }
        sequence &+= 2
        if everySocket.isEmpty {
            everySocket = [fidosim_diag_socket](repeating: fidosim_diag_socket(), count: Self.maxWalked)
        }
        let count = everySocket.withUnsafeMutableBufferPointer {
            fidosim_diag_udp_port(fd, 0, sequence, $0.baseAddress, UInt32(Self.maxWalked))
        }
        guard count >= 0, count <= Self.maxWalked else { return nil }
        var owners: [UInt16: [UInt32]] = [:]
        for socket in everySocket.prefix(Int(count)) where ports.contains(socket.localPort) {
            owners[socket.localPort, default: []].append(socket.uid)
        }
        return owners
    }

    /// The most UDP sockets one walk reads (2 MiB of answers, made the first time a walk is needed).
    static let maxWalked = 65_536
    private var everySocket: [fidosim_diag_socket] = []

    /// A TCP state's name, for the refusal's log line.
    static func tcpState(_ state: UInt8) -> String {
        let names = [
            2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2", 6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT",
            9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING",
        ]
        return names[Int(state)].map { "its connection is \($0)" } ?? "its connection is in state \(state)"
    }
}
