// libFuzzer target: the authenticator (CTAPCore) fed arbitrary sequences of CTAP2 and U2F messages, presence
// answers, power cycles and clock jumps. Compiled with Sources/CTAPCBOR, Sources/FlashStore and
// Sources/CTAPCore as their own modules, linked with swift-crypto from the debug build (tools/fuzz/run.sh).
//
// Every input starts from the same key: PIN "1234" set, two discoverable and one non-discoverable credential,
// and a pinUvAuthToken (mc, ga, cm) the driver knows, so that requests it signs reach the paths behind the
// PIN checks. Input format, repeated: one op byte, then for ops that carry data a 2-byte big-endian length and
// that many bytes.
//   0 CBOR message as is             1 U2F APDU as is
//   2 CBOR message signed with the token: the driver puts pinUvAuthParam/pinUvAuthProtocol (2) into a
//     makeCredential, getAssertion or credential management map
//   3 presence: approve  4 presence: deny  5 power cycle  6 advance the clock by data[0] seconds (1 byte)
//   7 obtain a new token with the PIN (the old one is replaced); at most twice per input, later ones are skipped:
//     each costs a key agreement and a PIN exchange, and inputs dense in 7s had spent most of the run on them
// Checked: nothing traps; a success response to CBOR carries canonical CBOR; U2F answers end in a status word.

import CTAPCBOR
import CTAPCore
import Crypto
import _CryptoExtras

/// The platform side of PIN/UV auth protocol two, enough to obtain and use a token.
struct Platform {
    static func token(_ key: inout Authenticator, now: Duration) -> [UInt8]? {
        guard case .response(let ka) = key.handleCBOR([0x06] + CBORValue.map([1: 2, 2: 2]).encoded(), now: now),
            ka.first == 0, let map = try? CBORDecoder.decode(Array(ka.dropFirst())),
            let x = map[1]?[-2]?.bytesValue, let y = map[1]?[-3]?.bytesValue,
            let peer = try? P256.KeyAgreement.PublicKey(x963Representation: [0x04] + x + y)
        else { return nil }
        let mine = P256.KeyAgreement.PrivateKey()
        guard let z = try? mine.sharedSecretFromKeyAgreement(with: peer) else { return nil }
        let salt = [UInt8](repeating: 0, count: 32)
        let aes = z.hkdfDerivedSymmetricKey(
            using: SHA256.self,
            salt: salt,
            sharedInfo: Array("CTAP2 AES key".utf8),
            outputByteCount: 32
        )
        let iv = [UInt8](repeating: 7, count: 16)
        let pinHash = Array(SHA256.hash(data: Array("1234".utf8)).prefix(16))
        guard let ivValue = try? AES._CBC.IV(ivBytes: iv),
            let enc = try? AES._CBC.encrypt(pinHash, using: aes, iv: ivValue, noPadding: true)
        else { return nil }
        let point = Array(mine.publicKey.x963Representation)
        let request: CBORValue = [
            1: 2, 2: 9,
            3: [1: 2, 3: -25, -1: 1, -2: .byteString(Array(point[1..<33])), -3: .byteString(Array(point[33...]))],
            6: .byteString(iv + Array(enc)), 9: 0x07,
        ]
        guard case .response(let bytes) = key.handleCBOR([0x06] + request.encoded(), now: now), bytes.first == 0,
            let response = try? CBORDecoder.decode(Array(bytes.dropFirst())),
            let sealed = response[2]?.bytesValue, sealed.count == 48,
            let tokenIV = try? AES._CBC.IV(ivBytes: sealed.prefix(16)),
            let token = try? AES._CBC.decrypt(sealed.dropFirst(16), using: aes, iv: tokenIV, noPadding: true)
        else { return nil }
        return Array(token)
    }

    static func sign(_ message: [UInt8], token: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: token)))
    }
}

struct Fixture {
    var key: Authenticator
    var token: [UInt8]

