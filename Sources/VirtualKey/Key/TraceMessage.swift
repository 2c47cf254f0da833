import CTAPCBOR
import CTAPCore

/// A whole CTAP message the key received or sent, for traces.
package struct TraceMessage: Equatable, Sendable {
    /// True for a request from the host, false for the key's response.
    package var fromHost: Bool
    package var channel: UInt32
    /// `CTAPHID_CBOR` (0x10) or `CTAPHID_MSG` (0x03).
    package var command: UInt8
    package var payload: [UInt8]

    /// One line for people: the CTAP2 command or status and the CBOR in diagnostic notation, or the U2F APDU.
    package var decoded: String {
        let channelText = "channel " + String(channel, radix: 16)
        if command == 0x03 {
            return "\(fromHost ? "U2F request" : "U2F response") \(Hex.string(payload)) (\(channelText))"
        }
        guard let first = payload.first else { return "CTAP2 (empty) (\(channelText))" }
        let head: String
        if fromHost {
            head = "CTAP2 " + (CTAPCommand(rawValue: first).map { "\($0)" } ?? "0x" + String(first, radix: 16))
        } else {
            head = "CTAP2 response " + (CTAPStatus(rawValue: first).map { "\($0)" } ?? "0x" + String(first, radix: 16))
        }
        guard payload.count > 1 else { return "\(head) (\(channelText))" }
        let body =
            (try? CBORDecoder.decode(Array(payload.dropFirst())))?.description
            ?? "undecodable CBOR \(payload.dropFirst().count) bytes"
        return "\(head) \(body) (\(channelText))"
    }
}
