import CTAPCBOR
import Crypto
import Secp256k1
import _CryptoExtras

/// A credential's private key as swift-crypto holds it, ready to sign.
///
/// Making one from raw bytes derives the public key (a scalar multiplication or an ML-DSA key generation, as costly
/// as a signature), so the authenticator keeps the keys it used last in a ``SigningKeyCache`` instead of rebuilding
/// them per request. (The key sits behind an existential rather than in a multi-payload enum: such an enum keeps its
/// case in the references' spare bits, which LeakSanitizer then cannot follow.)
struct SigningKey: Sendable {
    let algorithm: CredentialAlgorithm
    private let key: any CredentialSigner

    init(_ key: P256.Signing.PrivateKey, algorithm: CredentialAlgorithm = .es256) {
        self.algorithm = algorithm
        self.key = key
    }

    init(_ key: _RSA.Signing.PrivateKey, algorithm: CredentialAlgorithm) {
        self.algorithm = algorithm
        self.key = RSASigner(key: key)
    }

    init(raw: [UInt8], algorithm: CredentialAlgorithm) throws(CTAPError) {
        self.algorithm = algorithm
        guard algorithm.isRawKeyLength(raw.count) else {
            throw CTAPError(
                .other,
                "a stored \(algorithm.name) key of \(raw.count) bytes"
            )
        }
        do {
            switch algorithm.keyKind {
            case .p256: key = try P256.Signing.PrivateKey(rawRepresentation: raw)
            case .p384: key = try P384.Signing.PrivateKey(rawRepresentation: raw)
            case .p521: key = try P521.Signing.PrivateKey(rawRepresentation: raw)
            case .ed25519: key = try Curve25519.Signing.PrivateKey(rawRepresentation: raw)
            case .mlDSA65: key = try MLDSA65.PrivateKey(seedRepresentation: raw, publicKey: nil)
            case .mlDSA87: key = try MLDSA87.PrivateKey(seedRepresentation: raw, publicKey: nil)
            case .rsa: key = RSASigner(key: try _RSA.Signing.PrivateKey(derRepresentation: raw))
            case .secp256k1: key = try Secp256k1Signer(scalar: raw)
            }
        } catch {
            throw CTAPError(.other, "a stored private key is invalid: \(error)")
        }
    }

    /// The raw private key: the ECDSA scalar, the Ed25519 or ML-DSA seed, or the RSA key's PKCS#1 DER.
    var raw: [UInt8] { key.raw }

    /// The COSE_Key of the public key, with this credential's algorithm.
    var coseKey: CBORValue { key.coseKey(algorithm) }

    /// The signature over `data`: DER ECDSA, a 64-byte Ed25519 signature, a FIPS 204 ML-DSA signature with the
    /// empty context (RFC 9964), or an RSA signature (PKCS#1 v1.5 for RS256, PSS for PS256; SHA-256).
    func sign(_ data: [UInt8]) throws(CTAPError) -> [UInt8] {
        do {
            return try key.sign(data, algorithm)
        } catch {
            throw CTAPError(.other, "signing failed: \(error)")
        }
    }
}

/// A swift-crypto private key that signs for credentials.
protocol CredentialSigner: Sendable {
    var raw: [UInt8] { get }
    func coseKey(_ algorithm: CredentialAlgorithm) -> CBORValue
    func sign(_ data: [UInt8]) throws -> [UInt8]
    func sign(_ data: [UInt8], _ algorithm: CredentialAlgorithm) throws -> [UInt8]
}

extension CredentialSigner {
    func sign(_ data: [UInt8], _ algorithm: CredentialAlgorithm) throws -> [UInt8] { try sign(data) }
}

/// A secp256k1 key (ES256K): the system libcrypto signs with it (swift-crypto has no such curve).
struct Secp256k1Signer: CredentialSigner {
    struct InvalidKey: Error {}

    let scalar: [UInt8]
    let point: [UInt8]

    init(scalar: [UInt8]) throws {
        guard let point = Secp256k1ECDSA.publicPoint(scalar: scalar) else { throw InvalidKey() }
        self.scalar = scalar
        self.point = point
    }

    var raw: [UInt8] { scalar }

