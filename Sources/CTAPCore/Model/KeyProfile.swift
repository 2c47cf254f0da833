package import CTAPCBOR

/// What model of security key the authenticator presents: its versions, features, limits and quirks.
///
/// The default is fidosim itself (everything implemented). A narrower profile makes the key behave like an
/// older or smaller model, so that a relying party can be tested against the keys its users own: what the profile
/// leaves out is neither advertised in getInfo nor answered (a command of a version the profile lacks is
/// CTAP1_ERR_INVALID_COMMAND, an extension it lacks is ignored, a PIN protocol it lacks is
/// CTAP1_ERR_INVALID_PARAMETER, an algorithm it lacks is never chosen).
package struct KeyProfile: Sendable, Equatable {
    package var name: String
    /// getInfo versions: a subset of `U2F_V2`, `FIDO_2_0`, `FIDO_2_1_PRE`, `FIDO_2_1`, `FIDO_2_3`.
    package var versions: [String]
    /// Extensions the key knows (nil: every one fidosim implements).
    package var extensions: [String]?
    /// PIN/UV auth protocols, in getInfo order.
    package var pinUvAuthProtocols: [Int]
    /// Credential algorithms, in preference order.
    package var algorithms: [CredentialAlgorithm]
    /// getInfo maxCredentialCountInList: longer allow and exclude lists are refused with CTAP2_ERR_LIMIT_EXCEEDED.
    package var maxCredentialCountInList: Int
    /// getInfo maxCredentialIdLength when the imitated key says more than the length of fidosim's own ids (solo 1
    /// says 128); nil: the longest id this profile makes.
    package var maxCredentialIdLength: Int?
    /// A quirk of some keys: the user's displayName is not stored with a discoverable credential.
    package var dropsDisplayName: Bool
    /// Quirk: these CTAP2 command bytes always answer the given status byte.
    package var forcedStatus: [UInt8: UInt8]
    /// Quirk: allow and exclude lists longer than maxCredentialCountInList are refused (CTAP2_ERR_LIMIT_EXCEEDED)
    /// instead of searched.
    package var rejectsLargeLists: Bool
    /// How the key behaves where CTAP versions differ or the specification leaves a choice.
    package var behaviour: ProfileBehaviour
    /// A captured key's getInfo map (a profile from `fidosim profile capture`): getInfo answers its members, with
    /// the live values of those that follow the key's state (``Authenticator/capturedInfo(live:)``).
    package var capturedInfo: [CBORValue: CBORValue]?
    /// A captured key's answers to stateless probes: a CTAP2 message equal to a key gets its value (status byte
    /// and body), as the captured key answered.
    package var cannedAnswers: [[UInt8]: [UInt8]] = [:]
    /// The same for U2F messages (the answer ends with the status word).
    package var cannedU2FAnswers: [[UInt8]: [UInt8]] = [:]

    package init(
        name: String = "fidosim",
        versions: [String] = KeyProfile.allVersions,
        extensions: [String]? = nil,
        pinUvAuthProtocols: [Int] = [2, 1],
        algorithms: [CredentialAlgorithm] = CredentialAlgorithm.allCases,
        maxCredentialCountInList: Int = 8,
        dropsDisplayName: Bool = false,
        forcedStatus: [UInt8: UInt8] = [:],
        rejectsLargeLists: Bool = false,
        behaviour: ProfileBehaviour? = nil
    ) {
        self.behaviour = behaviour ?? .forVersions(versions)
        self.rejectsLargeLists = rejectsLargeLists
        self.name = name
        self.versions = versions
        self.extensions = extensions
        self.pinUvAuthProtocols = pinUvAuthProtocols
        self.algorithms = algorithms
        self.maxCredentialCountInList = maxCredentialCountInList
        self.dropsDisplayName = dropsDisplayName
        self.forcedStatus = forcedStatus
    }

    package static let allVersions = ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1", "FIDO_2_3"]
    /// Every extension fidosim implements.
    package static var allExtensions: [String] { ExtensionName.supported }

    /// fidosim with everything it implements.
    package static let fidosim = KeyProfile()

    package var speaksCTAP2: Bool { versions.contains("FIDO_2_0") }
    package var speaksU2F: Bool { versions.contains("U2F_V2") }
    package var ctap21: Bool { versions.contains("FIDO_2_1") }
    package var ctap21Preview: Bool { versions.contains("FIDO_2_1_PRE") }
    /// CTAP 2.3 (and the 2.2 features it carries, which have no version string of their own).
    package var ctap23: Bool { versions.contains("FIDO_2_3") }

    /// Whether a command byte exists for this profile.
    func allows(_ command: CTAPCommand) -> Bool {
        switch command {
        case .makeCredential, .getAssertion, .getInfo, .clientPIN, .reset, .getNextAssertion: speaksCTAP2
        case .credentialManagement:
            ctap21 || (ctap21Preview && behaviour.previewCredentialManagement == .credMgmt)
        case .selection, .bioEnrollment, .largeBlobs, .config: ctap21
        case .credentialManagementPreview, .bioEnrollmentPreview: ctap21Preview
        }
    }

    func allows(extension name: String) -> Bool {
        if name == ExtensionName.pinComplexityPolicy && !ctap23 { return false }
        return extensions?.contains(name) ?? true
    }

    /// Why a profile is not consistent, or nil.
    /// The longest credential id this profile makes (``CredentialID``; a credBlob kept in the id adds 33 bytes).
    var longestCredentialId: Int {
        let longestKey = algorithms.map(CredentialID.length).max() ?? CredentialID.length(.es256)
        return longestKey + (behaviour.credBlobNonDiscoverable == .inCredentialId ? 1 + maxCredBlobLength : 0)
    }

    package var problem: String? {
        if versions.isEmpty { return "no versions" }
        if let unknown = versions.first(where: { !Self.allVersions.contains($0) }) {
            return "unknown version \(unknown)"
        }
        if !speaksCTAP2 && (ctap21 || ctap21Preview) { return "FIDO_2_1 without FIDO_2_0" }
        if ctap23 && !ctap21 { return "FIDO_2_3 without FIDO_2_1" }
        if pinUvAuthProtocols.isEmpty || pinUvAuthProtocols.contains(where: { $0 != 1 && $0 != 2 }) {
            return "pinUvAuthProtocols must be 1 and/or 2"
        }
        if speaksCTAP2 && !ctap21 && pinUvAuthProtocols.contains(2) { return "PIN/UV auth protocol 2 needs FIDO_2_1" }
        if algorithms.isEmpty { return "no algorithms" }
        if !(1...64).contains(maxCredentialCountInList) { return "maxCredentialCountInList must be 1 to 64" }
        if let length = maxCredentialIdLength {
            let longest = longestCredentialId
            guard (longest...1024).contains(length) else {
                return "maxCredentialIdLength must be \(longest) to 1024: this profile's ids are up to \(longest) bytes"
            }
        }
        return behaviour.problem(versions: versions)
    }
}
