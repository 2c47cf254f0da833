/// What fidosim knows of each credential algorithm lives in this folder: the algorithm and its facts (this file:
/// COSE identifier, profile name, key kind, raw key length, credential-id byte), key generation
/// (`Authenticator+KeyGeneration.swift`), PKCS#8 (`PrivateKeyEncoding.swift`), the signers and their caches and the
/// COSE public keys (`SigningKey.swift`, `COSEKey.swift`). A new algorithm is a case here and a branch in each of those.

/// A signature algorithm of credentials, by its COSE identifier (IANA COSE Algorithms; RFC 9864 for the fully
/// specified ones, RFC 9964 for ML-DSA). `allCases` is fidosim's order of preference in getInfo.
package enum CredentialAlgorithm: Int, Sendable, Equatable, CaseIterable {
    /// ECDSA with SHA-256 (polymorphic: the key says P-256).
    case es256 = -7
    /// EdDSA (polymorphic: the key says Ed25519).
    case edDSA = -8
    /// ECDSA with SHA-384 on P-384.
    case es384 = -35
    /// ECDSA with SHA-512 on P-521.
    case es512 = -36
    /// ECDSA on P-256 with SHA-256, fully specified (RFC 9864).
    case esp256 = -9
    /// ECDSA on P-384 with SHA-384, fully specified.
    case esp384 = -51
    /// ECDSA on P-521 with SHA-512, fully specified.
    case esp512 = -52
    /// Ed25519, fully specified.
    case ed25519 = -19
    /// ML-DSA-65 (FIPS 204), empty context.
    case mlDSA65 = -49
    /// ML-DSA-87 (FIPS 204), empty context.
    case mlDSA87 = -50
    /// RSASSA-PKCS1-v1_5 with SHA-256, 2048-bit keys.
    case rs256 = -257
    /// RSASSA-PSS with SHA-256, MGF1 with SHA-256 and a 32-byte salt, 2048-bit keys.
    case ps256 = -37
    /// ECDSA on secp256k1 with SHA-256 (RFC 8812), through the system libcrypto.
    case es256K = -47

    /// The name a profile file uses (the COSE registry's).
    package var name: String {
        switch self {
        case .es256: "ES256"
        case .edDSA: "EdDSA"
        case .es384: "ES384"
        case .es512: "ES512"
        case .esp256: "ESP256"
        case .esp384: "ESP384"
        case .esp512: "ESP512"
        case .ed25519: "Ed25519"
        case .mlDSA65: "ML-DSA-65"
        case .mlDSA87: "ML-DSA-87"
        case .rs256: "RS256"
        case .ps256: "PS256"
        case .es256K: "ES256K"
        }
    }

    package init?(name: String) {
        guard let known = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = known
    }

    /// The key behind the algorithm: the curve of the ECDSA ones, or the scheme.
    enum KeyKind: Sendable, Equatable {
        case p256, p384, p521, ed25519, mlDSA65, mlDSA87, rsa, secp256k1
    }

    var keyKind: KeyKind {
        switch self {
        case .es256, .esp256: .p256
        case .es384, .esp384: .p384
        case .es512, .esp512: .p521
        case .edDSA, .ed25519: .ed25519
        case .mlDSA65: .mlDSA65
        case .mlDSA87: .mlDSA87
        case .rs256, .ps256: .rsa
        case .es256K: .secp256k1
        }
    }

    /// The length of the raw private key as stored: the ECDSA scalar, the Ed25519 seed or the ML-DSA seed; nil for
    /// RSA, whose stored key is its PKCS#1 DER (about 1,200 bytes at 2048 bits).
    package var rawKeyLength: Int? {
        switch keyKind {
        case .p256, .ed25519, .mlDSA65, .mlDSA87, .secp256k1: 32
        case .p384: 48
        case .p521: 66
        case .rsa: nil
        }
    }

    /// Whether `count` bytes can be a raw key of this algorithm.
    package func isRawKeyLength(_ count: Int) -> Bool {
        rawKeyLength.map { $0 == count } ?? (1...4096).contains(count)
    }

    /// The bytes of the private key a credential id carries: none for RSA, whose keys stay in flash.
    var idKeyLength: Int { rawKeyLength ?? 0 }

    /// The algorithm's byte in a credential id's plaintext (``CredentialID``). Never reuse one: ids made by earlier
    /// versions name their algorithm with it (1 and 2 predate ES384).
    var idByte: UInt8 {
        switch self {
        case .es256: 1
        case .edDSA: 2
        case .es384: 3
        case .es512: 4
        case .esp256: 5
        case .esp384: 6
        case .esp512: 7
        case .ed25519: 8
        case .mlDSA65: 9
        case .mlDSA87: 10
        case .rs256: 11
        case .ps256: 12
        case .es256K: 13
        }
    }

    init?(idByte: UInt8) {
        guard let known = Self.allCases.first(where: { $0.idByte == idByte }) else { return nil }
        self = known
    }
}
