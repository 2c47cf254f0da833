import CTAPCBOR

extension Authenticator {
    /// The authenticatorGetInfo response map: only what this build implements and tests.
    func getInfo() -> CBORValue {
        [
            0x01: ["U2F_V2", "FIDO_2_0"],
            0x03: .byteString(configuration.aaguid),
            0x04: ["rk": true, "up": true, "plat": false],
            0x05: CBORValue(configuration.maxMessageSize),
            0x07: 8,  // maxCredentialCountInList
            0x08: CBORValue(CredentialID.length),  // maxCredentialIdLength
            0x09: ["usb"],
            0x0A: [["alg": -7, "type": "public-key"]],
            0x0E: CBORValue(configuration.firmwareVersion),
            0x14: CBORValue(remainingDiscoverableCredentials),
        ]
    }
}
