import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// Seeded random mutations of valid requests: the authenticator never traps and always answers with a
/// well-formed status.
@Suite struct AuthenticatorFuzzTests {
    static let statusBytes = Set(CTAPStatus.allCases.map(\.rawValue))
    static let statusWords: Set<UInt16> = [0x9000, 0x6985, 0x6A80, 0x6700, 0x6B00, 0x6D00, 0x6E00]

    /// Flips, overwrites, inserts or deletes one to four bytes.
    static func mutate(_ message: [UInt8], _ random: inout SeededGenerator) -> [UInt8] {
        var bytes = message
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            switch Int.random(in: 0..<4, using: &random) {
            case 0 where !bytes.isEmpty:
                bytes[Int.random(in: bytes.indices, using: &random)] ^= 1 << UInt8.random(in: 0..<8, using: &random)
            case 1 where !bytes.isEmpty:
                bytes[Int.random(in: bytes.indices, using: &random)] = UInt8.random(in: 0...255, using: &random)
            case 2:
                bytes.insert(
                    UInt8.random(in: 0...255, using: &random),
                    at: Int.random(in: 0...bytes.count, using: &random)
                )
            default:
                if !bytes.isEmpty { bytes.remove(at: Int.random(in: bytes.indices, using: &random)) }
            }
        }
        return bytes
    }

    @Test func mutatedCTAP2RequestsAlwaysGetAStatus() throws {
        var harness = try Harness()
        let resident = try harness.register(Request.makeCredential(rk: true))
        let plain = try harness.register(Request.makeCredential(user: Request.user(id: [2])))
        let templates: [[UInt8]] = [
            [0x01]
                + CBORValue.map(
                    Request.makeCredential(rk: true, excludeList: [[1, 2, 3]]).setting(11, ["packed"])
                ).encoded(),
            [0x02]
                + CBORValue.map(
                    Request.getAssertion(allowList: [plain.credentialId, resident.credentialId])
                ).encoded(),
            [0x02] + CBORValue.map(Request.getAssertion(up: false)).encoded(),
        ]
        var random = SeededGenerator(seed: 0xF022)
        var statuses: [UInt8: Int] = [:]
        for iteration in 0..<5_000 {
            harness.now += .milliseconds(Int.random(in: 0...5, using: &random))
            let message = Self.mutate(templates[iteration % templates.count], &random)
            var outcome = harness.cbor(raw: message)
            if needsPresence(outcome) {
                let answers: [PresenceResult] = [.approved, .approved, .approved, .denied, .timedOut, .cancelled]
                // Never wipe the credentials the templates refer to.
                let answer =
                    message.first == CTAPCommand.reset.rawValue ? .denied : answers.randomElement(using: &random)!
                outcome = harness.resume(answer)
            }
            guard let bytes = responseBytes(outcome), let first = bytes.first else {
                Issue.record("no response to \(message)")
                continue
            }
            #expect(Self.statusBytes.contains(first), "unknown status \(first) for \(message)")
            statuses[first, default: 0] += 1
            if first == 0x00, bytes.count > 1 {
                #expect(CBORDecoder.isCanonical(Array(bytes.dropFirst())), "non-canonical response to \(message)")
            }
            if first == 0x00, message.first == 0x01 || message.first == 0x02 {
                #expect(bytes.count > 1, "empty success for \(message)")
            }
            if iteration % 500 == 0 { _ = harness.cbor(.getNextAssertion) }
        }
        // The mutations reach both the success path and several distinct refusals.
        #expect(statuses[0x00, default: 0] > 100)
        #expect(statuses.count >= 6)
    }

    @Test func randomAPDUsAlwaysEndWithAStatusWord() throws {
        var harness = try Harness()
        let registration = try harness.u2fRegister()
        var random = SeededGenerator(seed: 0xA9D0)
        var words: [UInt16: Int] = [:]
        for _ in 0..<2_000 {
            let apdu = Self.randomAPDU(keyHandle: registration.keyHandle, &random)
            var outcome = harness.u2f(apdu)
            if needsPresence(outcome) {
                outcome = harness.resume(Bool.random(using: &random) ? .approved : .denied)
            }
            guard let word = statusWord(of: outcome) else {
                Issue.record("no status word for \(apdu): \(outcome)")
                continue
            }
            #expect(Self.statusWords.contains(word), "unknown status word \(word) for \(apdu)")
            words[word, default: 0] += 1
            if word != 0x9000 {
                #expect(responseBytes(outcome)?.count == 2, "data with an error for \(apdu)")
            }
        }
        #expect(words[0x9000, default: 0] > 50)
        #expect(words.count == Self.statusWords.count)
    }

    /// Mostly plausible APDUs (CLA 0, known INS and P1, valid or damaged key handles, both encodings),
    /// some entirely random.
    static func randomAPDU(keyHandle: [UInt8], _ random: inout SeededGenerator) -> [UInt8] {
        if Int.random(in: 0..<10, using: &random) == 0 {
            return (0..<Int.random(in: 0...80, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
        }
        let cla: UInt8 = Int.random(in: 0..<20, using: &random) == 0 ? 0x80 : 0x00
        let ins: UInt8 = [0x01, 0x02, 0x02, 0x02, 0x03, 0x04].randomElement(using: &random)!
        let p1: UInt8 = [0x03, 0x07, 0x08, 0x00, 0x05].randomElement(using: &random)!
        var data: [UInt8] = []
        switch ins {
        case 0x01:
            data = (0..<[64, 64, 63, 65].randomElement(using: &random)!).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
        case 0x02:
            var handle = keyHandle
            if Bool.random(using: &random) { handle = mutate(handle, &random) }
            data = U2FRequest.challenge + U2FRequest.application + [UInt8(truncatingIfNeeded: handle.count)] + handle
            if Int.random(in: 0..<4, using: &random) == 0 { data = mutate(data, &random) }
        default:
            if Bool.random(using: &random) { data = [1] }
        }
        var apdu =
            Bool.random(using: &random)
            ? U2FRequest.extended(cla: cla, ins, p1: p1, data) : U2FRequest.short(cla: cla, ins, p1: p1, data)
        if Int.random(in: 0..<8, using: &random) == 0 { apdu = mutate(apdu, &random) }
        return apdu
    }
}
