extension CTAPHIDMachine {
    /// The message size limit in force: the configured one, capped by what framing can carry.
    var messageSizeLimit: Int {
        min(self.configuration.maxMessageSize, Self.maximumPayloadSize)
    }

    /// Handles the first packet of a message.
    mutating func handle(_ packet: InitializationPacket, now: Duration, into actions: inout [CTAPHIDAction]) {
        let channel = packet.channel
        let command = CTAPHIDCommand(rawValue: packet.command)
        if channel == 0 || (channel == Self.broadcastChannel && command != .initialize) {
            actions.append(Self.error(.invalidChannel, channel: channel))
            return
        }
        if command == .initialize {
            self.handleInitialize(packet, into: &actions)
            return
        }
        if self.reassembly?.channel == channel {
            self.reassembly = nil
            actions.append(Self.error(.invalidSequence, channel: channel))
            return
        }
        if command == .cancel {
            if self.transaction?.channel == channel {
                actions.append(.cancel(channel: channel))
            }
            return
        }
        if let lock = self.lock, lock.channel != channel {
            actions.append(Self.error(.channelBusy, channel: channel))
            return
        }
        if self.transaction != nil || self.reassembly != nil {
            actions.append(Self.error(.channelBusy, channel: channel))
            return
        }
        guard let command, accepts(command) else {
            actions.append(Self.error(.invalidCommand, channel: channel))
            return
        }
        guard packet.length <= self.messageSizeLimit, Self.isValidLength(packet.length, for: command) else {
            actions.append(Self.error(.invalidLength, channel: channel))
            return
        }
        if packet.length <= CTAPHIDPacket.initializationDataSize {
            let payload = Array(packet.data[0..<packet.length])
            self.finish(channel: channel, command: command, payload: payload, now: now, into: &actions)
        } else {
            var payload = packet.data
            payload.reserveCapacity(packet.length)
            self.reassembly = Reassembly(
                channel: channel,
                command: command,
                length: packet.length,
                payload: payload,
                nextSequence: 0,
                lastPacketAt: now
            )
        }
    }

    /// Handles a continuation packet: appends it to the message of its channel, or ignores it as stray.
    mutating func handle(_ packet: ContinuationPacket, now: Duration, into actions: inout [CTAPHIDAction]) {
        let channel = packet.channel
        if channel == 0 || channel == Self.broadcastChannel {
            actions.append(Self.error(.invalidChannel, channel: channel))
            return
        }
        guard var reassembly = self.reassembly, reassembly.channel == channel else {
            return
        }
        guard packet.sequence == reassembly.nextSequence else {
            self.reassembly = nil
            actions.append(Self.error(.invalidSequence, channel: channel))
            return
        }
        // Taken out of self while it grows, so that appending does not copy the message so far.
        self.reassembly = nil
        let remaining = reassembly.length - reassembly.payload.count
        reassembly.payload += packet.data.prefix(remaining)
        if reassembly.payload.count == reassembly.length {
            self.finish(
                channel: channel,
                command: reassembly.command,
                payload: reassembly.payload,
                now: now,
                into: &actions
            )
        } else {
            // A message of at most 7609 bytes ends by sequence 0x7F, so this never goes past 0x7F.
            reassembly.nextSequence += 1
            reassembly.lastPacketAt = now
            self.reassembly = reassembly
        }
    }

    /// Answers `INIT`: allocates a channel (broadcast) or resynchronises the channel it came on.
    mutating func handleInitialize(_ packet: InitializationPacket, into actions: inout [CTAPHIDAction]) {
        let channel = packet.channel
        guard packet.length == 8 else {
            actions.append(Self.error(.invalidLength, channel: channel))
            return
        }
        if self.reassembly?.channel == channel {
            self.reassembly = nil
        }
        if self.transaction?.channel == channel {
            self.transaction = nil
            actions.append(.abort(channel: channel))
        }
        let assigned = channel == Self.broadcastChannel ? self.allocator.next() : channel
        var payload = Array(packet.data[0..<8]) + assigned.bigEndianBytes
        payload += [
            Self.protocolVersion,
            self.configuration.deviceVersionMajor,
            self.configuration.deviceVersionMinor,
            self.configuration.deviceVersionBuild,
            self.configuration.capabilities,
        ]
        actions += Self.message(channel: channel, command: CTAPHIDCommand.initialize.rawValue, payload: payload)
    }

