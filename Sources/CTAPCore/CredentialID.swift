import Crypto

/// Self-contained credential ids: the private key sealed with AES-256-GCM under a key derived from the
/// device secret, bound to the rpIdHash (or U2F application parameter).
///
/// Layout (63 bytes): `version (0x01) | nonce (12) | ciphertext (34) | tag (16)`; the plaintext is
/// `flags (bit 0: discoverable) | algorithm (1 = ES256) | P-256 scalar (32)`, the additional data is
/// `version | rpIdHash`. Anything that does not open (tampered, truncated, foreign, from before a reset)
/// is simply not a credential of this key.
struct CredentialID {
    static let version: UInt8 = 0x01
    static let length = 1 + 12 + 34 + 16
    static let algorithmES256: UInt8 = 1

    struct Contents: Equatable {
        var isResident: Bool
        var privateKey: [UInt8]
    }

    /// Derives the sealing key from the device secret.
    static func sealingKey(deviceSecret: [UInt8]) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: deviceSecret),
            salt: Array("fidosim".utf8),
            info: Array("credential id v1".utf8),
            outputByteCount: 32
        )
    }

    static func seal(
        _ contents: Contents, rpIdHash: [UInt8], key: SymmetricKey, nonce: [UInt8]
    ) throws(CTAPError) -> [UInt8] {
        var plaintext: [UInt8] = [contents.isResident ? 0x01 : 0x00, algorithmES256]
        plaintext += contents.privateKey
        defer { wipe(&plaintext) }
        do {
            let box = try AES.GCM.seal(
                plaintext, using: key, nonce: AES.GCM.Nonce(data: nonce), authenticating: [version] + rpIdHash)
            return [version] + nonce + Array(box.ciphertext) + Array(box.tag)
        } catch {
            throw CTAPError(.other, "sealing a credential id failed: \(error)")
        }
    }

    static func open(_ id: [UInt8], rpIdHash: [UInt8], key: SymmetricKey) -> Contents? {
        guard id.count == length, id[0] == version else { return nil }
        guard
            let box = try? AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: id[1..<13]), ciphertext: id[13..<47], tag: id[47..<63]),
            let plain = try? AES.GCM.open(box, using: key, authenticating: [version] + rpIdHash)
        else { return nil }
        let bytes = Array(plain)
        guard bytes.count == 34, bytes[0] & ~0x01 == 0, bytes[1] == algorithmES256 else { return nil }
        return Contents(isResident: bytes[0] & 0x01 != 0, privateKey: Array(bytes[2...]))
    }
}

/// Overwrites a buffer holding secret bytes.
func wipe(_ bytes: inout [UInt8]) {
    for i in bytes.indices { bytes[i] = 0 }
}
