import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// The peer of an accepted TCP connection, judged by ``PeerAccess``: what the USB/IP server asks of each connection,
/// for the other TCP doors (the WebDriver front).
package enum StreamPeer {
    /// The peer's address as text and why it may not pass `door` (nil: it may). The kernel's TCP tables are read for
    /// the connection; a peer whose address or tables cannot be read is refused.
    package static func judge(
        _ fd: Int32,
        access: PeerAccess,
        door: PeerAccess.Door
    ) -> (
        peer: String, refusal: String?
    ) {
        judge(fd, access: access, door: door) {
            guard let tcp = ProcFile("/proc/net/tcp").read(), let tcp6 = ProcFile("/proc/net/tcp6").read() else {
                return nil
            }
            return (tcp, tcp6)
        }
    }

    /// The same with the tables from `tables` (nil: they cannot be read), asked only when the peer needs them: the
    /// USB/IP server reads them once for the connections of one wake-up.
    static func judge(
        _ fd: Int32,
        access: PeerAccess,
        door: PeerAccess.Door,
        tables: () -> (tcp: String, tcp6: String)?
    ) -> (peer: String, refusal: String?) {
        guard let peer = IPv4.peerEndpoint(fd), let server = IPv4.localEndpoint(fd) else {
            return ("?", "its address cannot be read")
        }
        if door == .transport && access.admitsWithoutLookup(loopback: peer.isLoopback) {
            return (peer.description, nil)
        }
        guard let read = tables() else {
            return (
                peer.description,
                access.refusal(of: .ip(loopback: peer.isLoopback, socketOwners: [], tableRead: false), at: door)
            )
        }
        let owners = SocketTables.streamOwners(of: peer, server: server, tcp: read.tcp, tcp6: read.tcp6)
        return (peer.description, access.refusal(of: .ip(loopback: peer.isLoopback, socketOwners: owners), at: door))
    }
}