    /// Acts on a whole message from the host (`PING`, `MSG`, `CBOR`, `WINK` or `LOCK`).
    mutating func finish(
        channel: UInt32,
        command: CTAPHIDCommand,
        payload: [UInt8],
        now: Duration,
        into actions: inout [CTAPHIDAction]
    ) {
        switch command {
        case .msg, .cbor:
            actions.append(.deliver(channel: channel, command: command, payload: payload))
            let interval = self.configuration.keepaliveInterval
            self.transaction = Transaction(
                channel: channel,
                command: command,
                status: .processing,
                nextKeepaliveAt: interval > .zero ? now + interval : nil
            )
        case .wink:
            actions.append(.wink)
            actions += Self.message(channel: channel, command: command.rawValue, payload: [])
        case .lock:
            let seconds = payload[0]
            guard seconds <= Self.maximumLockSeconds else {
                actions.append(Self.error(.invalidParameter, channel: channel))
                return
            }
            if seconds == 0 {
                if self.lock?.channel == channel {
                    self.lock = nil
                }
            } else {
                self.lock = ChannelLock(channel: channel, expiresAt: now + .seconds(Int(seconds)))
            }
            actions += Self.message(channel: channel, command: command.rawValue, payload: [])
        case .ping:
            actions += Self.message(channel: channel, command: command.rawValue, payload: payload)
        case .initialize, .cancel, .keepalive, .error:
            // Filtered out before reassembly; answering like an unknown command keeps this total.
            actions.append(Self.error(.invalidCommand, channel: channel))
        }
    }

    /// Whether the host may send `command` as a message: everything but `KEEPALIVE` and `ERROR`, and not `CBOR`
    /// or `MSG` when the capabilities say the device lacks it (`CAPABILITY_CBOR` clear, `CAPABILITY_NMSG` set).
    func accepts(_ command: CTAPHIDCommand) -> Bool {
        switch command {
        case .keepalive, .error: false
        case .cbor: configuration.capabilities & CTAPHIDConfiguration.capabilityCBOR != 0
        case .msg: configuration.capabilities & CTAPHIDConfiguration.capabilityNMSG == 0
        default: true
        }
    }

    /// Whether `length` suits `command` (the size limit is checked separately).
    static func isValidLength(_ length: Int, for command: CTAPHIDCommand) -> Bool {
        switch command {
        case .msg, .cbor: length > 0
        case .lock: length == 1
        case .wink: length == 0
        case .initialize: length == 8
        case .ping, .cancel, .keepalive, .error: true
        }
    }

    /// The reports of a whole message as ``CTAPHIDAction/send(_:)`` actions.
    static func message(channel: UInt32, command: UInt8, payload: [UInt8]) -> [CTAPHIDAction] {
        CTAPHIDPacket.reports(channel: channel, command: command, payload: payload).map { .send($0) }
    }

    /// The `ERROR` report carrying `error` on `channel`.
    static func error(_ error: CTAPHIDError, channel: UInt32) -> CTAPHIDAction {
        .send(
            CTAPHIDPacket.reports(channel: channel, command: CTAPHIDCommand.error.rawValue, payload: [error.rawValue])[
                0
            ]
        )
    }

    /// The `KEEPALIVE` report carrying `status` on `channel`.
    static func keepalive(_ status: KeepaliveStatus, channel: UInt32) -> CTAPHIDAction {
        .send(
            CTAPHIDPacket.reports(
                channel: channel,
                command: CTAPHIDCommand.keepalive.rawValue,
                payload: [status.rawValue]
            )[0]
        )
    }
}
