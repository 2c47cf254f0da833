import CTAPCBOR
import Crypto

/// A credential's private key as swift-crypto holds it, ready to sign.
///
/// Making one from raw bytes derives the public key (a scalar multiplication, as costly as a signature), so the
/// authenticator keeps the keys it used last in a ``SigningKeyCache`` instead of rebuilding them per request.
/// (A struct of two optionals rather than an enum: a multi-payload enum keeps its case in the references' spare
/// bits, which LeakSanitizer then cannot follow.)
struct SigningKey: Sendable {
    private var p256: P256.Signing.PrivateKey?
    private var ed25519: Curve25519.Signing.PrivateKey?

    init(_ key: P256.Signing.PrivateKey) { p256 = key }

    init(raw: [UInt8], algorithm: CredentialAlgorithm) throws(CTAPError) {
        do {
            switch algorithm {
            case .es256: p256 = try P256.Signing.PrivateKey(rawRepresentation: raw)
            case .edDSA: ed25519 = try Curve25519.Signing.PrivateKey(rawRepresentation: raw)
            }
        } catch {
            throw CTAPError(.other, "a stored private key is invalid: \(error)")
        }
    }

    /// The raw private key: a P-256 scalar or an Ed25519 seed.
    var raw: [UInt8] {
        if let p256 { return Array(p256.rawRepresentation) }
        return ed25519.map { Array($0.rawRepresentation) } ?? []
    }

    /// The COSE_Key of the public key.
    var coseKey: CBORValue {
        if let p256 { return COSEKey.es256(p256.publicKey) }
        return ed25519.map { COSEKey.edDSA($0.publicKey) } ?? .null
    }

    /// A DER ECDSA signature for ES256, a 64-byte Ed25519 signature for EdDSA.
    func sign(_ data: [UInt8]) throws(CTAPError) -> [UInt8] {
        do {
            if let p256 { return Array(try p256.signature(for: data).derRepresentation) }
            if let ed25519 { return Array(try ed25519.signature(for: data)) }
        } catch {
            throw CTAPError(.other, "signing failed: \(error)")
        }
        throw CTAPError(.other, "no key to sign with")
    }
}

/// The last `capacity` values stored by credential id, oldest dropped first (RAM only).
struct CredentialLRU<Value: Sendable>: Sendable {
    static var capacity: Int { 64 }

    /// A credential id as a dictionary key, hashed as one run of bytes (an array of bytes hashes byte by byte).
    struct Key: Hashable, Sendable {
        var id: [UInt8]

        func hash(into hasher: inout Hasher) {
            id.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    var entries: [Key: Value] = [:]
    var order: [Key] = []

    subscript(id: [UInt8]) -> Value? { entries[Key(id: id)] }

    mutating func insert(_ value: Value, for id: [UInt8]) {
        let key = Key(id: id)
        if entries.updateValue(value, forKey: key) == nil {
            order.append(key)
            if order.count > Self.capacity { entries[order.removeFirst()] = nil }
        }
    }

    mutating func removeAll() {
        entries.removeAll()
        order.removeAll()
    }
}

/// The contents of the credential ids opened last, with the rpIdHash they opened for (cleared by power cycle and
/// reset, when the sealing key changes). Opening an id is an AES-GCM key schedule and decryption.
struct OpenedIdCache: Sendable {
    var opened = CredentialLRU<(rpIdHash: [UInt8], contents: CredentialID.Contents)>()

    /// What `id` holds when it opens for `rpIdHash`, or nil (ids that do not open are not remembered).
    mutating func contents(id: [UInt8], rpIdHash: [UInt8], sealingKey: SymmetricKey) -> CredentialID.Contents? {
        if let entry = opened[id] {
            // An id opens for one rpIdHash only (it is the associated data).
            return entry.rpIdHash == rpIdHash ? entry.contents : nil
        }
        guard let contents = CredentialID.open(id, rpIdHash: rpIdHash, key: sealingKey) else { return nil }
        opened.insert((rpIdHash, contents), for: id)
        return contents
    }

    mutating func removeAll() { opened.removeAll() }
}

/// The signing keys of the credentials used last, by credential id (cleared by power cycle and reset).
struct SigningKeyCache: Sendable {
    var keys = CredentialLRU<(raw: [UInt8], key: SigningKey)>()

    /// The key for credential `id` whose raw key is `raw`; built and remembered when missing or different.
    mutating func key(id: [UInt8], raw: [UInt8], algorithm: CredentialAlgorithm) throws(CTAPError) -> SigningKey {
        if let entry = keys[id], constantTimeEqual(entry.raw, raw) { return entry.key }
        let key = try SigningKey(raw: raw, algorithm: algorithm)
        keys.insert((raw, key), for: id)
        return key
    }

    /// Remembers a key just made (its raw form is `raw`).
    mutating func insert(id: [UInt8], raw: [UInt8], key: SigningKey) {
        keys.insert((raw, key), for: id)
    }

    /// Cache ids of the attestation keys (they never collide with a credential's: the raw key is compared too).
    static let batchAttestationId = Array("fidosim batch attestation key".utf8)
    static let enterpriseAttestationId = Array("fidosim enterprise attestation key".utf8)
    static let u2fAttestationId = Array("fidosim U2F attestation key".utf8)

    mutating func removeAll() { keys.removeAll() }
}
