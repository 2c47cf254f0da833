import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing

/// A parsed U2F REGISTER response.
struct U2FRegistration {
    /// The user public key: 0x04 | x | y.
    var point: [UInt8]
    var keyHandle: [UInt8]
    var certificate: [UInt8]
    var signature: [UInt8]
    var publicKey: P256.Signing.PublicKey

    /// Parses `0x05 | point | L | handle | certificate | signature | 90 00`.
    init(_ bytes: [UInt8]) throws {
        guard bytes.count > 67, bytes[0] == 0x05 else { throw HarnessFailure("not a register response") }
        guard bytes.suffix(2) == [0x90, 0x00] else { throw HarnessFailure("status word is not 9000") }
        point = Array(bytes[1..<66])
        let handleLength = Int(bytes[66])
        let certificateStart = 67 + handleLength
        guard bytes.count > certificateStart + 2 else { throw HarnessFailure("key handle truncated") }
        keyHandle = Array(bytes[67..<certificateStart])
        let certificateLength = try DERNode.elementLength(bytes[certificateStart...])
        let signatureStart = certificateStart + certificateLength
        guard bytes.count > signatureStart + 2 else { throw HarnessFailure("certificate truncated") }
        certificate = Array(bytes[certificateStart..<signatureStart])
        signature = Array(bytes[signatureStart..<(bytes.count - 2)])
        publicKey = try P256.Signing.PublicKey(x963Representation: point)
    }
}

/// Builders of U2F request APDUs.
enum U2FRequest {
    /// `CLA INS P1 P2 00 Lc1 Lc2 data 00 00` (extended length, Le 65536); `CLA INS P1 P2 00 00 00` without data.
    static func extended(cla: UInt8 = 0, _ ins: UInt8, p1: UInt8 = 0, p2: UInt8 = 0, _ data: [UInt8] = []) -> [UInt8] {
        guard !data.isEmpty else { return [cla, ins, p1, p2, 0x00, 0x00, 0x00] }
        return [cla, ins, p1, p2, 0x00, UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data + [0x00, 0x00]
    }

    /// `CLA INS P1 P2 Lc data 00` (short length, Le 256); `CLA INS P1 P2 00` without data.
    static func short(cla: UInt8 = 0, _ ins: UInt8, p1: UInt8 = 0, p2: UInt8 = 0, _ data: [UInt8] = []) -> [UInt8] {
        guard !data.isEmpty else { return [cla, ins, p1, p2, 0x00] }
        return [cla, ins, p1, p2, UInt8(data.count)] + data + [0x00]
    }

    static let challenge: [UInt8] = (0..<32).map { UInt8($0) &* 3 &+ 1 }
    static let appId = "https://example.com/u2f/app-id.json"
    static let application = sha256(appId)

    /// REGISTER: challenge | application.
    static func register(challenge: [UInt8] = challenge, application: [UInt8] = application) -> [UInt8] {
        extended(0x01, challenge + application)
    }

    /// AUTHENTICATE with control byte `p1`: challenge | application | L | key handle.
    static func authenticate(
        p1: UInt8,
        keyHandle: [UInt8],
        challenge: [UInt8] = challenge,
        application: [UInt8] = application
    ) -> [UInt8] {
        extended(0x02, p1: p1, challenge + application + [UInt8(keyHandle.count)] + keyHandle)
    }
}

extension Harness {
    /// Registers a U2F credential with a touch and parses the response.
    mutating func u2fRegister(
        application: [UInt8] = U2FRequest.application,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> U2FRegistration {
        let outcome = approve(u2f(U2FRequest.register(application: application)), sourceLocation: sourceLocation)
        guard let bytes = responseBytes(outcome) else { throw HarnessFailure("no register response") }
        return try U2FRegistration(bytes)
    }
}

extension Array {
    /// A copy with the element at `index` replaced.
    func replacing(at index: Int, with element: Element) -> [Element] {
        var copy = self
        copy[index] = element
        return copy
    }
}
