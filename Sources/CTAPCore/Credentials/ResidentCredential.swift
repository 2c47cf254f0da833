/// A user entity as the relying party sent it; text fields are kept byte-exact.
package struct UserEntity: Sendable, Equatable {
    package var id: [UInt8]
    package var name: String?
    package var displayName: String?
    package var icon: String?

    package init(id: [UInt8], name: String? = nil, displayName: String? = nil, icon: String? = nil) {
        self.id = id
        self.name = name
        self.displayName = displayName
        self.icon = icon
    }
}

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
}

/// The credProtect level of a credential (CTAP 2.1 §12.1).
package enum CredProtect: UInt8, Sendable, Equatable, Comparable, CaseIterable {
    /// userVerificationOptional: the credential is used like any other.
    case optional = 1
    /// userVerificationOptionalWithCredentialIDList: without UV, only when its id is in the allow list.
    case optionalWithCredentialIDList = 2
    /// userVerificationRequired: only with user verification.
    case required = 3

    package static func < (lhs: CredProtect, rhs: CredProtect) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A discoverable (resident) credential stored on the key.
package struct ResidentCredential: Sendable, Equatable {
    /// The credential id handed to the relying party.
    package var id: [UInt8]
    package var rpId: String
    package var rpIdHash: [UInt8]
    package var user: UserEntity
    /// The raw private key: the ECDSA scalar or the Ed25519 or ML-DSA seed (``CredentialAlgorithm/rawKeyLength``).
    package var privateKey: [UInt8]
    /// Creation order: larger is newer.
    package var creationSerial: UInt64
    package var algorithm: CredentialAlgorithm
    package var credProtect: CredProtect
    /// Whether the credential was made with the hmac-secret extension.
    package var hmacSecret: Bool
    /// The credBlob extension's blob (at most 32 bytes), if one was stored.
    package var credBlob: [UInt8]?
    /// The largeBlobKey extension's 32-byte key, if one was made.
    package var largeBlobKey: [UInt8]?
    /// Made with the thirdPartyPayment extension (CTAP 2.2).
    package var thirdPartyPayment: Bool
    /// False for a non-discoverable credential that the control plane imported with an id of its own: it is
    /// stored so that an allow list finds it, but discovery and credential management do not list it.
    package var discoverable: Bool
    /// WebAuthn Level 3 backup eligibility (fixed when the credential is made) and backup state.
    package var backupEligible: Bool
    package var backupState: Bool

    package init(
        id: [UInt8],
        rpId: String,
        rpIdHash: [UInt8],
        user: UserEntity,
        privateKey: [UInt8],
        creationSerial: UInt64,
        algorithm: CredentialAlgorithm = .es256,
        credProtect: CredProtect = .optional,
        hmacSecret: Bool = false,
        credBlob: [UInt8]? = nil,
        largeBlobKey: [UInt8]? = nil,
        thirdPartyPayment: Bool = false,
        discoverable: Bool = true,
        backupEligible: Bool = false,
        backupState: Bool = false
    ) {
        self.discoverable = discoverable
        self.backupEligible = backupEligible
        self.backupState = backupState
        self.thirdPartyPayment = thirdPartyPayment
        self.id = id
        self.rpId = rpId
        self.rpIdHash = rpIdHash
        self.user = user
        self.privateKey = privateKey
        self.creationSerial = creationSerial
        self.algorithm = algorithm
        self.credProtect = credProtect
        self.hmacSecret = hmacSecret
        self.credBlob = credBlob
        self.largeBlobKey = largeBlobKey
    }
}

extension ResidentCredential {
    /// Whether storing `other` replaces this credential: both discoverable, same RP, same user id
    /// (CTAP 2.1 §6.1.2 step 17).
    package func replaces(_ other: ResidentCredential) -> Bool {
        discoverable && other.discoverable && rpIdHash == other.rpIdHash && user.id == other.user.id
    }
}
