import Testing

@testable import HIDBridge
@testable import VirtualKey

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
        #expect(access.refusal(of: .ip(loopback: false, socketOwners: [], tableRead: false)) != nil)
        #expect(access.refusal(of: .ip(loopback: true, socketOwners: [1000], tableRead: false)) != nil)
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
            .ip(loopback: true, socketOwners: [1000], tableRead: false), .ip(loopback: false, socketOwners: [0]),
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

    static let tcp = """
          sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
           0: 0100007F:0CA8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 11 1 0
           1: 0100007F:0CA8 0100007F:9C41 01 00000000:00000000 00:00000000 00000000  1000        0 12 1 0
           2: 0100007F:9C41 0100007F:0CA8 01 00000000:00000000 00:00000000 00000000 65534        0 13 1 0
           3: 0100007F:9C42 0100007F:0CA8 01 00000000:00000000 00:00000000 00000000     0        0 14 1 0
        """
    static let tcp6 = """
          sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
           4: 0000000000000000FFFF00000100007F:9C43 0000000000000000FFFF00000100007F:0CA8 01 00000000:00000000 00:00000000 00000000   42        0 15 1 0
        """

    @Test func aConnectionsPeerIsTheSocketWhoseAddressesAreTheMirror() {
        let server = UDPPeer(address: 0x7F00_0001, port: 3240)
        func owners(_ port: UInt16) -> [UInt32] {
            SocketTables.streamOwners(
                of: UDPPeer(address: 0x7F00_0001, port: port),
                server: server,
                tcp: Self.tcp,
                tcp6: Self.tcp6
            )
        }
        #expect(owners(40001) == [65534])  // not the server's own end of that connection (uid 1000)
        #expect(owners(40002) == [0])
        #expect(owners(40003) == [42])  // a dual-stack socket, ::ffff:127.0.0.1
        #expect(owners(40004) == [])
    }

    @Test func aDatagramsSenderMayBeAMappedWildcardSocket() {
        let udp6 = """
              sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
              1: 0000000000000000FFFF000000000000:9C41 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000 65534        0 1 2 0 0
            """
        let owners = SocketTables.datagramOwners(of: UDPPeer(address: 0x7F00_0001, port: 40001), udp: "", udp6: udp6)
        #expect(owners == [65534])
    }
}