    func coseKey(_ algorithm: CredentialAlgorithm) -> CBORValue { COSEKey.ec2(algorithm, curve: 8, x963: point) }

    func sign(_ data: [UInt8]) throws -> [UInt8] {
        guard let der = Secp256k1ECDSA.sign(scalar: scalar, message: data) else { throw InvalidKey() }
        return der
    }
}

/// An RSA key: the algorithm picks the padding.
struct RSASigner: CredentialSigner {
    let key: _RSA.Signing.PrivateKey

    var raw: [UInt8] { Array(key.derRepresentation) }

    /// An RSA key: kty 3, alg, n and e as unsigned big-endian integers without leading zeros.
    func coseKey(_ algorithm: CredentialAlgorithm) -> CBORValue {
        guard let primitives = try? key.publicKey.getKeyPrimitives() else { return .null }
        func unsigned(_ bytes: some Collection<UInt8>) -> [UInt8] { Array(bytes.drop { $0 == 0 }) }
        return [
            1: 3, 3: CBORValue(algorithm.rawValue), -1: .byteString(unsigned(primitives.modulus)),
            -2: .byteString(unsigned(primitives.publicExponent)),
        ]
    }

    func sign(_ data: [UInt8]) throws -> [UInt8] { try sign(data, .rs256) }

    func sign(_ data: [UInt8], _ algorithm: CredentialAlgorithm) throws -> [UInt8] {
        let padding: _RSA.Signing.Padding = algorithm == .ps256 ? .PSS : .insecurePKCS1v1_5
        return Array(try key.signature(for: data, padding: padding).rawRepresentation)
    }
}

extension P256.Signing.PrivateKey: CredentialSigner {
    var raw: [UInt8] { Array(rawRepresentation) }
    func coseKey(_ algorithm: CredentialAlgorithm) -> CBORValue {
        COSEKey.ec2(algorithm, curve: 1, x963: Array(publicKey.x963Representation))
    }
    func sign(_ data: [UInt8]) throws -> [UInt8] { Array(try signature(for: data).derRepresentation) }
}

extension P384.Signing.PrivateKey: CredentialSigner {
    var raw: [UInt8] { Array(rawRepresentation) }
    func coseKey(_ algorithm: CredentialAlgorithm) -> CBORValue {
        COSEKey.ec2(algorithm, curve: 2, x963: Array(publicKey.x963Representation))
    }
    func sign(_ data: [UInt8]) throws -> [UInt8] { Array(try signature(for: data).derRepresentation) }
}

extension P521.Signing.PrivateKey: CredentialSigner {
    var raw: [UInt8] { Array(rawRepresentation) }
    func coseKey(_ algorithm: CredentialAlgorithm) -> CBORValue {
        COSEKey.ec2(algorithm, curve: 3, x963: Array(publicKey.x963Representation))
    }
    func sign(_ data: [UInt8]) throws -> [UInt8] { Array(try signature(for: data).derRepresentation) }
}

extension Curve25519.Signing.PrivateKey: CredentialSigner {
    var raw: [UInt8] { Array(rawRepresentation) }
    func coseKey(_ algorithm: CredentialAlgorithm) -> CBORValue {
        COSEKey.okp(algorithm, x: Array(publicKey.rawRepresentation))
    }
    func sign(_ data: [UInt8]) throws -> [UInt8] { Array(try signature(for: data)) }
}

extension MLDSA65.PrivateKey: CredentialSigner {
    var raw: [UInt8] { Array(seedRepresentation) }
    func coseKey(_ algorithm: CredentialAlgorithm) -> CBORValue {
        COSEKey.akp(algorithm, publicKey: Array(publicKey.rawRepresentation))
    }
    func sign(_ data: [UInt8]) throws -> [UInt8] { Array(try signature(for: data)) }
}

extension MLDSA87.PrivateKey: CredentialSigner {
    var raw: [UInt8] { Array(seedRepresentation) }
    func coseKey(_ algorithm: CredentialAlgorithm) -> CBORValue {
        COSEKey.akp(algorithm, publicKey: Array(publicKey.rawRepresentation))
    }
    func sign(_ data: [UInt8]) throws -> [UInt8] { Array(try signature(for: data)) }
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
