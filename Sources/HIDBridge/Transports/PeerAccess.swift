import ControlProtocol

/// Who may reach the key: the one rule that every door (UDP, USB/IP, the card's reader, the control socket) asks
/// about each peer, with what the kernel says about it (firmware-spec/security.md, "Who may reach the key").
///
/// Pure: what is known about a peer in, a refusal (or none) out.
package struct PeerAccess: Sendable, Equatable {
    /// The key's own user.
    package var owner: UInt32
    /// Other local users' programs may use the key's transports too (`serve --any-local-user`); never the control
    /// socket, which can export the key's secrets.
    package var anyLocalUser: Bool
    /// Peers on other machines may use a transport whose address they reach (`serve --allow-remote`).
    package var allowRemote: Bool

    package init(owner: UInt32, anyLocalUser: Bool = false, allowRemote: Bool = false) {
        self.owner = owner
        self.anyLocalUser = anyLocalUser
        self.allowRemote = allowRemote
    }

    /// What the kernel says about a peer.
    package enum Peer: Sendable, Equatable {
        /// A Unix socket's peer: its uid from SO_PEERCRED, nil when it cannot be read.
        case unixSocket(uid: UInt32?)
        /// An IP peer: whether its address is a loopback one, and the owners of the local sockets that may be its
        /// socket (asked of the kernel, ``KernelSockets``; empty when no local socket is: a peer on another machine,
        /// or a socket already closed). `kernelAnswered` is false when the kernel could not be asked.
        case ip(loopback: Bool, socketOwners: [UInt32], kernelAnswered: Bool = true)
        /// A TCP peer whose connection is not established (closing, closed: the kernel gives such sockets to
        /// uid 0), or whose socket no process holds: refused whoever it was, before any of its bytes is read.
        case notEstablished(String)
    }

    /// The doors that differ: the control socket hears the owner only, whatever the options.
    package enum Door: Sendable, Equatable {
        case transport, control
    }

    /// Why `peer` may not reach `door`, as the end of a log line; nil when it may. Root may always: it can read the
    /// key's memory anyway.
    package func refusal(of peer: Peer, at door: Door = .transport) -> String? {
        let others = door == .transport && anyLocalUser
        switch peer {
        case .unixSocket(let uid):
            guard let uid else { return "its credentials cannot be read (SO_PEERCRED)" }
            return refusal(uid: uid, others: others)
        case .notEstablished(let why):
            return why
        case .ip(let loopback, let owners, let answered):
            guard answered else { return "the kernel cannot be asked who owns its socket, so its owner is unknown" }
            guard !owners.isEmpty else {
                if loopback { return "no local socket has its address (closed already)" }
                return allowRemote ? nil : "it is on another machine (serve --allow-remote lets other machines in)"
            }
            for uid in owners {
                if let refusal = refusal(uid: uid, others: others) { return refusal }
            }
            return nil
        }
    }

    /// Whether an IP peer is let in whoever it is (every local user's, and other machines' when they may): then
    /// the kernel need not be asked about it.
    package func admitsWithoutLookup(loopback: Bool) -> Bool { anyLocalUser && (loopback || allowRemote) }

    /// Whether `peer` may reach `door` (``refusal(of:at:)`` without the words, for a flood's hot path).
    package func admits(_ peer: Peer, at door: Door = .transport) -> Bool {
        let others = door == .transport && anyLocalUser
        switch peer {
        case .unixSocket(let uid):
            guard let uid else { return false }
            return uid == owner || uid == 0 || others
        case .notEstablished:
            return false
        case .ip(let loopback, let owners, let answered):
            guard answered else { return false }
            guard !owners.isEmpty else { return !loopback && allowRemote }
            return others || owners.allSatisfy { $0 == owner || $0 == 0 }
        }
    }

    func refusal(uid: UInt32, others: Bool) -> String? {
        guard uid != owner, uid != 0, !others else { return nil }
        return "uid \(uid) is not the key's user (uid \(owner))"
            + (others ? "" : "; serve --any-local-user lets every local user use the key")
    }

    /// The log line for a refused peer, the same on every door. It quotes what the peer sent (`peer`): like every
    /// transport note it is escaped once, where it is printed (``KeySlot``).
    package static func note(door: String, peer: String, refusal: String) -> String {
        "\(door): refused \(peer): \(refusal)"
    }
}

/// At most one refusal line a second per door, saying how many were left out, so that a flood of refused peers does
/// not flood the log.
package struct RefusalNotes: Sendable {
    var last: Duration?
    var unsaid = 0

    package init() {}

    /// Whether a line may be logged now.
    package func due(now: Duration) -> Bool { last.map { now - $0 >= .seconds(1) } ?? true }

    /// Counts a refusal that is not logged.
    package mutating func skip() { unsaid += 1 }

    /// The line to log now, or nil when one was logged less than a second ago.
    package mutating func line(_ text: String, now: Duration) -> String? {
        if let last, now - last < .seconds(1) {
            unsaid += 1
            return nil
        }
        last = now
        defer { unsaid = 0 }
        return unsaid == 0 ? text : "\(text) (and \(unsaid) more refused since the last line)"
    }
}
