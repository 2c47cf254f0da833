import CTAPCBOR
import Crypto

/// The settings authenticatorConfig changes, kept in the storage; reset restores the defaults.
package struct AuthenticatorSettings: Sendable, Equatable {
    /// The shortest PIN accepted, in Unicode code points (CTAP 2.1 default 4; only ever raised).
    package var minPINLength = 4
    /// RP IDs that may read minPINLength through the minPinLength extension (besides the configured ones).
    package var minPinLengthRPIDs: [String] = []
    /// A PIN change is required before the next token is handed out.
    package var forcePINChange = false
    /// Every makeCredential and getAssertion needs user verification; U2F is off.
    package var alwaysUv = false
    /// alwaysUv was set by toggleAlwaysUv or the control plane since the last reset: a key whose alwaysUv is on from
    /// the factory keeps the state chosen, across power cycles.
    package var alwaysUvChosen = false
    /// enableEnterpriseAttestation has run: makeCredential may return enterprise attestation.
    package var enterpriseAttestation = false
    /// The PIN complexity policy (CTAP 2.2) is on: new PINs may not be one repeated character or a run.
    package var pinComplexityPolicy = false
    /// Built-in user verifications since the PIN was last entered (CTAP 2.2 uvCountSinceLastPinEntry).
    package var uvCountSinceLastPinEntry = 0
    /// enableLongTouchForReset has run: authenticatorReset needs a long touch (CTAP 2.3 longTouchForReset).
    package var longTouchForReset = false

    package init() {}

    /// The record encoding: a CBOR map of the members that differ from the defaults.
    package var encoded: [UInt8] {
        var map: [CBORValue: CBORValue] = [:]
        if minPINLength != 4 { map[1] = CBORValue(minPINLength) }
        if !minPinLengthRPIDs.isEmpty { map[2] = .array(minPinLengthRPIDs.map { .textString($0) }) }
        if forcePINChange { map[3] = true }
        if alwaysUv { map[4] = true }
        if enterpriseAttestation { map[5] = true }
        if pinComplexityPolicy { map[6] = true }
        if uvCountSinceLastPinEntry != 0 { map[7] = CBORValue(uvCountSinceLastPinEntry) }
        if longTouchForReset { map[8] = true }
        if alwaysUvChosen { map[9] = true }
        return CBORValue.map(map).encoded()
    }

    /// Decodes a record; nil when it is not a settings map of this format.
    package init?(encoded bytes: [UInt8]) {
        guard let map = (try? CBORDecoder.decode(bytes))?.mapValue else { return nil }
        if let value = map[1] {
            guard let n = value.intValue, (4...63).contains(n) else { return nil }
            minPINLength = n
        }
        if let value = map[2] {
            guard let ids = value.arrayValue?.compactMap(\.textValue), ids.count == value.arrayValue?.count else {
                return nil
            }
            minPinLengthRPIDs = ids
        }
        forcePINChange = map[3]?.boolValue ?? false
        alwaysUv = map[4]?.boolValue ?? false
        enterpriseAttestation = map[5]?.boolValue ?? false
        pinComplexityPolicy = map[6]?.boolValue ?? false
        if let value = map[7] {
            guard let n = value.intValue, n >= 0 else { return nil }
            uvCountSinceLastPinEntry = n
        }
        longTouchForReset = map[8]?.boolValue ?? false
        alwaysUvChosen = map[9]?.boolValue ?? false
    }

    /// Whether `pin` breaks the complexity policy: one character repeated, or a run of consecutive code points
    /// going up or down ("1234", "98765", "abcd").
    package static func isTooSimple(_ pin: String) -> Bool {
        let scalars = pin.unicodeScalars.map(\.value)
        guard scalars.count > 1 else { return true }
        let steps = Set(zip(scalars.dropFirst(), scalars).map { Int64($0) - Int64($1) })
        return steps == [0] || steps == [1] || steps == [-1]
    }
}

/// An enrolled fingerprint of the simulated sensor: its template id and the name the user gave it.
package struct FingerprintTemplate: Sendable, Equatable {
    package var id: [UInt8]
    package var name: String?

    package init(id: [UInt8], name: String? = nil) {
        self.id = id
        self.name = name
    }

    /// The record encoding of a list of templates: a CBOR array of `{1: id, 2?: name}`.
    package static func encode(_ templates: [FingerprintTemplate]) -> [UInt8] {
        CBORValue.array(
            templates.map { t in
                var map: [CBORValue: CBORValue] = [1: .byteString(t.id)]
                if let name = t.name { map[2] = .textString(name) }
                return .map(map)
            }
        ).encoded()
    }

    /// Decodes a list of templates; nil when the record is not one.
    package static func decode(_ bytes: [UInt8]) -> [FingerprintTemplate]? {
        guard let array = (try? CBORDecoder.decode(bytes))?.arrayValue else { return nil }
        var out: [FingerprintTemplate] = []
        for entry in array {
            guard let id = entry[1]?.bytesValue, !id.isEmpty else { return nil }
            out.append(FingerprintTemplate(id: id, name: entry[2]?.textValue))
        }
        return out
    }
}

/// The serialized large-blob array (CTAP 2.1 §6.10.3): a CBOR array followed by LEFT(SHA-256(array), 16).
package enum LargeBlobArray {
    /// The array of a new or reset key: an empty CBOR array and its checksum.
    package static let initial: [UInt8] = [0x80] + Array(SHA256.hash(data: [0x80]).prefix(16))

    /// LEFT(SHA-256(body), 16): the checksum that follows the CBOR array.
    package static func checksum(_ body: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(data: body).prefix(16))
    }

    /// Whether `bytes` ends in the checksum of what precedes it.
    package static func isIntact(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 17 else { return false }
        let body = bytes.dropLast(16)
        return constantTimeEqual(Array(SHA256.hash(data: Array(body)).prefix(16)), Array(bytes.suffix(16)))
    }
}
