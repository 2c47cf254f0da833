package import VirtualKey

/// Which local users own the sockets a peer may be speaking from, read from the kernel's socket tables
/// (`/proc/net/udp`, `udp6`, `tcp`, `tcp6`: every socket with its local and remote address and its owner's uid).
///
/// Pure: the tables' text in, uids out. The kernel prints each 32-bit word of an address as the native integer its
/// network-order bytes make, so 127.0.0.1:8095 is `0100007F:1F9F` and `::ffff:127.0.0.1` ends in `FFFF0000 0100007F`.
package enum SocketTables {
    /// The owners of the UDP sockets a datagram from `peer` may have come from: bound to its port on its address, on
    /// any address, or on IPv6's any, IPv4-mapped or mapped-any address. Empty when no local socket has that port (a
    /// sender on another machine, or a socket already closed).
    package static func datagramOwners(of peer: UDPPeer, udp: String, udp6: String) -> [UInt32] {
        DatagramSockets(udp: udp, udp6: udp6).owners(of: peer)
    }

    /// The owners of the TCP sockets at the other end of a connection from `peer` to `server` (the local end's
    /// address and port as the server sees them): for the life of the connection, no other socket can have that
    /// address pair. Empty when no local socket is the peer (it is on another machine).
    package static func streamOwners(of peer: UDPPeer, server: UDPPeer, tcp: String, tcp6: String) -> [UInt32] {
        var uids: [UInt32] = []
        let port = ":" + hex16(peer.port) + " "
        for fields in rows(tcp, containing: port) {
            guard let local = ipv4Endpoint(fields[1]), let remote = ipv4Endpoint(fields[2]),
                local == (peer.address, peer.port), remote == (server.address, server.port),
                let uid = UInt32(fields[7])
            else { continue }
            uids.append(uid)
        }
        for fields in rows(tcp6, containing: port) {
            guard let local = ipv6Endpoint(fields[1]), let remote = ipv6Endpoint(fields[2]),
                local == (mapped(peer.address), peer.port), remote == (mapped(server.address), server.port),
                let uid = UInt32(fields[7])
            else { continue }
            uids.append(uid)
        }
        return uids
    }

    /// The fields of each socket's line that contains `text` (the first line is the header): a socket table can
    /// have thousands of lines, and only those with the port asked about are split.
    static func rows(_ table: String, containing text: String) -> [[Substring]] {
        table.split(separator: "\n").dropFirst().filter { $0.contains(text) }.map { $0.split(separator: " ") }
            .filter { $0.count > 7 }
    }

    /// `0100007F:1F9F` → 127.0.0.1, 8095.
    static func ipv4Endpoint(_ text: Substring) -> (UInt32, UInt16)? {
        let parts = text.split(separator: ":")
        guard parts.count == 2, parts[0].count == 8, let raw = UInt32(parts[0], radix: 16),
            let port = UInt16(parts[1], radix: 16)
        else { return nil }
        return (UInt32(bigEndian: raw), port)
    }

    /// An IPv6 endpoint as the kernel prints it: its 32 hex digits (upper case) and the port.
    static func ipv6Endpoint(_ text: Substring) -> (String, UInt16)? {
        let parts = text.split(separator: ":")
        guard parts.count == 2, parts[0].count == 32, let port = UInt16(parts[1], radix: 16) else { return nil }
        return (parts[0].uppercased(), port)
    }

    /// `::ffff:ADDRESS` as the kernel prints it.
    static func mapped(_ address: UInt32) -> String {
        "0000000000000000" + hex32(UInt32(0x0000_FFFF).bigEndian) + hex32(address.bigEndian)
    }

    /// Four upper-case hex digits (a port as the tables print it).
    static func hex16(_ value: UInt16) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: 4 - text.count) + text
    }

    /// Eight upper-case hex digits.
    static func hex32(_ value: UInt32) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: 8 - text.count) + text
    }
}

/// The kernel's UDP sockets by port, parsed once for a batch of datagrams (``SocketTables``).
package struct DatagramSockets: Sendable {
    /// For each port, the IPv4 address each socket is bound to (0: any, which IPv6's any and mapped-any are too) and
    /// its owner. Sockets bound to other IPv6 addresses cannot send from an IPv4 address and are left out.
    var byPort: [UInt16: [(address: UInt32, uid: UInt32)]] = [:]

    package init(udp: String, udp6: String) {
        for line in udp.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", maxSplits: 8)
            guard fields.count > 7, let (address, port) = SocketTables.ipv4Endpoint(fields[1]),
                let uid = UInt32(fields[7])
            else { continue }
            byPort[port, default: []].append((address, uid))
        }
        let any = String(repeating: "0", count: 32)
        let mappedPrefix = "0000000000000000" + SocketTables.hex32(UInt32(0x0000_FFFF).bigEndian)
        for line in udp6.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", maxSplits: 8)
            guard fields.count > 7, let (address, port) = SocketTables.ipv6Endpoint(fields[1]),
                let uid = UInt32(fields[7])
            else { continue }
            if address == any {
                byPort[port, default: []].append((0, uid))
            } else if address.hasPrefix(mappedPrefix), let raw = UInt32(address.suffix(8), radix: 16) {
                byPort[port, default: []].append((UInt32(bigEndian: raw), uid))
            }
        }
    }

    /// The owners of the sockets a datagram from `peer` may have come from.
    package func owners(of peer: UDPPeer) -> [UInt32] {
        (byPort[peer.port] ?? []).filter { $0.address == peer.address || $0.address == 0 }.map(\.uid)
    }
}
