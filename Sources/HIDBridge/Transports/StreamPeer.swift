import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// The peer of an accepted TCP connection, judged by ``PeerAccess``: what the USB/IP server asks of each connection,
/// and the other TCP doors (the WebDriver front) too, before any of its bytes is read.
package enum StreamPeer {
    /// The peer's address as text and why it may not pass `door` (nil: it may). The kernel is asked about this one
    /// connection (``KernelSockets``, a netlink socket of the caller's or one opened for the question); a peer whose
    /// address cannot be read, whose connection is not established, or about whom the kernel cannot be asked, is
    /// refused.
    package static func judge(
        _ fd: Int32,
        access: PeerAccess,
        door: PeerAccess.Door,
        kernel: KernelSockets? = nil
    ) -> (peer: String, refusal: String?) {
        guard let peer = IPv4.peerEndpoint(fd), let server = IPv4.localEndpoint(fd) else {
            return ("?", "its address cannot be read")
        }
        if door == .transport && access.admitsWithoutLookup(loopback: peer.isLoopback) {
            return (peer.description, nil)
        }
        let answer = (kernel ?? KernelSockets()).streamPeer(peer, server: server)
        return (peer.description, access.refusal(of: answer, at: door))
    }
}
