import CTAPCBOR
import CTAPCore
import ControlProtocol
package import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// Records every HID report with its time and direction, and each decoded CTAP request and response: as JSON
/// lines, or as pcapng that Wireshark and tshark open (link type USER0 with one 64-byte report per packet,
/// the direction in epb_flags, the decoded message as the packet comment).
package final class TraceWriter {
    package enum Format: String, Sendable, CaseIterable {
        case jsonl, pcapng

        /// pcapng for `.pcapng`/`.pcap` paths, JSON lines otherwise.
        package init(path: String) {
            self = path.hasSuffix(".pcapng") || path.hasSuffix(".pcap") ? .pcapng : .jsonl
        }
    }

    package struct Failure: Error, CustomStringConvertible, Sendable {
        package var description: String
    }

    package let path: String
    package let format: Format
    let fd: Int32
    /// pcapng: the last report from the host, written once we know whether a request ends with it.
    var heldInbound: (time: UInt64, report: [UInt8])?
    /// pcapng: the decoded response, for the next report to the host.
    var pendingOutboundComment: String?

    /// Creates (or truncates) `path` with mode 0600. A trace holds what the key exchanged in clear (large-blob
    /// keys and arrays, PIN protocol ciphertexts with their shared secrets' context), so an existing file is made
    /// 0600 too, and a symbolic link is refused rather than followed (it could point at another user's file).
    package init(path: String, format: Format? = nil) throws(Failure) {
        self.path = path
        self.format = format ?? Format(path: path)
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            let reason = errno == ELOOP ? "it is a symbolic link" : String(cString: strerror(errno))
            throw Failure(description: "cannot create the trace \(path): \(reason)")
        }
        guard fchmod(fd, 0o600) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "cannot make the trace \(path) private (mode 0600): \(reason)")
        }
        if self.format == .pcapng { writeHeader() }
    }

    deinit {
        flush()
        close(fd)
    }

    /// Microseconds since the Unix epoch.
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec / 1000)
    }

    package func report(_ report: [UInt8], fromHost: Bool) {
        let time = Self.now()
        switch format {
        case .jsonl:
            line([
                "t": .integer(Int64(time / 1000)), "us": .integer(Int64(time)), "dir": fromHost ? "in" : "out",
                "report": .string(Hex.string(report)),
            ])
        case .pcapng:
            flush()
            if fromHost {
                heldInbound = (time, report)
            } else {
                writePacket(time: time, report: report, inbound: false, comment: pendingOutboundComment)
                pendingOutboundComment = nil
            }
        }
    }

    package func message(_ message: TraceMessage) {
        switch format {
        case .jsonl:
            var fields: [String: JSONValue] = [
                "t": .integer(Int64(Self.now() / 1000)), "dir": message.fromHost ? "in" : "out",
                "type": message.fromHost ? "request" : "response", "channel": .integer(Int64(message.channel)),
                "hidCommand": .integer(Int64(message.command)), "payload": .string(Hex.string(message.payload)),
                "decoded": .string(message.decoded),
            ]
            if message.command == 0x10, let first = message.payload.first {
                fields[message.fromHost ? "command" : "status"] = .string(
                    message.fromHost
                        ? CTAPCommand(rawValue: first).map { "\($0)" } ?? "0x" + String(first, radix: 16)
                        : CTAPStatus(rawValue: first).map { "\($0)" } ?? "0x" + String(first, radix: 16)
                )
            }
            line(fields)
        case .pcapng:
            if message.fromHost, let held = heldInbound {
                writePacket(time: held.time, report: held.report, inbound: true, comment: message.decoded)
                heldInbound = nil
            } else if !message.fromHost {
                pendingOutboundComment = message.decoded
            }
        }
    }

    /// Writes what is held back (pcapng).
    package func flush() {
        if let held = heldInbound {
            writePacket(time: held.time, report: held.report, inbound: true, comment: nil)
            heldInbound = nil
        }
    }

    func line(_ object: [String: JSONValue]) {
        write(Array((JSONValue.object(object).encoded + "\n").utf8))
    }

    func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return }
            offset += n
        }
    }

    // MARK: pcapng (https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng-02.html), little endian

    static let linkTypeUser0: UInt16 = 147

    static func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
    static func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    static func padded(_ bytes: [UInt8]) -> [UInt8] { bytes + [UInt8](repeating: 0, count: (4 - bytes.count % 4) % 4) }

    static func option(_ code: UInt16, _ value: [UInt8]) -> [UInt8] {
        le16(code) + le16(UInt16(value.count)) + padded(value)
    }

    static func block(_ type: UInt32, _ body: [UInt8]) -> [UInt8] {
        let length = UInt32(12 + body.count)
        return le32(type) + le32(length) + body + le32(length)
    }

    func writeHeader() {
        let shb =
            Self.le32(0x1A2B_3C4D) + Self.le16(1) + Self.le16(0) + [UInt8](repeating: 0xFF, count: 8)
            + Self.option(4, Array("fidosim".utf8)) + Self.option(0, [])
        write(Self.block(0x0A0D_0D0A, shb))
        let idb =
            Self.le16(Self.linkTypeUser0) + Self.le16(0) + Self.le32(64)
            + Self.option(2, Array("fidosim-ctaphid".utf8))
            + Self.option(3, Array("CTAPHID reports of a fidosim virtual key (64 bytes, no report id)".utf8))
            + Self.option(0, [])
        write(Self.block(0x0000_0001, idb))
    }

    func writePacket(time: UInt64, report: [UInt8], inbound: Bool, comment: String?) {
        var body =
            Self.le32(0) + Self.le32(UInt32(time >> 32)) + Self.le32(UInt32(time & 0xFFFF_FFFF))
            + Self.le32(UInt32(report.count)) + Self.le32(UInt32(report.count)) + Self.padded(report)
        if let comment { body += Self.option(1, Array(comment.utf8.prefix(65000))) }
        body += Self.option(2, Self.le32(inbound ? 0x1 : 0x2)) + Self.option(0, [])
        write(Self.block(0x0000_0006, body))
    }
}
