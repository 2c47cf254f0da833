/// What a transport delivered.
package enum TransportEvent: Equatable, Sendable {
    /// One 64-byte report from a host (shorter or longer ones are passed on for the framing layer to judge): the
    /// first (0) unless the key is plugged into several (``JoinedTransport``).
    case report([UInt8], host: Int = 0)
    /// The host asked for a power cycle (UDP's magic datagram).
    case powerCycle
    /// The host let go of the device (a USB/IP detach, its connection gone): for a key with one host, an unplug.
    case detached
    /// One of several hosts let go of a key that another keeps powered (``JoinedTransport``): only that host's
    /// requests and CTAPHID state end.
    case hostLeft(Int)
    /// Something worth a log line (device opened or closed by the host, a refused feature report).
    case note(String)
}

/// What the card side of a key heard from the reader.
package enum CardEvent: Equatable, Sendable {
    /// The reader powered the card (it is in the field).
    case fieldOn
    /// The reader cut the power, or the connection to the reader went away.
    case fieldOff
    /// A command APDU.
    case apdu([UInt8])
    /// Something worth a log line (connected, lost the reader, a malformed stream).
    case note(String)
}
