package import CTAPCBOR
package import CTAPCore

/// Requests to an authenticator as a client sends them, for the tests and the proofs: parameter maps of valid
/// requests (to take apart), and whole CTAP2 messages.
package enum CTAPRequests {
    package static let rpId = "example.com"
    package static let clientDataHash: [UInt8] = (0..<32).map { UInt8($0) ^ 0xA5 }
    package static let userId: [UInt8] = [0x75, 0x73, 0x65, 0x72, 0x2D, 0x31]

    /// A user entity map.
    package static func user(
        id: [UInt8] = userId,
        name: String? = "alice",
        displayName: String? = "Alice"
    )
        -> CBORValue
    {
        var map: [CBORValue: CBORValue] = ["id": .byteString(id)]
        if let name { map["name"] = .textString(name) }
        if let displayName { map["displayName"] = .textString(displayName) }
        return .map(map)
    }

    /// A PublicKeyCredentialDescriptor.
    package static func descriptor(_ id: [UInt8], type: String = "public-key") -> CBORValue {
        ["id": .byteString(id), "type": .textString(type)]
    }

    /// An authenticatorMakeCredential parameter map (ES256); `rpName` nil leaves the RP's name out.
    package static func makeCredential(
        rpId: String = rpId,
        rpName: String? = "Example",
        user: CBORValue = user(),
        rk: Bool? = nil,
        excludeList: [[UInt8]]? = nil,
        clientDataHash: [UInt8] = clientDataHash
    ) -> [CBORValue: CBORValue] {
        var rp: [CBORValue: CBORValue] = ["id": .textString(rpId)]
        if let rpName { rp["name"] = .textString(rpName) }
        var map: [CBORValue: CBORValue] = [
            1: .byteString(clientDataHash),
            2: .map(rp),
            3: user,
            4: [["alg": -7, "type": "public-key"]],
        ]
        if let excludeList { map[5] = .array(excludeList.map { descriptor($0) }) }
        if let rk { map[7] = ["rk": .boolean(rk)] }
        return map
    }

    /// An authenticatorGetAssertion parameter map.
    package static func getAssertion(
        rpId: String = rpId,
        allowList: [[UInt8]]? = nil,
        up: Bool? = nil,
        clientDataHash: [UInt8] = clientDataHash
    ) -> [CBORValue: CBORValue] {
        var map: [CBORValue: CBORValue] = [1: .textString(rpId), 2: .byteString(clientDataHash)]
        if let allowList { map[3] = .array(allowList.map { descriptor($0) }) }
        if let up { map[5] = ["up": .boolean(up)] }
        return map
    }

    /// A whole CTAP2 message: the command byte, then the parameters.
    package static func message(_ command: CTAPCommand, _ parameters: [CBORValue: CBORValue]) -> [UInt8] {
        [command.rawValue] + CBORValue.map(parameters).encoded()
    }

    /// The credential id in a successful makeCredential response (status byte first), or nil.
    package static func credentialId(inMakeCredentialResponse response: [UInt8]) -> [UInt8]? {
        guard response.first == 0, let map = try? CBORDecoder.decode(Array(response.dropFirst())),
            let authData = map[2]?.bytesValue, authData.count > 55
        else { return nil }
        let length = Int(authData[53]) << 8 | Int(authData[54])
        guard authData.count >= 55 + length else { return nil }
        return Array(authData[55..<(55 + length)])
    }
}
