/// Static settings of an authenticator: identity, limits and run options.
package struct AuthenticatorConfiguration: Sendable, Equatable {
    /// The AAGUID reported in getInfo and attested credential data.
    package var aaguid: [UInt8]
    /// When true, authenticatorReset is refused more than ``resetWindow`` after power-up.
    package var resetWindowEnabled: Bool
    /// How long after power-up authenticatorReset is allowed.
    package var resetWindow: Duration
    /// How long the state for authenticatorGetNextAssertion lives after the previous assertion.
    package var getNextAssertionTimeout: Duration
    /// The most discoverable credentials the key accepts (the storage may hold fewer).
    package var maxResidentCredentials: Int
    /// The largest CTAP message the transport accepts (reported as maxMsgSize).
    package var maxMessageSize: Int
    /// Firmware version reported in getInfo.
    package var firmwareVersion: Int
    /// The RP IDs that may read the minimum PIN length through the minPinLength extension.
    package var minPinLengthRPIDs: [String]
    /// The largest serialized large-blob array (getInfo maxSerializedLargeBlobArray).
    package var maxLargeBlobArray: Int
    /// A simulated fingerprint sensor: built-in user verification and authenticatorBioEnrollment.
    package var fingerprintSensor: Bool
    /// Fingerprints enrolled at start when the sensor is on and none are (a test rig's shortcut).
    package var preEnrolledFingerprints: Int
    /// RP IDs for vendor-facilitated enterprise attestation (makeCredential enterpriseAttestation 1).
    package var enterpriseAttestationRPIDs: [String]
    /// The attestation a key without a batch of its own gives: a batch (``SharedBatchAttestation``, which `serve`
    /// gives every key whose profile does not say `"attestation": "self"`), or nil for self attestation.
    package var defaultAttestation: BatchAttestationKey?
    /// The model of key presented (``KeyProfile/fidosim`` by default).
    package var profile: KeyProfile
    /// The transports over which authenticatorReset is allowed (getInfo transportsForReset, CTAP 2.2).
    package var transportsForReset: [String]
    /// The transport the current request arrived on (`usb` for every HID transport, `nfc` for the card).
    package var transport: String
    /// The transports the key is reachable on (getInfo transports).
    package var transports: [String]
    /// The URL of the PIN complexity policy (getInfo pinComplexityPolicyURL, CTAP 2.2), if the key names one.
    package var pinComplexityPolicyURL: String?
    /// New credentials are backup eligible (WebAuthn Level 3 BE), and backed up (BS).
    package var backupEligible: Bool
    package var backupState: Bool
    /// alwaysUv is on from the factory (a profile's `alwaysUv`): at the first start and after every reset, unless
    /// authenticatorConfig or the control plane chose otherwise since the last reset.
    package var alwaysUvByDefault: Bool

    /// fidosim's AAGUID: `f1d0f1d0-5157-4e00-8a6e-000000000001`.
    package static let fidosimAAGUID: [UInt8] = [
        0xF1, 0xD0, 0xF1, 0xD0, 0x51, 0x57, 0x4E, 0x00, 0x8A, 0x6E, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    ]

    package init(
        aaguid: [UInt8] = AuthenticatorConfiguration.fidosimAAGUID,
        resetWindowEnabled: Bool = true,
        resetWindow: Duration = .seconds(10),
        getNextAssertionTimeout: Duration = .seconds(30),
        maxResidentCredentials: Int = 10_000,
        maxMessageSize: Int = 7609,
        firmwareVersion: Int = 1,
        minPinLengthRPIDs: [String] = [],
        maxLargeBlobArray: Int = 4096,
        fingerprintSensor: Bool = false,
        preEnrolledFingerprints: Int = 0,
        enterpriseAttestationRPIDs: [String] = [],
        profile: KeyProfile = .fidosim,
        transportsForReset: [String] = ["usb"],
        transport: String = "usb",
        transports: [String] = ["usb"],
        pinComplexityPolicyURL: String? = nil,
        backupEligible: Bool = false,
        backupState: Bool = false,
        alwaysUvByDefault: Bool = false
    ) {
        self.alwaysUvByDefault = alwaysUvByDefault
        self.backupEligible = backupEligible
        self.backupState = backupState
        self.profile = profile
        self.transportsForReset = transportsForReset
        self.transport = transport
        self.transports = transports
        self.pinComplexityPolicyURL = pinComplexityPolicyURL
        self.enterpriseAttestationRPIDs = enterpriseAttestationRPIDs
        self.fingerprintSensor = fingerprintSensor
        self.preEnrolledFingerprints = preEnrolledFingerprints
        self.maxLargeBlobArray = maxLargeBlobArray
        self.minPinLengthRPIDs = minPinLengthRPIDs
        self.aaguid = aaguid
        self.resetWindowEnabled = resetWindowEnabled
        self.resetWindow = resetWindow
        self.getNextAssertionTimeout = getNextAssertionTimeout
        self.maxResidentCredentials = maxResidentCredentials
        self.maxMessageSize = maxMessageSize
        self.firmwareVersion = firmwareVersion
    }
}
