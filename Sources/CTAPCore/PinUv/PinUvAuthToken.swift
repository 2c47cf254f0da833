/// Permissions of a pinUvAuthToken (CTAP 2.1 §6.5.5.7).
package struct PinUvPermissions: OptionSet, Sendable, Equatable {
    package let rawValue: Int
    package init(rawValue: Int) { self.rawValue = rawValue }

    /// mc: makeCredential.
    package static let makeCredential = PinUvPermissions(rawValue: 0x01)
    /// ga: getAssertion.
    package static let getAssertion = PinUvPermissions(rawValue: 0x02)
    /// cm: credential management.
    package static let credentialManagement = PinUvPermissions(rawValue: 0x04)
    /// be: bio enrollment.
    package static let bioEnrollment = PinUvPermissions(rawValue: 0x08)
    /// lbw: large blob write.
    package static let largeBlobWrite = PinUvPermissions(rawValue: 0x10)
    /// acfg: authenticator configuration.
    package static let authenticatorConfiguration = PinUvPermissions(rawValue: 0x20)
    /// pcmr: persistent read-only credential management (CTAP 2.2).
    package static let persistentCredentialManagementReadOnly = PinUvPermissions(rawValue: 0x40)
}

/// The pinUvAuthToken and its state (CTAP 2.1 §6.5.2.1): one token shared by both PIN/UV auth protocols,
/// its permissions and permissions RP ID, the user present and user verified flags, and the usage timer.
///
/// Time is passed in; every read first applies the timer, so an expired token is simply not in use.
struct PinUvAuthToken: Sendable {
    /// How long a token obtained but never used stays valid (initialUsageTimeLimit, USB default 30 s).
    static let initialUsageTimeLimit: Duration = .seconds(30)
    /// How long the user present flag of a token stays set (userPresentTimeLimit).
    static let userPresentTimeLimit: Duration = .seconds(30)
    /// The longest a token stays valid after it was obtained (maxUsageTimePeriod, 10 minutes).
    static let maxUsageTimePeriod: Duration = .seconds(600)

    /// The token's 32 bytes; a new value by ``reset(value:)``.
    private(set) var value: [UInt8]
    private(set) var inUse = false
    private(set) var permissions: PinUvPermissions = []
    /// The permissions RP ID: set when the token was obtained with an rpId, or by its first use.
    private(set) var rpId: String?
    private var startTime: Duration = .zero
    private var usedOnce = false
    private var userPresent = false
    private var userVerified = false
    /// A token of the CTAP 2.0 or FIDO_2_1_PRE model (getPinToken on such a profile): no permissions, no RP
    /// binding, no flags spent by use, no usage timer; it lasts until replaced, a power cycle or a PIN change.
    private(set) var withoutPermissions = false
    /// Handed out by getPinToken (clientPIN 0x05), whatever the model.
    private(set) var fromGetPinToken = false

    init(value: [UInt8]) {
        self.value = value
    }

    /// resetPinUvAuthToken: a new random value and no state (power-up, and each token obtained).
    mutating func reset(value newValue: [UInt8]) {
        self = PinUvAuthToken(value: newValue)
    }

    /// beginUsingPinUvAuthToken: the token is handed out with these permissions and flags.
    mutating func begin(
        permissions: PinUvPermissions,
        rpId: String?,
        userIsPresent: Bool,
        now: Duration,
        fromGetPinToken: Bool = false,
        withoutPermissions: Bool = false
    ) {
        inUse = true
        self.fromGetPinToken = fromGetPinToken
        self.withoutPermissions = withoutPermissions
        self.permissions = permissions
        self.rpId = rpId
        userPresent = userIsPresent
        userVerified = true
        startTime = now
        usedOnce = false
    }

    /// stopUsingPinUvAuthToken.
    mutating func stop() {
        inUse = false
        permissions = []
        rpId = nil
        userPresent = false
        userVerified = false
        fromGetPinToken = false
        withoutPermissions = false
    }

    /// Applies the usage timer: stops the token when its time is up and clears the user present flag when
    /// its limit has passed.
    mutating func applyTimer(now: Duration) {
        guard inUse, !withoutPermissions else { return }
        let age = now - startTime
        if age > Self.maxUsageTimePeriod || (!usedOnce && age > Self.initialUsageTimeLimit) {
            stop()
            return
        }
        if age > Self.userPresentTimeLimit { userPresent = false }
    }

    /// Whether the token is in use at `now`.
    mutating func isInUse(now: Duration) -> Bool {
        applyTimer(now: now)
        return inUse
    }

    /// Records a use of the token (the initial usage limit no longer applies).
    mutating func markUsed() { usedOnce = true }

    /// Sets the permissions RP ID on a token that has none (its first use for an RP).
    mutating func bind(rpId: String) { self.rpId = rpId }

    /// getUserPresentFlagValue.
    mutating func userPresentFlag(now: Duration) -> Bool {
        applyTimer(now: now)
        return inUse && userPresent
    }

    /// getUserVerifiedFlagValue.
    mutating func userVerifiedFlag(now: Duration) -> Bool {
        applyTimer(now: now)
        return inUse && userVerified
    }

    mutating func clearUserPresentFlag() { userPresent = false }
    mutating func clearUserVerifiedFlag() { userVerified = false }

    /// clearPinUvAuthTokenPermissionsExceptLbw.
    mutating func clearPermissionsExceptLargeBlobWrite() {
        permissions = permissions.intersection(.largeBlobWrite)
    }

    /// Whether the token authorises `permission`: a token without permissions authorises makeCredential and
    /// getAssertion (the preview commands take it too: ``Authenticator/previewAcceptsGetPinToken``).
    func authorises(_ permission: PinUvPermissions) -> Bool {
        if withoutPermissions { return permission.isSubset(of: [.makeCredential, .getAssertion]) }
        return permissions.contains(permission)
    }
}
