import CTAPCBOR
import FIDOClient

/// CTAPHID transport checks (CTAP 2.1 §11.2).
enum HIDChecks {
    static func expectError(_ message: HIDMessage, _ code: UInt8, _ what: String) throws {
        guard message.command == HIDCommand.error, message.payload.first == code else {
            throw CheckFailure(
                what,
                expected: "ERROR 0x\(Hex.string(code))",
                actual: "command 0x\(Hex.string(message.command)) payload \(Hex.string(message.payload.prefix(8)))"
            )
        }
    }

    /// A channel number no INIT gave out.
    static func unallocatedChannel(_ ctx: ConformanceContext) -> UInt32 {
        var cid: UInt32 = 0
        repeat {
            cid = UInt32.random(in: 0x1000_0000...0x7FFF_FFFF)
        } while cid == (try? ctx.hid)?.cid
        return cid
    }

    static let all: [ConformanceCheck] = [
        ConformanceCheck(
            "hid.init.allocate",
            .hid,
            "CTAP 2.1 §11.2.9.1.3",
            "INIT on the broadcast channel allocates a channel"
        ) { ctx in
            let nonce = randomBytes(8)
            let answer = try (try ctx.hid).transact(
                command: HIDCommand.initialize,
                payload: nonce,
                on: CTAPHIDClient.broadcast,
                timeoutMs: 2000
            )
            try ctx.require(
                answer.command == HIDCommand.initialize,
                "INIT is answered with INIT",
                actual: "0x\(Hex.string(answer.command))"
            )
            try ctx.require(
                answer.payload.count >= 17,
                "the INIT answer has 17 bytes",
                actual: "\(answer.payload.count)"
            )
            let parsed = try CTAPHIDClient.parseInit(answer, nonce: nonce)
            try ctx.require(
                parsed.channel != 0 && parsed.channel != CTAPHIDClient.broadcast,
                "the new channel is neither 0 nor broadcast",
                actual: String(parsed.channel, radix: 16)
            )
            try ctx.require(
                parsed.protocolVersion == 2,
                "CTAPHID protocol version 2",
                actual: "\(parsed.protocolVersion)"
            )
        },
        ConformanceCheck("hid.init.distinct", .hid, "CTAP 2.1 §11.2.3", "two INITs get two different channels") { ctx in
            let a = try ctx.newChannel()
            let b = try ctx.newChannel()
            try ctx.require(a.cid != b.cid, "distinct channel IDs", actual: "\(String(a.cid, radix: 16)) twice")
        },
        ConformanceCheck(
            "hid.init.resync",
            .hid,
            "CTAP 2.1 §11.2.9.1.3",
            "INIT on an allocated channel answers on that channel with its ID"
        ) { ctx in
            let nonce = randomBytes(8)
            let answer = try (try ctx.hid).transact(command: HIDCommand.initialize, payload: nonce, timeoutMs: 2000)
            let parsed = try CTAPHIDClient.parseInit(answer, nonce: nonce)
            try ctx.require(
                parsed.channel == (try ctx.hid).cid,
                "the channel keeps its ID",
                expected: String((try ctx.hid).cid, radix: 16),
                actual: String(parsed.channel, radix: 16)
            )
        },
        ConformanceCheck("hid.init.abort", .hid, "CTAP 2.1 §11.2.5.3", "INIT in the middle of a message discards it") {
            ctx in
            let payload = randomBytes(100)
            let reports = CTAPHIDClient.reports(channel: (try ctx.hid).cid, command: HIDCommand.ping, payload: payload)
            try (try ctx.hid).channel.send(reports[0])
            let nonce = randomBytes(8)
            let answer = try (try ctx.hid).transact(command: HIDCommand.initialize, payload: nonce, timeoutMs: 2000)
            _ = try CTAPHIDClient.parseInit(answer, nonce: nonce)
            let echo = try (try ctx.hid).transact(command: HIDCommand.ping, payload: [9, 8, 7], timeoutMs: 2000)
            try ctx.require(
                echo.payload == [9, 8, 7],
                "a new PING after the INIT is answered alone",
                actual: Hex.string(echo.payload)
            )
        },
        ConformanceCheck(
            "hid.ping.sizes",
            .hid,
            "CTAP 2.1 §11.2.9.1.4",
            "PING echoes payloads from 0 bytes to the largest message"
        ) { ctx in
            for size in [0, 1, 56, 57, 58, 116, 117, 1024, CTAPHIDClient.maxPayload] {
                let payload = randomBytes(size)
                let answer = try (try ctx.hid).transact(command: HIDCommand.ping, payload: payload, timeoutMs: 5000)
                try ctx.require(
                    answer.command == HIDCommand.ping && answer.payload == payload,
                    "PING of \(size) bytes is echoed",
                    actual: "command 0x\(Hex.string(answer.command)), \(answer.payload.count) bytes"
                )
            }
        },
        ConformanceCheck(
            "hid.length.too-long",
            .hid,
            "CTAP 2.1 §11.2.4",
            "a message longer than 7609 bytes gets ERR_INVALID_LEN"
        ) { ctx in
            let report = CTAPHIDClient.reports(
                channel: (try ctx.hid).cid,
                command: HIDCommand.ping,
                payload: randomBytes(57),
                length: CTAPHIDClient.maxPayload + 1
            )[0]
            try (try ctx.hid).channel.send(report)
            try expectError(
                try (try ctx.hid).receive(timeoutMs: 2000),
                HIDErrorCode.invalidLength,
                "a declared length of 7610"
            )
        },
        ConformanceCheck("hid.command.unknown", .hid, "CTAP 2.1 §11.2.9.1.6", "an unknown command gets ERR_INVALID_CMD")
        { ctx in
            let answer = try (try ctx.hid).transact(command: 0xA0, payload: [1], timeoutMs: 2000)
            try expectError(answer, HIDErrorCode.invalidCommand, "command 0x20")
        },
        ConformanceCheck("hid.channel.zero", .hid, "CTAP 2.1 §11.2.3", "channel 0 is reserved: ERR_INVALID_CHANNEL") {
            ctx in
            let answer = try (try ctx.hid).transact(command: HIDCommand.ping, payload: [1], on: 0, timeoutMs: 2000)
            try expectError(answer, HIDErrorCode.invalidChannel, "PING on channel 0")
        },
        ConformanceCheck(
            "hid.channel.broadcast",
            .hid,
            "CTAP 2.1 §11.2.3",
            "the broadcast channel takes only INIT: ERR_INVALID_CHANNEL"
        ) { ctx in
            let answer = try (try ctx.hid).transact(
                command: HIDCommand.ping,
                payload: [1],
                on: CTAPHIDClient.broadcast,
                timeoutMs: 2000
            )
            try expectError(answer, HIDErrorCode.invalidChannel, "PING on the broadcast channel")
        },
        ConformanceCheck(
            "hid.channel.unallocated",
            .hid,
            "CTAP 2.1 §11.2.3",
            "a channel no INIT allocated is served or refused with ERR_INVALID_CHANNEL, never left silent"
        ) { ctx in
            let answer = try (try ctx.hid).transact(
                command: HIDCommand.ping,
                payload: [1],
                on: unallocatedChannel(ctx),
                timeoutMs: 2000
            )
            if answer.command == HIDCommand.ping {
                try ctx.require(answer.payload == [1], "the PING is echoed", actual: Hex.string(answer.payload))
                ctx.notes.append("hid.channel.unallocated: the key serves channels it did not allocate")
            } else {
                try expectError(answer, HIDErrorCode.invalidChannel, "PING on an unallocated channel")
            }
        },
        ConformanceCheck(
            "hid.sequence.wrong",
            .hid,
            "CTAP 2.1 §11.2.5.4",
            "a continuation out of sequence gets ERR_INVALID_SEQ"
        ) { ctx in
            var reports = CTAPHIDClient.reports(
                channel: (try ctx.hid).cid,
                command: HIDCommand.ping,
                payload: randomBytes(100)
            )
            reports[1][4] = 1
            for report in reports { try (try ctx.hid).channel.send(report) }
            try expectError(
                try (try ctx.hid).receive(timeoutMs: 2000),
                HIDErrorCode.invalidSequence,
                "continuation 1 where 0 was due"
            )
        },
        ConformanceCheck(
            "hid.continuation.spurious",
            .hid,
            "CTAP 2.1 §11.2.5.4",
            "a continuation with no message under way is ignored"
        ) { ctx in
            try (try ctx.hid).channel.send(
                CTAPHIDClient.pad(CTAPHIDClient.channelBytes((try ctx.hid).cid) + [0] + randomBytes(20))
            )
            if let stray = try? (try ctx.hid).receive(timeoutMs: 300) {
                throw CheckFailure(
                    "no answer to a lone continuation packet",
                    actual: "command 0x\(Hex.string(stray.command)) \(Hex.string(stray.payload))"
                )
            }
            let echo = try (try ctx.hid).transact(command: HIDCommand.ping, payload: [5], timeoutMs: 2000)
            try ctx.require(echo.payload == [5], "PING works after it", actual: Hex.string(echo.payload))
        },
        ConformanceCheck(
            "hid.channel.busy",
            .hid,
            "CTAP 2.1 §11.2.5.1",
            "another channel's request while a message is under way gets ERR_CHANNEL_BUSY"
        ) { ctx in
            let other = try ctx.newChannel()
            let payload = randomBytes(100)
            let reports = CTAPHIDClient.reports(channel: (try ctx.hid).cid, command: HIDCommand.ping, payload: payload)
            try (try ctx.hid).channel.send(reports[0])
            let busy = try other.transact(command: HIDCommand.ping, payload: [1], timeoutMs: 2000)
            try expectError(busy, HIDErrorCode.channelBusy, "PING on a second channel during a message on the first")
            try (try ctx.hid).channel.send(reports[1])
            let echo = try (try ctx.hid).receive(timeoutMs: 2000)
            try ctx.require(
                echo.payload == payload,
                "the first channel's message completes",
                actual: Hex.string(echo.payload.prefix(8))
            )
        },
        ConformanceCheck(
            "hid.message.timeout",
            .hid,
            "CTAP 2.1 §11.2.5.2",
            "a message left unfinished gets ERR_MSG_TIMEOUT"
        ) { ctx in
            let reports = CTAPHIDClient.reports(
                channel: (try ctx.hid).cid,
                command: HIDCommand.ping,
                payload: randomBytes(100)
            )
            let start = CTAPHIDClient.nowMs()
            try (try ctx.hid).channel.send(reports[0])
            let answer = try (try ctx.hid).receive(timeoutMs: 5000)
            try expectError(answer, HIDErrorCode.messageTimeout, "no continuation after the initialization packet")
            ctx.notes.append("hid.message.timeout: ERR_MSG_TIMEOUT after \(Int(CTAPHIDClient.nowMs() - start)) ms")
        },
        ConformanceCheck(
            "hid.wink",
            .hid,
            "CTAP 2.1 §11.2.9.2.1",
            "WINK is answered when the WINK capability is set, refused otherwise"
        ) { ctx in
            let answer = try (try ctx.hid).transact(command: HIDCommand.wink, payload: [], timeoutMs: 2000)
            if (try ctx.hid).info?.wink == true {
                try ctx.require(
                    answer.command == HIDCommand.wink && answer.payload.isEmpty,
                    "WINK answered with an empty WINK",
                    actual: "command 0x\(Hex.string(answer.command)) \(Hex.string(answer.payload))"
                )
            } else {
                try expectError(answer, HIDErrorCode.invalidCommand, "WINK without the capability")
            }
        },
        ConformanceCheck("hid.lock", .hid, "CTAP 2.1 §11.2.9.2.2", "LOCK keeps other channels out until released") {
            ctx in
            let other = try ctx.newChannel()
            let lock = try (try ctx.hid).transact(command: HIDCommand.lock, payload: [3], timeoutMs: 2000)
            if lock.command == HIDCommand.error, lock.payload.first == HIDErrorCode.invalidCommand {
                throw CheckSkip("the key does not implement the optional LOCK")
            }
            try ctx.require(
                lock.command == HIDCommand.lock,
                "LOCK answered with LOCK",
                actual: "0x\(Hex.string(lock.command))"
            )
            let busy = try other.transact(command: HIDCommand.ping, payload: [1], timeoutMs: 2000)
            try expectError(busy, HIDErrorCode.channelBusy, "PING from another channel while locked")
            let mine = try (try ctx.hid).transact(command: HIDCommand.ping, payload: [2], timeoutMs: 2000)
            try ctx.require(
                mine.payload == [2],
                "the locking channel is still served",
                actual: Hex.string(mine.payload)
            )
            let release = try (try ctx.hid).transact(command: HIDCommand.lock, payload: [0], timeoutMs: 2000)
            try ctx.require(
                release.command == HIDCommand.lock,
                "LOCK 0 releases",
                actual: "0x\(Hex.string(release.command))"
            )
            let after = try other.transact(command: HIDCommand.ping, payload: [3], timeoutMs: 2000)
            try ctx.require(
                after.payload == [3],
                "other channels are served after the release",
                actual: Hex.string(after.payload)
            )
        },
        ConformanceCheck(
            "hid.capabilities.cbor",
            .hid,
            "CTAP 2.1 §11.2.9.1.3",
            "the CBOR capability matches whether CTAPHID_CBOR works"
        ) { ctx in
            let answer = try (try ctx.hid).transact(
                command: HIDCommand.cbor,
                payload: [CTAPCommand.getInfo],
                timeoutMs: 5000
            )
            if (try ctx.hid).info?.cbor == true {
                try ctx.require(
                    answer.command == HIDCommand.cbor && answer.payload.first == 0,
                    "getInfo over CTAPHID_CBOR succeeds",
                    actual: "command 0x\(Hex.string(answer.command)) \(Hex.string(answer.payload.prefix(4)))"
                )
            } else {
                try expectError(answer, HIDErrorCode.invalidCommand, "CTAPHID_CBOR without the capability")
            }
        },
        ConformanceCheck(
            "hid.capabilities.nmsg",
            .hid,
            "CTAP 2.1 §11.2.9.1.3",
            "NMSG is clear exactly when getInfo lists U2F_V2"
        ) { ctx in
            let nmsg = (try ctx.hid).info?.noMessage ?? true
            try ctx.require(
                nmsg != ctx.info.versions.contains("U2F_V2"),
                "NMSG and U2F_V2 agree",
                actual: "NMSG \(nmsg), versions \(ctx.info.versions)"
            )
            if nmsg {
                let answer = try (try ctx.hid).transact(
                    command: HIDCommand.msg,
                    payload: U2FMessage.apdu(ins: U2FMessage.version, data: [])
                )
                try expectError(answer, HIDErrorCode.invalidCommand, "CTAPHID_MSG with NMSG set")
            }
        },
        ConformanceCheck(
            "hid.keepalive.cadence",
            .hid,
            "CTAP 2.1 §11.2.9.1.7",
            "a request waiting for a touch sends UPNEEDED keepalives about every 100 ms",
            requires: [.version("FIDO_2_1")]
        ) { ctx in
            try ctx.deviceOperator.holdTouch()
            try (try ctx.hid).send(command: HIDCommand.cbor, payload: [CTAPCommand.selection])
            let start = CTAPHIDClient.nowMs()
            var times: [Double] = []
            var statuses: Set<UInt8> = []
            while CTAPHIDClient.nowMs() - start < 1500 {
                guard let report = try (try ctx.hid).channel.receive(timeoutMs: 300) else { continue }
                guard report.count >= 8, Array(report[0..<4]) == CTAPHIDClient.channelBytes((try ctx.hid).cid) else {
                    continue
                }
                if report[4] == HIDCommand.keepalive {
                    times.append(CTAPHIDClient.nowMs())
                    statuses.insert(report[7])
                } else {
                    throw CheckFailure(
                        "the request keeps waiting",
                        actual: "command 0x\(Hex.string(report[4])) \(Hex.string(report.dropFirst(5).prefix(4)))"
                    )
                }
            }
            try (try ctx.hid).cancel()
            _ = try? (try ctx.hid).receive(timeoutMs: 2000)
            try ctx.require(times.count >= 2, "keepalives while waiting", actual: "\(times.count) in 1.5 s")
            try ctx.require(
                statuses.contains(2),
                "status UPNEEDED (2)",
                actual: statuses.map { "\($0)" }.joined(separator: ",")
            )
            let gaps = zip(times.dropFirst(), times).map { $0 - $1 }.sorted()
            let median = gaps[gaps.count / 2]
            let worst = gaps.last ?? 0
            ctx.notes.append(
                "hid.keepalive.cadence: \(times.count) keepalives in 1.5 s, median gap \(Int(median)) ms, largest \(Int(worst)) ms"
            )
            try ctx.require(
                median <= 150,
                "keepalives about every 100 ms",
                expected: "median gap <= 150 ms",
                actual: "\(Int(median)) ms"
            )
        },
        ConformanceCheck(
            "hid.cancel",
            .hid,
            "CTAP 2.1 §11.2.9.1.5",
            "CANCEL ends a request waiting for a touch with KEEPALIVE_CANCEL",
            requires: [.version("FIDO_2_1")]
        ) { ctx in
            try ctx.deviceOperator.holdTouch()
            try (try ctx.hid).send(command: HIDCommand.cbor, payload: [CTAPCommand.selection])
            let start = CTAPHIDClient.nowMs()
            var sawKeepalive = false
            while !sawKeepalive, CTAPHIDClient.nowMs() - start < 3000 {
                if let report = try (try ctx.hid).channel.receive(timeoutMs: 200), report.count > 4,
                    Array(report[0..<4]) == CTAPHIDClient.channelBytes((try ctx.hid).cid)
                {
                    sawKeepalive = report[4] == HIDCommand.keepalive
                }
            }
            try ctx.require(sawKeepalive, "the request waits (a keepalive comes first)")
            try (try ctx.hid).cancel()
            let answer = try (try ctx.hid).receive(timeoutMs: 2000)
            try ctx.require(
                answer.command == HIDCommand.cbor && answer.payload == [CTAPStatusCode.keepaliveCancel],
                "the request ends with CTAP2_ERR_KEEPALIVE_CANCEL",
                expected: "CBOR 2d",
                actual: "command 0x\(Hex.string(answer.command)) \(Hex.string(answer.payload))"
            )
        },
    ]
}
