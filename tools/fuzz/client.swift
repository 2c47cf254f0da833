// libFuzzer target: what fidosim conform reads from a key, which may be any device. Compiled with CTAPCBOR and
// FIDOClient's parsers (no hidapi, OpenSSL or swift-crypto). The first byte picks the reader; the rest is what the
// key sent. Each reader must answer or throw ClientError, never trap.

import CTAPCBOR

/// Replays bytes as 64-byte reports.
final class ReplayChannel: ReportChannel {
    var reports: [[UInt8]]
    let name = "fuzz"
    init(_ bytes: ArraySlice<UInt8>) {
        reports = stride(from: bytes.startIndex, to: bytes.endIndex, by: 64).map {
            Array(bytes[$0..<min($0 + 64, bytes.endIndex)])
        }
    }
    func send(_ report: [UInt8]) throws(ClientError) {}
    func receive(timeoutMs: Int) throws(ClientError) -> [UInt8]? { reports.isEmpty ? nil : reports.removeFirst() }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzClient(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let body = Array(bytes.dropFirst())
    switch bytes[0] % 6 {
    case 0:
        if let parsed = try? ParsedAuthenticatorData(body) {
            precondition(parsed.bytes == body && parsed.rpIdHash.count == 32)
            if let key = parsed.credentialPublicKey { _ = try? COSEPublicKey(key) }
        }
    case 1:
        if let length = try? CBORItem.length(body, at: 0) { precondition(length >= 1 && length <= body.count) }
    case 2:
        if let value = try? CBORDecoder.decode(body, maxDepth: 8), let key = try? COSEPublicKey(value) {
            precondition(key.spki.count == 91 || key.spki.count == 44)
        }
    case 3:
        if let registration = try? U2FMessage.Registration(body) {
            precondition(registration.publicKey.count == 65 && !registration.signature.isEmpty)
        }
    case 4:
        let response = CTAPResponse(status: 0, body: body)
        if let map = try? response.map() { _ = try? AuthenticatorInfo(map) }
    default:
        // A reply stream on channel 0x01020304: the client reassembles it or refuses it.
        let client = CTAPHIDClient(channel: ReplayChannel(body[...]))
        if let message = try? client.receive(on: 0x0102_0304, timeoutMs: 60_000) {
            precondition(message.channel == 0x0102_0304 && message.payload.count <= CTAPHIDClient.maxPayload)
        }
    }
    return 0
}
