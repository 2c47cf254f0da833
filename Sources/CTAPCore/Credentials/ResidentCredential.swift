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
