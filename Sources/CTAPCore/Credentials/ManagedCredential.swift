import CTAPCBOR

/// A credential as the control plane reads and writes it: everything needed to use it somewhere else.
package struct ManagedCredential: Sendable, Equatable {
    package var id: [UInt8]
    package var rpId: String
    /// True for a discoverable (resident) credential.
    package var discoverable: Bool
    /// The private key as PKCS#8 DER.
    package var privateKey: [UInt8]
    package var algorithm: CredentialAlgorithm
    /// The user id; nil for a non-discoverable credential made through CTAP (the key does not keep it).
    package var userHandle: [UInt8]?
    package var userName: String?
    package var userDisplayName: String?
    /// The key's signature counter (one counter for every credential).
    package var signCount: UInt32
    /// The credential's blob in the large-blob array, if it has a largeBlobKey and an entry opens with it.
    package var largeBlob: [UInt8]?
    /// WebAuthn Level 3 backup eligibility (fixed once the credential exists) and backup state.
    package var backupEligible: Bool
    package var backupState: Bool

    package init(
        id: [UInt8],
        rpId: String,
        discoverable: Bool,
        privateKey: [UInt8],
        algorithm: CredentialAlgorithm = .es256,
        userHandle: [UInt8]? = nil,
        userName: String? = nil,
        userDisplayName: String? = nil,
        signCount: UInt32 = 0,
        largeBlob: [UInt8]? = nil,
        backupEligible: Bool = false,
        backupState: Bool = false
    ) {
        self.largeBlob = largeBlob
        self.backupEligible = backupEligible
        self.backupState = backupState
        self.id = id
        self.rpId = rpId
        self.discoverable = discoverable
        self.privateKey = privateKey
        self.algorithm = algorithm
        self.userHandle = userHandle
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.signCount = signCount
    }
}

/// What a request did with a credential, for the control plane's events.
package struct CredentialActivity: Sendable, Equatable {
    /// The RP ID (nil for U2F, which only sees the application parameter's hash).
    package var rpId: String?
    package var credentialId: [UInt8]
    package var userHandle: [UInt8]?
}

/// PKCS#8 (RFC 5208, RFC 8410, RFC 9881) encodings of credential private keys.
