import Testing

@testable import HIDBridge
@testable import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

@Suite struct PeerAccessTests {
    let access = PeerAccess(owner: 1000)

    @Test func theOwnerAndRootPassAndOtherUsersAreRefused() {
        #expect(access.refusal(of: .unixSocket(uid: 1000)) == nil)
        #expect(access.refusal(of: .unixSocket(uid: 0)) == nil)
        #expect(access.refusal(of: .unixSocket(uid: 65534))?.contains("uid 65534 is not the key's user") == true)
        #expect(access.refusal(of: .unixSocket(uid: nil)) != nil)
        #expect(access.refusal(of: .ip(loopback: true, socketOwners: [1000])) == nil)
        #expect(access.refusal(of: .ip(loopback: true, socketOwners: [1000, 65534])) != nil)
    }

    @Test func unknownOwnersFailClosed() {
        // No local socket behind a loopback address (closed already), tables that cannot be read.
        #expect(access.refusal(of: .ip(loopback: true, socketOwners: [])) != nil)
        #expect(access.refusal(of: .ip(loopback: false, socketOwners: [], kernelAnswered: false)) != nil)
        #expect(access.refusal(of: .ip(loopback: true, socketOwners: [1000], kernelAnswered: false)) != nil)
        // Another machine: only with --allow-remote.
        #expect(access.refusal(of: .ip(loopback: false, socketOwners: [])) != nil)
        #expect(PeerAccess(owner: 1000, allowRemote: true).refusal(of: .ip(loopback: false, socketOwners: [])) == nil)
    }

    @Test func anyLocalUserOpensTheTransportsButNeverTheControlSocket() {
        let open = PeerAccess(owner: 1000, anyLocalUser: true)
        #expect(open.refusal(of: .ip(loopback: true, socketOwners: [65534])) == nil)
        #expect(open.refusal(of: .unixSocket(uid: 65534)) == nil)
        #expect(open.refusal(of: .unixSocket(uid: 65534), at: .control) != nil)
        #expect(open.refusal(of: .unixSocket(uid: 1000), at: .control) == nil)
    }

    @Test func admitsSaysWhatRefusalSays() {
        let peers: [PeerAccess.Peer] = [
            .unixSocket(uid: 1000), .unixSocket(uid: 0), .unixSocket(uid: 65534), .unixSocket(uid: nil),
            .ip(loopback: true, socketOwners: [1000]), .ip(loopback: true, socketOwners: [1000, 65534]),
            .ip(loopback: true, socketOwners: []), .ip(loopback: false, socketOwners: []),
            .ip(loopback: true, socketOwners: [1000], kernelAnswered: false), .ip(loopback: false, socketOwners: [0]),
        ]
        for rule in [access, PeerAccess(owner: 1000, anyLocalUser: true), PeerAccess(owner: 1000, allowRemote: true)] {
            for peer in peers {
                for door in [PeerAccess.Door.transport, .control] {
                    #expect(rule.admits(peer, at: door) == (rule.refusal(of: peer, at: door) == nil), "\(peer) \(door)")
                }
            }
        }
    }

    @Test func refusalLinesAreAtMostOneASecond() {
        var notes = RefusalNotes()
        #expect(notes.line("a", now: .seconds(1)) == "a")
        #expect(notes.line("b", now: .milliseconds(1500)) == nil)
        #expect(notes.line("c", now: .milliseconds(1600)) == nil)
        #expect(notes.line("d", now: .seconds(2)) == "d (and 2 more refused since the last line)")
    }

    @Test func aConnectionThatIsNotEstablishedIsRefusedWhoeverItWas() {
        for rule in [access, PeerAccess(owner: 1000, anyLocalUser: true), PeerAccess(owner: 0)] {
            #expect(rule.refusal(of: .notEstablished("its connection is TIME_WAIT")) == "its connection is TIME_WAIT")
            #expect(!rule.admits(.notEstablished("its connection is FIN_WAIT2")))
        }
    }
}

/// What the kernel answers about sockets of this process (``KernelSockets``): the other user's side is
/// tools/interop/test_peer_access.py's.
@Suite struct KernelSocketsTests {
    let kernel = KernelSockets()

    /// A UDP socket bound to `address` on port 0 (the kernel picks), and that port.
    func udpSocket(_ address: String) throws -> (Int32, UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0 && IPv4.bindTo(fd, IPv4.address(address, port: 0)))
        return (fd, IPv4.localPort(fd))
    }

    @Test func everyUDPSocketOnTheSendersPortIsFoundWhateverItsAddress() throws {
        let (first, port) = try udpSocket("127.0.0.1")
        defer { close(first) }
        #expect(kernel.datagramOwners(port: port) == [geteuid()])
        // A second socket on the same port at another address (SO_REUSEADDR on both): a datagram from
        // 127.0.0.1:port may be either's (IP_PKTINFO), so both owners are the answer.
        let second = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(second) }
        var one: Int32 = 1
        setsockopt(second, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        try #require(IPv4.bindTo(second, IPv4.address("127.0.0.2", port: port)))
        #expect(kernel.datagramOwners(port: port) == [geteuid(), geteuid()])
        // One walk of every UDP socket says the same for the port.
        #expect(kernel.datagramOwners(ports: [port])?[port] == [geteuid(), geteuid()])
    }

    @Test func aPortNoSocketHoldsHasNoOwner() throws {
        let (fd, port) = try udpSocket("127.0.0.1")
        close(fd)
        #expect(kernel.datagramOwners(port: port) == [])
        #expect(kernel.datagramOwners(ports: [port])?[port] == nil)
    }

    @Test func aTCPPeerIsItsEstablishedConnectionsOwnerAndNothingOnceItCloses() throws {
        let listener = IPv4.streamSocket()
        defer { close(listener) }
        try #require(listener >= 0 && IPv4.bindTo(listener, IPv4.address("127.0.0.1", port: 0)))
        try #require(listen(listener, 4) == 0)
        let server = UDPPeer(address: 0x7F00_0001, port: IPv4.localPort(listener))
        let client = IPv4.streamSocket()
        var address = IPv4.address("127.0.0.1", port: server.port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0)
        let accepted = accept(listener, nil, nil)
        defer { close(accepted) }
        let peer = try #require(IPv4.peerEndpoint(accepted))
        #expect(kernel.streamPeer(peer, server: server) == .ip(loopback: true, socketOwners: [geteuid()]))
        // The client closes: its end is FIN_WAIT1, then FIN_WAIT2 once the server's kernel acknowledges (the server
        // has not closed), which no process holds.
        close(client)
        let answer = kernel.streamPeer(peer, server: server)
        #expect(
            [.notEstablished("its connection is FIN_WAIT1"), .notEstablished("its connection is FIN_WAIT2")].contains(
                answer
            ),
            "\(answer)"
        )
        // The server's own end is not the peer's (its addresses are the mirror).
        #expect(kernel.streamPeer(server, server: peer) != .ip(loopback: true, socketOwners: [geteuid()]))
    }
}