    static let shared: Fixture = {
        var key = try! Authenticator(
            storage: MemoryStorage(deviceSecret: [UInt8](repeating: 0x42, count: 32), capacity: 20),
            entropy: EntropySource(SeededGenerator(seed: 1)),
            now: .zero
        )
        // setPIN "1234" is done through the storage directly: the fuzzer reaches setPIN itself through op 0.
        try! key.setPINForFuzzing()
        var token = Platform.token(&key, now: .zero)!
        for (n, rk) in [(1, true), (2, true), (3, false)] {
            let request: CBORValue = [
                1: .byteString([UInt8](repeating: UInt8(n), count: 32)),
                2: ["id": "example.com"],
                3: ["id": .byteString([UInt8(n)]), "name": .textString("user\(n)")],
                4: [["alg": n == 2 ? -8 : -7, "type": "public-key"]],
                6: ["hmac-secret": true, "credProtect": CBORValue(n), "credBlob": .byteString([1, 2, 3])],
                7: ["rk": .boolean(rk)],
                8: .byteString(Platform.sign([UInt8](repeating: UInt8(n), count: 32), token: token)),
                9: 2,
            ]
            _ = key.handleCBOR([0x01] + request.encoded(), now: .zero)
            _ = key.resume(.approved, now: .zero)
            token = Platform.token(&key, now: .zero)!
        }
        return Fixture(key: key, token: token)
    }()
}

extension Authenticator {
    mutating func setPINForFuzzing() throws {
        try storage.setPIN(StoredPIN(hash: Array(SHA256.hash(data: Array("1234".utf8)).prefix(16)), codePoints: 4))
    }
}

func check(_ outcome: AuthenticatorOutcome, cbor: Bool) {
    guard case .response(let bytes) = outcome else { return }
    if cbor {
        precondition(!bytes.isEmpty, "an empty CTAP2 response")
        if bytes[0] == 0 && bytes.count > 1 {
            precondition(CBORDecoder.isCanonical(Array(bytes.dropFirst()), maxDepth: 8), "non-canonical response")
        }
    } else {
        precondition(bytes.count >= 2, "a U2F response without a status word")
    }
}

/// Puts the token's pinUvAuthParam into a request the fuzzer wrote.
func signed(_ message: [UInt8], token: [UInt8]) -> [UInt8] {
    guard let command = message.first, var map = (try? CBORDecoder.decode(Array(message.dropFirst())))?.mapValue
    else { return message }
    switch command {
    case 0x01, 0x02:
        let (paramKey, hashKey): (CBORValue, CBORValue) = command == 0x01 ? (8, 1) : (6, 2)
        let hash = map[hashKey]?.bytesValue ?? []
        map[paramKey] = .byteString(Platform.sign(hash, token: token))
        map[command == 0x01 ? 9 : 7] = 2
    case 0x0A, 0x41:
        let sub = UInt8(truncatingIfNeeded: map[1]?.intValue ?? 0)
        map[4] = .byteString(Platform.sign([sub] + (map[2].map { $0.encoded() } ?? []), token: token))
        map[3] = 2
    default:
        return message
    }
    return [command] + CBORValue.map(map).encoded()
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAuthenticator(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    var fixture = Fixture.shared
    var now: Duration = .seconds(1)
    var i = 0
    var steps = 0
    var tokens = 0
    while i < input.count && steps < 64 {
        steps += 1
        let op = input[i] % 8
        i += 1
        var payload: [UInt8] = []
        if op <= 2 || op == 6 {
            let length = op == 6 ? 1 : (i + 1 < input.count ? Int(input[i]) << 8 | Int(input[i + 1]) : 0)
            if op != 6 { i += 2 }
            let end = min(input.count, i + length)
            if i < end { payload = Array(input[i..<end]) }
            i = end
        }
        switch op {
        case 0: check(fixture.key.handleCBOR(payload, now: now), cbor: true)
        case 1: check(fixture.key.handleU2F(payload, now: now), cbor: false)
        case 2: check(fixture.key.handleCBOR(signed(payload, token: fixture.token), now: now), cbor: true)
        case 3: check(fixture.key.resume(.approved, now: now), cbor: fixture.key.pendingPrompt?.protocolKind != .u2f)
        case 4: _ = fixture.key.resume(.denied, now: now)
        case 5: fixture.key.powerCycle(now: now)
        case 6: now += .seconds(Int(payload.first ?? 0))
        default:
            guard tokens < 2 else { break }
            tokens += 1
            if let token = Platform.token(&fixture.key, now: now) { fixture.token = token }
        }
    }
    return 0
}
