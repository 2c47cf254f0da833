package import CTAPCBOR
package import ControlProtocol

/// authenticatorGetInfo as JSON, with the member names of CTAP 2.3 §6.4 (the form FIDO metadata statements use
/// for `authenticatorGetInfo`): the AAGUID as 32 hex digits, other byte strings as base64url.
package enum GetInfoJSON {
    static let names: [Int: String] = [
        0x01: "versions", 0x02: "extensions", 0x03: "aaguid", 0x04: "options", 0x05: "maxMsgSize",
        0x06: "pinUvAuthProtocols", 0x07: "maxCredentialCountInList", 0x08: "maxCredentialIdLength",
        0x09: "transports", 0x0A: "algorithms", 0x0B: "maxSerializedLargeBlobArray", 0x0C: "forcePINChange",
        0x0D: "minPINLength", 0x0E: "firmwareVersion", 0x0F: "maxCredBlobLength", 0x10: "maxRPIDsForSetMinPINLength",
        0x11: "preferredPlatformUvAttempts", 0x12: "uvModality", 0x13: "certifications",
        0x14: "remainingDiscoverableCredentials", 0x15: "vendorPrototypeConfigCommands", 0x16: "attestationFormats",
        0x17: "uvCountSinceLastPinEntry", 0x18: "longTouchForReset", 0x19: "encIdentifier",
        0x1A: "transportsForReset", 0x1B: "pinComplexityPolicy", 0x1C: "pinComplexityPolicyURL", 0x1D: "maxPINLength",
        0x1E: "encCredStoreState", 0x1F: "authenticatorConfigCommands",
    ]

    /// The getInfo map as a JSON object; unknown keys keep their number as the name.
    package static func json(_ info: CBORValue) -> JSONValue {
        guard let map = info.mapValue else { return .object([:]) }
        var out: [String: JSONValue] = [:]
        for (key, value) in map {
            guard let number = key.intValue else { continue }
            let name = names[number] ?? String(number)
            if number == 0x03, let bytes = value.bytesValue {
                out[name] = .string(Hex.string(bytes))
            } else {
                out[name] = json(value: value)
            }
        }
        return .object(out)
    }

    static func json(value: CBORValue) -> JSONValue {
        switch value {
        case .unsigned(let n): return .integer(Int64(clamping: n))
        case .negative(let n): return n < UInt64(Int64.max) ? .integer(-1 - Int64(n)) : .number(-1 - Double(n))
        case .byteString(let bytes): return .string(Base64URL.encode(bytes))
        case .textString(let text): return .string(text)
        case .array(let elements): return .array(elements.map(json(value:)))
        case .map(let entries):
            var object: [String: JSONValue] = [:]
            for (k, v) in entries {
                let name = k.textValue ?? k.intValue.map { String($0) } ?? "\(k)"
                object[name] = json(value: v)
            }
            return .object(object)
        case .boolean(let flag): return .boolean(flag)
        default: return .null
        }
    }
}
