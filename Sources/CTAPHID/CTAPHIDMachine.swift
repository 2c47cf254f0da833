/// The device side of the CTAPHID transport of CTAP 2.1 §11.2 (USB HID) as a pure state machine.
///
/// The machine takes events (a report from the host, the passing of time, the authenticator's response or its
/// keepalive status) and returns the ``CTAPHIDAction``s to perform, in order. It does no I/O, reads no clock and
/// draws no randomness: `now` is a monotonic time since the device started, given by the caller, and channel ids
/// come from the injected seed. Every entry point also processes what ``tick(now:)`` would: ``receive(report:now:)``
/// before the report, ``complete(channel:payload:now:)`` and ``setKeepaliveStatus(_:now:)`` after their own work.
///
/// ## Framing
///
/// Reports are 64 bytes; a report of 5 to 63 bytes is zero-padded, any other length is dropped (only due timers are
/// processed). Channel id 0xFFFFFFFF is the broadcast channel, channel id 0 is invalid. Channel ids that were never
/// allocated are accepted like allocated ones. One message is reassembled at a time, and one request (`MSG` or
/// `CBOR`) is in flight at a time.
///
/// ## Commands
///
/// - `INIT` (broadcast or any channel): the payload is an 8-byte nonce. The answer, on the channel the request came
///   on, is 17 bytes: `nonce(8) | CID(4) | 2 | major | minor | build | capabilities`, where `CID` is a fresh
///   channel id for a broadcast request and the request's own channel otherwise (a resynchronisation). `INIT` on a
///   channel that is mid-message discards the partial message; on the busy channel it emits
///   ``CTAPHIDAction/abort(channel:)`` and clears the busy state. `INIT` is never refused as busy or locked.
/// - `PING` echoes its payload. `WINK` emits ``CTAPHIDAction/wink`` and answers with an empty `WINK`.
/// - `LOCK` takes one byte, a number of seconds 0–10: the channel holds the lock for that long (counted from the
///   request, renewed by a new `LOCK`), `LOCK 0` releases it. While held, messages other than `INIT` and `CANCEL`
///   from every other channel get `ERR_CHANNEL_BUSY`. The answer is an empty `LOCK`.
/// - `MSG` and `CBOR` are reassembled and emitted as ``CTAPHIDAction/deliver(channel:command:payload:)``; the
///   response given to ``complete(channel:payload:now:)`` is sent with the request's command.
/// - `CANCEL` on the busy channel emits ``CTAPHIDAction/cancel(channel:)``; it is never answered.
///
/// Errors are listed in ``CTAPHIDError``. An init packet is checked in this order, the first match deciding:
/// CID 0, or the broadcast CID with a command other than `INIT` (`ERR_INVALID_CHANNEL`); `INIT`; the channel is
/// mid-message (`ERR_INVALID_SEQ`); `CANCEL`; another channel holds the lock, a request is in flight, or another
/// channel is mid-message (`ERR_CHANNEL_BUSY`); an unknown or device-only command (`ERR_INVALID_CMD`); the length
/// (`ERR_INVALID_LEN`); the command's own parameters (`LOCK` over 10 s: `ERR_INVALID_PAR`).
///
/// ## Timing
///
/// - Message timeout, 750 ms by default: an unfinished message whose last packet came at `t` is dropped with
///   `ERR_MSG_TIMEOUT` at `t + 750 ms`.
/// - Keepalive interval, 75 ms by default: a request delivered at `t` gets a `KEEPALIVE` at `t + 75 ms`,
///   `t + 150 ms`, … with the current status (`PROCESSING` until the authenticator says otherwise).
/// - UP needed: when the status changes to `UPNEEDED` at `u`, one `KEEPALIVE` goes out at once, then at `u + 75 ms`,
///   `u + 150 ms`, …
/// - Lock, 0–10 s: a `LOCK n` at `t` holds until `t + n` seconds.
///
/// A deadline is reached when `now >= deadline`; ``nextDeadline`` is the earliest one. A late tick sends one
/// `KEEPALIVE`, never a burst for missed ones; the next is due one interval after the deadline it served, or one
/// interval after the tick if that time has passed too.
package struct CTAPHIDMachine: Sendable, Equatable {
    /// The broadcast channel id, 0xFFFFFFFF, which only accepts `INIT`.
    package static let broadcastChannel: UInt32 = 0xFFFF_FFFF
    /// The size of every report, 64 bytes.
    package static let reportSize = CTAPHIDPacket.reportSize
    /// The longest payload framing can carry, 57 + 128 × 59 = 7609 bytes.
    package static let maximumPayloadSize = CTAPHIDPacket.maximumPayloadSize
    /// The CTAPHID protocol version reported by `INIT`, 2.
    package static let protocolVersion: UInt8 = 2
    /// The longest `LOCK` accepted, in seconds.
    package static let maximumLockSeconds: UInt8 = 10

    /// The timings, size limit and device description in use.
    package let configuration: CTAPHIDConfiguration

    var allocator: ChannelAllocator
    var reassembly: Reassembly?
    var transaction: Transaction?
    var lock: ChannelLock?

    /// Creates an idle machine whose channel ids are keyed by 128 bits (``ChannelAllocator``; give it 16 bytes from
    /// a CSPRNG).
    package init(configuration: CTAPHIDConfiguration = .init(), channelKey: [UInt8]) {
        self.configuration = configuration
        let bytes = channelKey + Array(repeating: 0, count: max(0, 16 - channelKey.count))
        let word = { (at: Int) in bytes[at..<at + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        self.allocator = ChannelAllocator(key0: word(0), key1: word(8))
    }

    /// Creates an idle machine whose channel ids follow from a 32-bit seed (tests that want the same ids every run).
    package init(configuration: CTAPHIDConfiguration = .init(), channelSeed: UInt32) {
        self.configuration = configuration
        self.allocator = ChannelAllocator(seed: channelSeed)
    }

    /// Splits a message into the zero-padded 64-byte reports that carry it (at most 7609 bytes), as a host
    /// sends it; for in-package host-side tools such as the benchmark.
    package static func reports(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8]) -> [[UInt8]] {
        CTAPHIDPacket.reports(channel: channel, command: command.rawValue, payload: payload)
    }

    /// The channel whose request is in flight, if any.
    package var busyChannel: UInt32? {
        self.transaction?.channel
    }

    /// The channel that holds the lock, if any (an expired lock counts until the next event).
    package var lockedChannel: UInt32? {
        self.lock?.channel
    }

    /// The channel whose message is being reassembled, if any.
    package var assemblingChannel: UInt32? {
        self.reassembly?.channel
    }

    /// The earliest time at which ``tick(now:)`` has something to do, or `nil` if nothing is pending.
    ///
    /// This is the minimum of the message timeout of a partial message, the next keepalive of a request in flight
    /// and the expiry of the lock.
    package var nextDeadline: Duration? {
        let deadlines = [
            self.reassembly.map { $0.lastPacketAt + self.configuration.messageTimeout },
            self.transaction?.nextKeepaliveAt,
            self.lock?.expiresAt,
        ]
        return deadlines.compactMap { $0 }.min()
    }

    /// Handles one report from the host after processing due timers.
    package mutating func receive(report: [UInt8], now: Duration) -> [CTAPHIDAction] {
        var actions = self.tick(now: now)
        guard let packet = CTAPHIDPacket(report: report) else {
            return actions
        }
        switch packet {
        case .initialization(let packet):
            self.handle(packet, now: now, into: &actions)
        case .continuation(let packet):
            self.handle(packet, now: now, into: &actions)
        }
        return actions
    }

    /// Processes timers due at `now`: message timeout, lock expiry and keepalive, in that order.
    package mutating func tick(now: Duration) -> [CTAPHIDAction] {
        var actions: [CTAPHIDAction] = []
        if let reassembly = self.reassembly, now >= reassembly.lastPacketAt + self.configuration.messageTimeout {
            self.reassembly = nil
            actions.append(Self.error(.messageTimeout, channel: reassembly.channel))
        }
        if let lock = self.lock, now >= lock.expiresAt {
            self.lock = nil
        }
        if var transaction = self.transaction, let due = transaction.nextKeepaliveAt, now >= due {
            actions.append(Self.keepalive(transaction.status, channel: transaction.channel))
            var next = due + self.configuration.keepaliveInterval
            if next <= now {
                next = now + self.configuration.keepaliveInterval
            }
            transaction.nextKeepaliveAt = next
            self.transaction = transaction
        }
        return actions
    }

    /// Sends the authenticator's response to the request in flight on `channel`, then processes due timers.
    ///
    /// The response goes out with the request's command (`MSG` or `CBOR`) and ends the busy state. It is ignored when
    /// `channel` has no request in flight (after an abort or a power cycle). A payload longer than 7609 bytes cannot
    /// be framed and is answered with `ERR_OTHER` instead.
    package mutating func complete(channel: UInt32, payload: [UInt8], now: Duration) -> [CTAPHIDAction] {
        var actions: [CTAPHIDAction] = []
        if let transaction = self.transaction, transaction.channel == channel {
            self.transaction = nil
            if payload.count <= Self.maximumPayloadSize {
                actions += Self.message(channel: channel, command: transaction.command.rawValue, payload: payload)
            } else {
                actions.append(Self.error(.other, channel: channel))
            }
        }
        return actions + self.tick(now: now)
    }

    /// Records what the authenticator is doing for the request in flight, then processes due timers.
    ///
    /// When the status changes to ``KeepaliveStatus/upNeeded``, or from it back to ``KeepaliveStatus/processing`` (a
    /// long touch has counted: the person may let go), one `KEEPALIVE` goes out at once and the next one is due an
    /// interval later. Ignored while no request is in flight; each request starts as ``KeepaliveStatus/processing``.
    package mutating func setKeepaliveStatus(_ status: KeepaliveStatus, now: Duration) -> [CTAPHIDAction] {
        var actions: [CTAPHIDAction] = []
        if var transaction = self.transaction {
            let changed = status != transaction.status
            transaction.status = status
            if changed {
                actions.append(Self.keepalive(status, channel: transaction.channel))
                if transaction.nextKeepaliveAt != nil {
                    transaction.nextKeepaliveAt = now + self.configuration.keepaliveInterval
                }
            }
            self.transaction = transaction
        }
        return actions + self.tick(now: now)
    }

    /// Forgets the lock, any partial message and the request in flight, as a power cut does.
    ///
    /// Channel ids handed out before are still never handed out again.
    package mutating func powerCycle() {
        self.reassembly = nil
        self.transaction = nil
        self.lock = nil
    }
}

extension CTAPHIDMachine {
    /// A message being reassembled from continuation packets.
    struct Reassembly: Sendable, Equatable {
        var channel: UInt32
        var command: CTAPHIDCommand
        var length: Int
        var payload: [UInt8]
        var nextSequence: UInt8
        var lastPacketAt: Duration
    }

    /// A request delivered to the authenticator and not yet completed.
    struct Transaction: Sendable, Equatable {
        var channel: UInt32
        var command: CTAPHIDCommand
        var status: KeepaliveStatus
        /// `nil` when keepalives are disabled.
        var nextKeepaliveAt: Duration?
    }

    /// The channel lock taken with `LOCK`.
    struct ChannelLock: Sendable, Equatable {
        var channel: UInt32
        var expiresAt: Duration
    }
}
