import Crypto

/// Self-contained credential ids: the private key sealed with AES-256-GCM under a key derived from the
/// device secret, bound to the rpIdHash (or U2F application parameter).
///
/// Layout: `version (0x01) | nonce (12) | ciphertext (2 + key [+ 1 + blob]) | tag (16)`; the plaintext is
/// `flags | algorithm byte | private key`, then, for a profile that keeps a non-discoverable credential's credBlob
/// in its id (`credBlobNonDiscoverable: inCredentialId`), `blob length | blob`; the additional data is
/// `version | rpIdHash`. The private key is the
/// algorithm's raw key (``CredentialAlgorithm/rawKeyLength``: 32 bytes, 48 for P-384, 66 for P-521), so an id is
/// 63, 79 or 97 bytes; an RSA key is too large for an id, so an RSA id (31 bytes) carries none and its credential
/// is stored in flash even when it is not discoverable. Flags: bit 0 discoverable, bits 1–2 the credProtect level (0 means level 1), bit 3 made with
/// hmac-secret, bit 4 thirdPartyPayment, bit 5 backup eligible, bit 6 backed up when made. Anything that does not open (tampered, truncated, foreign, from before a
/// reset) is simply not a credential of this key.
struct CredentialID {
    static let version: UInt8 = 0x01
    /// Everything but the key: version, nonce, flags, algorithm byte, tag.
    static let overhead = 1 + 12 + 2 + 16

    /// The length of an id of `algorithm`.
    static func length(_ algorithm: CredentialAlgorithm) -> Int { overhead + algorithm.idKeyLength }

    struct Contents: Equatable {
        var isResident: Bool
        var privateKey: [UInt8]
        var algorithm: CredentialAlgorithm = .es256
        var credProtect: CredProtect = .optional
        var hmacSecret: Bool = false
        var thirdPartyPayment: Bool = false
        var backupEligible: Bool = false
        var backupState: Bool = false
        /// The credBlob kept in the id (at most ``maxCredBlobLength`` bytes), if any.
        var credBlob: [UInt8]? = nil
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
        _ contents: Contents,
        rpIdHash: [UInt8],
        key: SymmetricKey,
        nonce: [UInt8]
    ) throws(CTAPError) -> [UInt8] {
        var flags: UInt8 = contents.isResident ? 0x01 : 0x00
        flags |= contents.credProtect.rawValue << 1
        if contents.hmacSecret { flags |= 0x08 }
        if contents.thirdPartyPayment { flags |= 0x10 }
        if contents.backupEligible { flags |= 0x20 }
        if contents.backupState { flags |= 0x40 }
        var plaintext: [UInt8] = [flags, contents.algorithm.idByte]
        plaintext += contents.privateKey
        if let blob = contents.credBlob {
            guard blob.count <= maxCredBlobLength else { throw CTAPError(.other, "a credBlob too long for an id") }
            plaintext += [UInt8(blob.count)] + blob
        }
        defer { plaintext.wipe() }
        do {
            let box = try AES.GCM.seal(
                plaintext,
                using: key,
                nonce: AES.GCM.Nonce(data: nonce),
                authenticating: [version] + rpIdHash
            )
            return [version] + nonce + Array(box.ciphertext) + Array(box.tag)
        } catch {
            throw CTAPError(.other, "sealing a credential id failed: \(error)")
        }
    }

    static func open(_ id: [UInt8], rpIdHash: [UInt8], key: SymmetricKey) -> Contents? {
        guard id.count > overhead, id[0] == version else { return nil }
        guard
            let box = try? AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: id[1..<13]),
                ciphertext: id[13..<(id.count - 16)],
                tag: id[(id.count - 16)...]
            ),
            let plain = try? AES.GCM.open(box, using: key, authenticating: [version] + rpIdHash)
        else { return nil }
        let bytes = Array(plain)
        guard bytes.count >= 2, bytes[0] & ~0x7F == 0, let algorithm = CredentialAlgorithm(idByte: bytes[1]) else {
            return nil
        }
        let keyEnd = 2 + algorithm.idKeyLength
        var credBlob: [UInt8]?
        if bytes.count > keyEnd {
            // A credBlob after the key: its length, then exactly that many bytes.
            guard Int(bytes[keyEnd]) == bytes.count - keyEnd - 1, bytes.count - keyEnd - 1 <= maxCredBlobLength
            else { return nil }
            credBlob = Array(bytes[(keyEnd + 1)...])
        } else if bytes.count != keyEnd {
            return nil
        }
        let flags = bytes[0]
        return Contents(
            isResident: flags & 0x01 != 0,
            privateKey: Array(bytes[2..<keyEnd]),
            algorithm: algorithm,
            credProtect: CredProtect(rawValue: (flags >> 1) & 0x03) ?? .optional,
            hmacSecret: flags & 0x08 != 0,
            thirdPartyPayment: flags & 0x10 != 0,
            backupEligible: flags & 0x20 != 0,
            backupState: flags & 0x40 != 0,
            credBlob: credBlob
        )
    }
}
