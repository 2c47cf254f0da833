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

    /// Remembers `value`; returns what it replaced or pushed out, for the caller to wipe.
    @discardableResult
    mutating func insert(_ value: Value, for id: [UInt8]) -> Value? {
        let key = Key(id: id)
        if let replaced = entries.updateValue(value, forKey: key) { return replaced }
        order.append(key)
        guard order.count > Self.capacity else { return nil }
        return entries.removeValue(forKey: order.removeFirst())
    }

    /// Forgets everything; returns the values, for the caller to wipe.
    mutating func removeAll() -> [Value] {
        let values = Array(entries.values)
        entries.removeAll()
        order.removeAll()
        return values
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
        if var evicted = opened.insert((rpIdHash, contents), for: id) { evicted.contents.privateKey.wipe() }
        return contents
    }

    mutating func removeAll() {
        for var entry in opened.removeAll() { entry.contents.privateKey.wipe() }
    }
}

/// The signing keys of the credentials used last, by credential id (cleared by power cycle and reset).
struct SigningKeyCache: Sendable {
    var keys = CredentialLRU<(raw: [UInt8], key: SigningKey)>()

    /// The key for credential `id` whose raw key is `raw`; built and remembered when missing or different.
    mutating func key(id: [UInt8], raw: [UInt8], algorithm: CredentialAlgorithm) throws(CTAPError) -> SigningKey {
        if let entry = keys[id], constantTimeEqual(entry.raw, raw) { return entry.key }
        let key = try SigningKey(raw: raw, algorithm: algorithm)
        if var evicted = keys.insert((raw, key), for: id) { evicted.raw.wipe() }
        return key
    }

    /// Remembers a key just made (its raw form is `raw`).
    mutating func insert(id: [UInt8], raw: [UInt8], key: SigningKey) {
        if var evicted = keys.insert((raw, key), for: id) { evicted.raw.wipe() }
    }

    /// Cache ids of the attestation keys (they never collide with a credential's: the raw key is compared too).
    static let batchAttestationId = Array("fidosim batch attestation key".utf8)
    static let enterpriseAttestationId = Array("fidosim enterprise attestation key".utf8)
    static let u2fAttestationId = Array("fidosim U2F attestation key".utf8)

    /// Forgets every key; the raw keys are wiped (the signing keys' own memory is cleared by BoringSSL when freed).
    mutating func removeAll() {
        for var entry in keys.removeAll() { entry.raw.wipe() }
    }
}
