import CTAPCBOR
import Crypto

/// The large-blob array as the control plane reads and writes it (credential import and export).
extension Authenticator {
    /// The entries of the stored large-blob array (none when it does not decode).
    func largeBlobEntries() -> [CBORValue] {
        let array = storage.largeBlobArray
        guard LargeBlobArray.isIntact(array), let value = try? CBORDecoder.decode(Array(array.dropLast(16))),
            let entries = value.arrayValue
        else { return [] }
        return entries
    }

    /// The blob of an entry that opens with `key` (AES-256-GCM, then DEFLATE), or nil.
    static func openBlob(_ entry: CBORValue, key: [UInt8]) -> [UInt8]? {
        guard let ciphertext = entry[1]?.bytesValue, ciphertext.count >= 16, let nonce = entry[2]?.bytesValue,
            nonce.count == 12, let size = entry[3]?.intValue, size >= 0, size <= 1 << 20,
            let box = try? AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: nonce),
                ciphertext: ciphertext.dropLast(16),
                tag: ciphertext.suffix(16)
            ),
            let compressed = try? AES.GCM.open(
                box,
                using: SymmetricKey(data: key),
                authenticating: Array("blob".utf8) + littleEndian64(UInt64(size))
            )
        else { return nil }
        guard let blob = try? Deflate.inflate(Array(compressed), maxOutput: size), blob.count == size else {
            return nil
        }
        return blob
    }

    static func littleEndian64(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    /// Writes `blob` into the large-blob array under `key`, replacing an entry that opens with the same key.
    mutating func addLargeBlob(_ blob: [UInt8], key: [UInt8]) throws(CTAPError) {
        var entries = largeBlobEntries().filter { Self.openBlob($0, key: key) == nil }
        let nonce = entropy.bytes(12)
        let sealed: AES.GCM.SealedBox
        do {
            sealed = try AES.GCM.seal(
                Deflate.store(blob),
                using: SymmetricKey(data: key),
                nonce: AES.GCM.Nonce(data: nonce),
                authenticating: Array("blob".utf8) + Self.littleEndian64(UInt64(blob.count))
            )
        } catch {
            throw CTAPError(.other, "sealing a large blob failed: \(error)")
        }
        entries.append([
            1: .byteString(Array(sealed.ciphertext) + Array(sealed.tag)), 2: .byteString(nonce),
            3: CBORValue(blob.count),
        ])
        let body = CBORValue.array(entries).encoded()
        let array = body + LargeBlobArray.checksum(body)
        guard array.count <= configuration.maxLargeBlobArray else {
            throw CTAPError(.largeBlobStorageFull, "the large-blob array would be \(array.count) bytes")
        }
        try storage.setLargeBlobArray(array)
    }
}
