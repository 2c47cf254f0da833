import VirtualKey

#if canImport(Glibc)
package import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The IPv4 socket steps the UDP, USB/IP and vpcd transports share: a host given as a dotted quad or `localhost`,
/// a close-on-exec socket, bind or connect, the port the kernel chose, and errno as text (and the WebDriver front's
/// TCP sockets).
package enum IPv4 {
    /// `host` as a numeric address (`localhost` is 127.0.0.1); nil when it is not an IPv4 address.
    static func numericHost(_ host: String) -> String? {
        let numeric = host == "localhost" ? "127.0.0.1" : host
        var probe = in_addr()
        return inet_pton(AF_INET, numeric, &probe) == 1 ? numeric : nil
    }

    /// The socket address of a numeric host and a port.
    package static func address(_ numeric: String, port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        _ = inet_pton(AF_INET, numeric, &address.sin_addr)
        return address
    }

    /// A close-on-exec UDP socket, or -1 (errno says why).
    static func datagramSocket() -> Int32 {
        #if canImport(Glibc)
        socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        socket(AF_INET, SOCK_DGRAM, 0)
        #endif
    }

    /// A close-on-exec TCP socket, or -1 (errno says why).
    package static func streamSocket() -> Int32 {
        #if canImport(Glibc)
        socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        socket(AF_INET, SOCK_STREAM, 0)
        #endif
    }

    /// bind(2) to `address`; false when it failed (errno says why).
    package static func bindTo(_ fd: Int32, _ address: sockaddr_in) -> Bool {
        var address = address
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }

    /// connect(2) to `address`; false when it failed (errno says why).
    package static func connectTo(_ fd: Int32, _ address: sockaddr_in) -> Bool {
        var address = address
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }

    /// The port a bound socket has (the one the kernel chose for port 0).
    package static func localPort(_ fd: Int32) -> UInt16 {
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: actual.sin_port)
    }

    /// A connected socket's peer (`getpeername`) and its own end (`getsockname`), nil when unknown or not IPv4.
    static func peerEndpoint(_ fd: Int32) -> UDPPeer? { endpoint(fd, getpeername) }
    static func localEndpoint(_ fd: Int32) -> UDPPeer? { endpoint(fd, getsockname) }

    static func endpoint(
        _ fd: Int32,
        _ name: (Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?) -> Int32
    ) -> UDPPeer? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let got = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { name(fd, $0, &length) }
        }
        guard got == 0, address.sin_family == sa_family_t(AF_INET) else { return nil }
        return UDPPeer(address: UInt32(bigEndian: address.sin_addr.s_addr), port: UInt16(bigEndian: address.sin_port))
    }

    /// errno as text.
    static func errnoText() -> String { String(cString: strerror(errno)) }
}
