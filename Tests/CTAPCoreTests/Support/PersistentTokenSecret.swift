import Crypto
import _CryptoExtras

/// A getInfo member encrypted for the persistent token (encIdentifier, encCredStoreState) decrypted as CTAP 2.2/2.3
/// §6.4 and python-fido2's Info do: IV(16) ‖ AES-128-CBC under HKDF-SHA-256(token, 32 zero bytes, info, 16).
func decryptForPersistentToken(_ sealed: [UInt8], token: [UInt8], info: String) throws -> [UInt8] {
    let key = HKDF<SHA256>.deriveKey(
        inputKeyMaterial: SymmetricKey(data: token),
        salt: [UInt8](repeating: 0, count: 32),
        info: Array(info.utf8),
        outputByteCount: 16
    )
    return Array(
        try AES._CBC.decrypt(
            sealed.dropFirst(16),
            using: key,
            iv: AES._CBC.IV(ivBytes: sealed.prefix(16)),
            noPadding: true
        )
    )
}
