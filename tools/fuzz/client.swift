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

/// What the COSE reader promises of every key it accepts: a SubjectPublicKeyInfo of the DER shape OpenSSL writes for
/// its type and curve (FIDOClientTests compares each with OpenSSL's own encoding), and an EC2 algorithm that is
/// defined on the key's curve.
func checkSubjectPublicKeyInfo(_ key: COSEPublicKey) {
    switch key.keyType {
    case 2:
        // P-256, P-384, P-521, secp256k1: the named curve's AlgorithmIdentifier and the uncompressed point.
        let (size, spkiCount) = [1: (32, 91), 2: (48, 120), 3: (66, 158), 8: (32, 88)][key.curve ?? 0] ?? (0, 0)
        precondition(spkiCount > 0 && key.x.count == size && key.y?.count == size && key.spki.count == spkiCount)
        precondition(Array(key.spki.suffix(2 * size + 1)) == [0x04] + key.x + key.y!)
        let curves: [Int: Int] = [-7: 1, -9: 1, -25: 1, -35: 2, -51: 2, -36: 3, -52: 3, -47: 8]
        precondition(curves[key.algorithm] == key.curve)
    case 1:
        precondition(key.spki.count == 44 && Array(key.spki.suffix(32)) == key.x)
    case 3:
        // SEQUENCE { AlgorithmIdentifier, BIT STRING { SEQUENCE { INTEGER n, INTEGER e } } }, its length exact.
        precondition(key.spki.count >= 2 && key.spki[0] == 0x30)
        let first = Int(key.spki[1])
        let (header, length) =
            first < 0x80
            ? (2, first)
            : first == 0x81 ? (3, Int(key.spki[2])) : (4, Int(key.spki[2]) << 8 | Int(key.spki[3]))
        precondition(first <= 0x82 && header + length == key.spki.count)
    default:
        // ML-DSA (AKP): no SubjectPublicKeyInfo for this OpenSSL.
        precondition(key.keyType == 7 && key.spki.isEmpty)
    }
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
            checkSubjectPublicKeyInfo(key)
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
