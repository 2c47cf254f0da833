import CTAPCBOR
import Crypto

/// A large-blob array being written fragment by fragment.
struct LargeBlobWrite: Sendable {
    var expectedLength: Int
    var buffer: [UInt8]
}

extension Authenticator {
    /// The largest fragment a get returns or a set takes: maxMsgSize minus 64 (CTAP 2.1 §6.10).
    var maxLargeBlobFragment: Int { configuration.maxMessageSize - 64 }

    /// authenticatorLargeBlobs (0x0C, CTAP 2.1 §6.10.2).
    mutating func largeBlobs(_ params: RequestParameters, now: Duration) throws(CTAPError) -> AuthenticatorOutcome {
        let get = try params.int(0x01, "get")
        let set = try params.bytes(0x02, "set")
        let offset = try params.int(0x03, "offset")
        let length = try params.int(0x04, "length")
        let pinUvAuthParam = try params.bytes(0x05, "pinUvAuthParam")
        let protocolNumber = try params.int(0x06, "pinUvAuthProtocol")
        guard let offset, offset >= 0 else { throw CTAPError(.invalidParameter, "offset missing") }
        guard (get == nil) != (set == nil) else {
            throw CTAPError(.invalidParameter, "exactly one of get and set is required")
        }
        let stored = storage.largeBlobArray

        if let get {
            if length != nil || pinUvAuthParam != nil || protocolNumber != nil {
                throw CTAPError(.invalidParameter, "get takes no length or pinUvAuthParam")
            }
            guard get >= 0, get <= maxLargeBlobFragment else {
                throw CTAPError(.invalidLength, "get of \(get) bytes, at most \(maxLargeBlobFragment)")
            }
            guard offset <= stored.count else {
                throw CTAPError(.invalidParameter, "offset \(offset) past the array's \(stored.count) bytes")
            }
            let end = min(stored.count, offset + get)
            return .response(Self.success([0x01: .byteString(Array(stored[offset..<end]))]))
        }

        guard let set else { throw CTAPError(.invalidParameter, "set missing") }
        guard set.count <= maxLargeBlobFragment else {
            throw CTAPError(.invalidLength, "a fragment of \(set.count) bytes, at most \(maxLargeBlobFragment)")
        }
        if offset == 0 {
            guard let length else { throw CTAPError(.invalidParameter, "length missing at offset 0") }
            guard length <= configuration.maxLargeBlobArray else {
                throw CTAPError(
                    .largeBlobStorageFull,
                    "an array of \(length) bytes, at most \(configuration.maxLargeBlobArray)"
                )
            }
            guard length >= 17 else { throw CTAPError(.invalidParameter, "an array of \(length) bytes, at least 17") }
            largeBlobWrite = LargeBlobWrite(expectedLength: length, buffer: [])
        } else if length != nil {
            throw CTAPError(.invalidParameter, "length is only sent at offset 0")
        }
        guard var write = largeBlobWrite, offset == write.buffer.count else {
            throw CTAPError(.invalidSequence, "offset \(offset) is not where the write stands")
        }
        if isProtectedByUV || storage.settings.alwaysUv {
            let offsetLE = (0..<4).map { UInt8(truncatingIfNeeded: offset >> (8 * $0)) }
            let message = [UInt8](repeating: 0xFF, count: 32) + [0x0C, 0x00] + offsetLE + Array(SHA256.hash(data: set))
            try authorizeCommand(
                pinUvAuthParam,
                protocolNumber,
                message: message,
                permission: .largeBlobWrite,
                now: now
            )
        }
        guard offset + set.count <= write.expectedLength else {
            throw CTAPError(.invalidParameter, "the fragment runs past the announced length")
        }
        write.buffer += set
        guard write.buffer.count == write.expectedLength else {
            largeBlobWrite = write
            return .response([CTAPStatus.ok.rawValue])
        }
        largeBlobWrite = nil
        guard LargeBlobArray.isIntact(write.buffer) else {
            throw CTAPError(.integrityFailure, "the array's checksum does not match")
        }
        try storage.setLargeBlobArray(write.buffer)
        return .response([CTAPStatus.ok.rawValue])
    }
}
