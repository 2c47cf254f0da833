import CTAPCBOR

/// The parameter map of a CTAP2 request, with typed accessors that raise the CTAP error the spec names:
/// CTAP2_ERR_MISSING_PARAMETER for an absent required member, CTAP2_ERR_CBOR_UNEXPECTED_TYPE for a member
/// of the wrong type, CTAP2_ERR_INVALID_CBOR for bytes that are not CBOR.
struct RequestParameters {
    /// The members in the order they came. A well-formed request has a dozen at most, each looked up once or
    /// twice: a scan costs less than building a dictionary and hashing a key for every lookup (and a hostile one of
    /// thousands of members costs a few scans of one message).
    let members: [(key: CBORValue, value: CBORValue)]

    init(cbor bytes: ArraySlice<UInt8>) throws(CTAPError) {
        guard !bytes.isEmpty else { throw CTAPError(.missingParameter, "request has no parameters") }
        let members: [(key: CBORValue, value: CBORValue)]?
        do {
            members = try CBORDecoder.decodeMapEntries(bytes)
        } catch {
            throw CTAPError(.invalidCBOR, "\(error)")
        }
        guard let members else { throw CTAPError(.cborUnexpectedType, "parameters are not a map") }
        self.members = members
    }

    func value(_ key: Int) -> CBORValue? {
        let wanted = CBORValue(key)
        for member in members where member.key == wanted { return member.value }
        return nil
    }

    func required(_ key: Int, _ name: String) throws(CTAPError) -> CBORValue {
        guard let v = value(key) else { throw CTAPError(.missingParameter, "\(name) missing") }
        return v
    }

    func bytes(_ key: Int, _ name: String) throws(CTAPError) -> [UInt8]? {
        guard let v = value(key) else { return nil }
        guard let b = v.bytesValue else { throw CTAPError(.cborUnexpectedType, "\(name) is not a byte string") }
        return b
    }

    func text(_ key: Int, _ name: String) throws(CTAPError) -> String? {
        guard let v = value(key) else { return nil }
        guard let t = v.textValue else { throw CTAPError(.cborUnexpectedType, "\(name) is not a text string") }
        return t
    }

    func int(_ key: Int, _ name: String) throws(CTAPError) -> Int? {
        guard let v = value(key) else { return nil }
        guard let i = v.intValue else { throw CTAPError(.cborUnexpectedType, "\(name) is not an integer") }
        return i
    }

    func array(_ key: Int, _ name: String) throws(CTAPError) -> [CBORValue]? {
        guard let v = value(key) else { return nil }
        guard let a = v.arrayValue else { throw CTAPError(.cborUnexpectedType, "\(name) is not an array") }
        return a
    }

    func subMap(_ key: Int, _ name: String) throws(CTAPError) -> [CBORValue: CBORValue]? {
        guard let v = value(key) else { return nil }
        guard let m = v.mapValue else { throw CTAPError(.cborUnexpectedType, "\(name) is not a map") }
        return m
    }
}

extension Dictionary where Key == CBORValue, Value == CBORValue {
    /// A text-keyed member that must be a text string if present.
    func optionalText(_ key: String) throws(CTAPError) -> String? {
        guard let v = self[CBORValue.textString(key)] else { return nil }
        guard let t = v.textValue else { throw CTAPError(.cborUnexpectedType, "\(key) is not a text string") }
        return t
    }

    /// A text-keyed member that must be a byte string if present.
    func optionalBytes(_ key: String) throws(CTAPError) -> [UInt8]? {
        guard let v = self[CBORValue.textString(key)] else { return nil }
        guard let b = v.bytesValue else { throw CTAPError(.cborUnexpectedType, "\(key) is not a byte string") }
        return b
    }

    /// A text-keyed member that must be a boolean if present.
    func optionalBool(_ key: String) throws(CTAPError) -> Bool? {
        guard let v = self[CBORValue.textString(key)] else { return nil }
        guard let b = v.boolValue else { throw CTAPError(.cborUnexpectedType, "\(key) is not a boolean") }
        return b
    }
}

/// A PublicKeyCredentialDescriptor from an allow or exclude list.
struct CredentialDescriptor {
    var type: String
    var id: [UInt8]

    /// Parses a list of descriptors; every element must be a map with a text `type` and a byte-string `id`.
    static func list(_ values: [CBORValue]) throws(CTAPError) -> [CredentialDescriptor] {
        var out: [CredentialDescriptor] = []
        for value in values {
            guard let map = value.mapValue else {
                throw CTAPError(.cborUnexpectedType, "credential descriptor is not a map")
            }
            guard let type = try map.optionalText("type") else {
                throw CTAPError(.missingParameter, "credential descriptor has no type")
            }
            guard let id = try map.optionalBytes("id") else {
                throw CTAPError(.missingParameter, "credential descriptor has no id")
            }
            out.append(CredentialDescriptor(type: type, id: id))
        }
        return out
    }
}

/// The `options` map of makeCredential and getAssertion.
struct RequestOptions {
    var rk: Bool?
    var up: Bool?
    var uv: Bool?

    init(_ map: [CBORValue: CBORValue]?) throws(CTAPError) {
        guard let map else { return }
        // Unknown options are ignored; known ones must be booleans.
        rk = try map.optionalBool("rk")
        up = try map.optionalBool("up")
        uv = try map.optionalBool("uv")
    }

    init() {}
}
