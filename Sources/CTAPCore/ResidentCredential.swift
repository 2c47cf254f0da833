/// A user entity as the relying party sent it; text fields are kept byte-exact.
public struct UserEntity: Sendable, Equatable {
    public var id: [UInt8]
    public var name: String?
    public var displayName: String?
    public var icon: String?

    public init(id: [UInt8], name: String? = nil, displayName: String? = nil, icon: String? = nil) {
        self.id = id
        self.name = name
        self.displayName = displayName
        self.icon = icon
    }
}

/// A discoverable (resident) credential stored on the key.
public struct ResidentCredential: Sendable, Equatable {
    /// The credential id handed to the relying party.
    public var id: [UInt8]
    public var rpId: String
    public var rpIdHash: [UInt8]
    public var user: UserEntity
    /// The raw P-256 private scalar (32 bytes).
    public var privateKey: [UInt8]
    /// Creation order: larger is newer.
    public var creationSerial: UInt64

    public init(
        id: [UInt8], rpId: String, rpIdHash: [UInt8], user: UserEntity, privateKey: [UInt8], creationSerial: UInt64
    ) {
        self.id = id
        self.rpId = rpId
        self.rpIdHash = rpIdHash
        self.user = user
        self.privateKey = privateKey
        self.creationSerial = creationSerial
    }
}
