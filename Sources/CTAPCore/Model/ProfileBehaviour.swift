/// How a key behaves where CTAP versions differ or the specification leaves a choice, as a profile sets it
/// (firmware-spec/profiles.md; each choice and what known keys do: commands.md, "Where the specification leaves a
/// choice"). The defaults are fidosim's own: CTAP 2.1 as written, and where it leaves a choice, what most current
/// keys do.
package struct ProfileBehaviour: Sendable, Equatable {
    /// What a PIN token is and what getPinToken (clientPIN 0x05) hands out.
    package enum PinTokenModel: String, Sendable, CaseIterable {
        /// CTAP 2.0 §5.5.4: one pinToken per power-up, returned by every getPinToken, good for any number of
        /// requests for any RP until a power cycle or a PIN change; there are no permissions.
        case powerUp
        /// FIDO_2_1_PRE: a getPinToken token has no permissions and authorises everything the key has, the preview
        /// commands 0x40 and 0x41 included; tokens from subcommand 0x09 work as in CTAP 2.1.
        case withoutPermissions
        /// CTAP 2.1 §6.5.2: a new token each time, with permissions (getPinToken: mc and ga), bound to one RP by its
        /// first use, its user verified flag spent by the first makeCredential or getAssertion, usage timers.
        case permissions
    }

    /// What getPINRetries answers on a key without a PIN.
    package enum RetriesWithoutPIN: String, Sendable, CaseIterable {
        /// The retry count (8): CTAP 2.1 §6.5.5.2 has no condition on a PIN being set.
        case count
        /// CTAP2_ERR_PIN_NOT_SET.
        case pinNotSet
    }

    /// Whether getPINRetries needs pinUvAuthProtocol (key 1).
    package enum PinProtocolForRetries: String, Sendable, CaseIterable {
        /// CTAP 2.1 §6.5.5.2: getPINRetries takes no parameter besides the subcommand.
        case optional
        /// CTAP 2.0 §5.5 (pinProtocol "Required" for every subcommand): without it, CTAP2_ERR_MISSING_PARAMETER.
        case required
    }

    /// Which version's rules apply to the options map of makeCredential and getAssertion.
    package enum OptionRules: String, Sendable, CaseIterable {
        /// CTAP 2.0 §5.1, §5.2: "up" is not an option of makeCredential and "rk" not one of getAssertion; either,
        /// present with any value, is CTAP2_ERR_INVALID_OPTION.
        case ctap20 = "ctap2.0"
        /// CTAP 2.1 §6.1.2 step 5, §6.2.2 step 5: up=false in makeCredential is CTAP2_ERR_INVALID_OPTION, up=true
        /// is accepted; rk in getAssertion is CTAP2_ERR_UNSUPPORTED_OPTION.
        case ctap21 = "ctap2.1"

        /// The status of `rk` in getAssertion (CTAP 2.1 §6.2.2 step 5.1: unsupported; CTAP 2.0 §5.2: known but not
        /// valid for this command).
        var rkInGetAssertion: CTAPStatus { self == .ctap20 ? .invalidOption : .unsupportedOption }
    }

    /// The status of a named PIN/UV auth protocol the key does not support.
    package enum UnsupportedProtocolStatus: String, Sendable, CaseIterable {
        /// CTAP 2.1: CTAP1_ERR_INVALID_PARAMETER.
        case invalidParameter
        /// CTAP 2.0 §5.1 step 4, §5.2 step 4: CTAP2_ERR_PIN_AUTH_INVALID.
        case pinAuthInvalid

        var status: CTAPStatus { self == .pinAuthInvalid ? .pinAuthInvalid : .invalidParameter }
    }

    /// The status of setPIN on a key that has a PIN.
    package enum SetPINWhenSetStatus: String, Sendable, CaseIterable {
        /// CTAP 2.0 §5.5.5 and 2.1 §6.5.5.5: CTAP2_ERR_PIN_AUTH_INVALID.
        case pinAuthInvalid
        /// CTAP2_ERR_NOT_ALLOWED (solo 1, trussed, pico-fido, and the fido2-tests suite).
        case notAllowed

        var status: CTAPStatus { self == .notAllowed ? .notAllowed : .pinAuthInvalid }
    }

    /// Where an hmac-secret salt of the wrong size is caught.
    package enum SaltLengthCheck: String, Sendable, CaseIterable {
        /// After saltAuth is verified and saltEnc decrypted: CTAP1_ERR_INVALID_PARAMETER (CTAP 2.1 §12.5 wording).
        case afterDecryption
        /// On the wire, before anything else (saltEnc not 32/64 bytes in protocol 1, 48/80 in protocol 2):
        /// CTAP1_ERR_INVALID_LENGTH.
        case onTheWire
    }

    /// The getInfo option that names credential management on a FIDO_2_1_PRE key without FIDO_2_1.
    package enum PreviewCredentialManagement: String, Sendable, CaseIterable {
        /// `credentialMgmtPreview`, on 0x41 only (YubiKey 5.2–5.4, the CTAP 2.1 review draft).
        case credentialMgmtPreview
        /// `credMgmt`, served on 0x41 and 0x0A alike (Solo 1, `fido2/ctap.c`): platforms that see `credMgmt` send
        /// 0x0A (python-fido2, libfido2).
        case credMgmt
    }

    /// Where a non-discoverable credential's credBlob goes.
    package enum CredBlobNonDiscoverable: String, Sendable, CaseIterable {
        /// Nowhere: the output says `credBlob: false` (canokey-core; CTAP 2.1 §12.2 lets a key refuse).
        case notStored
        /// Into the credential id, sealed with the key (OpenSK, `credential_id.rs`): the id grows by one byte and
        /// the blob, and getInfo's maxCredentialIdLength by 33.
        case inCredentialId
    }

    /// What getNextAssertion, or a credential-management "next", does on another CTAPHID channel (or transport)
    /// than the request that began it.
    package enum NextFromAnotherChannel: String, Sendable, CaseIterable {
        /// It continues: the state belongs to the key (CTAP 2.1 §6.3, §6.8 name no channel; trussed, solo 1,
        /// canokey-core, pico-fido).
        case continued
        /// A request from another channel ends the state first, so the "next" is CTAP2_ERR_NOT_ALLOWED (OpenSK,
        /// clear_old_channels).
        case notAllowed
    }

    /// The errors of clientPIN for a request the key cannot take.
    package enum ClientPINErrors: String, Sendable, CaseIterable {
        /// Each its CTAP code: a missing pinUvAuthProtocol is CTAP2_ERR_MISSING_PARAMETER where needed, an unknown
        /// one ``unsupportedProtocol``, an unknown subcommand CTAP2_ERR_INVALID_SUBCOMMAND (CTAP1_ERR_INVALID_PARAMETER
        /// before CTAP 2.1).
        case ctap
        /// CTAP1_ERR_OTHER (0x7F) for a request whose pinUvAuthProtocol is missing or not the key's, or whose
        /// subcommand is unknown, whatever the subcommand (solo 1, `fido2/ctap.c`, ctap_client_pin).
        case other
    }

    /// What credential management answers on a key with no discoverable credential.
    package enum CredentialManagementWhenEmpty: String, Sendable, CaseIterable {
        /// CTAP2_ERR_NO_CREDENTIALS where there is nothing to enumerate or delete (CTAP 2.1 §6.8).
        case noCredentials
        /// Success with no data for every subcommand but getCredsMetadata, once the token is checked (solo 1,
        /// ctap_cred_mgmt: "No resident keys" returns 0).
        case emptySuccess
    }

    package var pinToken: PinTokenModel
    /// In the CTAP 2.1 token model, the preview commands (0x40, 0x41) accept a getPinToken token, as FIDO_2_1_PRE
    /// platforms send it (pico-fido); false: they need the permission, as 0x0A and 0x09 always do (trussed,
    /// OpenSK, canokey). The other token models always accept it.
    package var previewAcceptsPinToken: Bool
    package var pinRetriesWithoutPIN: RetriesWithoutPIN
    package var pinProtocolForRetries: PinProtocolForRetries
    /// makeCredUvNotRqd (CTAP 2.1 §6.1.2 step 8): once a PIN is set, a non-discoverable credential may still be
    /// made without a token. False: every makeCredential without one is CTAP2_ERR_PUAT_REQUIRED, the byte CTAP 2.0
    /// calls CTAP2_ERR_PIN_REQUIRED (§5.1 step 7), and getInfo says makeCredUvNotRqd false where it has the option.
    package var makeCredUvNotRqd: Bool
    package var optionRules: OptionRules
    /// The clientPIN subcommands that exist; the others are unknown subcommands.
    package var clientPINSubcommands: [Int]
    package var unsupportedProtocol: UnsupportedProtocolStatus
    package var setPINWhenSet: SetPINWhenSetStatus
    package var saltLength: SaltLengthCheck
    package var previewCredentialManagement: PreviewCredentialManagement = .credentialMgmtPreview
    package var credBlobNonDiscoverable: CredBlobNonDiscoverable = .notStored
    package var nextFromAnotherChannel: NextFromAnotherChannel = .continued
    package var clientPINErrors: ClientPINErrors = .ctap
    package var credentialManagementWhenEmpty: CredentialManagementWhenEmpty = .noCredentials

    package init(
        pinToken: PinTokenModel = .permissions,
        previewAcceptsPinToken: Bool = false,
        pinRetriesWithoutPIN: RetriesWithoutPIN = .count,
        pinProtocolForRetries: PinProtocolForRetries = .optional,
        makeCredUvNotRqd: Bool = true,
        optionRules: OptionRules = .ctap21,
        clientPINSubcommands: [Int] = ProfileBehaviour.allClientPINSubcommands,
        unsupportedProtocol: UnsupportedProtocolStatus = .invalidParameter,
        setPINWhenSet: SetPINWhenSetStatus = .pinAuthInvalid,
        saltLength: SaltLengthCheck = .afterDecryption
    ) {
        self.pinToken = pinToken
        self.previewAcceptsPinToken = previewAcceptsPinToken
        self.pinRetriesWithoutPIN = pinRetriesWithoutPIN
        self.pinProtocolForRetries = pinProtocolForRetries
        self.makeCredUvNotRqd = makeCredUvNotRqd
        self.optionRules = optionRules
        self.clientPINSubcommands = clientPINSubcommands
        self.unsupportedProtocol = unsupportedProtocol
        self.setPINWhenSet = setPINWhenSet
        self.saltLength = saltLength
    }

    /// Every clientPIN subcommand of CTAP 2.1.
    package static let allClientPINSubcommands = [1, 2, 3, 4, 5, 6, 7, 9]
    /// The clientPIN subcommands of CTAP 2.0 (§5.5).
    package static let ctap20ClientPINSubcommands = [1, 2, 3, 4, 5]

    /// A CTAP 2.0 key as the 2.0 text describes it.
    package static let ctap20 = ProfileBehaviour(
        pinToken: .powerUp,
        pinProtocolForRetries: .required,
        makeCredUvNotRqd: false,
        optionRules: .ctap20,
        clientPINSubcommands: ctap20ClientPINSubcommands,
        unsupportedProtocol: .pinAuthInvalid
    )

    /// A FIDO_2_1_PRE key: getPinToken tokens without permissions, CTAP 2.0's clientPIN subcommands (the numbers of
    /// the preview's UV subcommands changed in CTAP 2.1, so none are offered), no makeCredUvNotRqd (its getInfo has
    /// no such option, which CTAP 2.1 §6.1.2 step 8 reads as false), CTAP 2.1's other rules.
    package static let ctap21Preview = ProfileBehaviour(
        pinToken: .withoutPermissions,
        makeCredUvNotRqd: false,
        clientPINSubcommands: ctap20ClientPINSubcommands
    )

    /// What a key of these versions does unless its profile says otherwise: CTAP 2.0's rules without
    /// FIDO_2_1(_PRE), the preview's with FIDO_2_1_PRE alone, fidosim's own with FIDO_2_1.
    package static func forVersions(_ versions: [String]) -> ProfileBehaviour {
        if versions.contains("FIDO_2_1") { return ProfileBehaviour() }
        if versions.contains("FIDO_2_1_PRE") { return .ctap21Preview }
        return .ctap20
    }

    /// Why a behaviour does not fit the versions of its profile, or nil.
    func problem(versions: [String]) -> String? {
        if let bad = clientPINSubcommands.first(where: { !Self.allClientPINSubcommands.contains($0) }) {
            return "clientPinSubcommands: \(bad) is not a clientPIN subcommand (1–7, 9)"
        }
        for needed in [1, 2, 3, 4, 5] where !clientPINSubcommands.contains(needed) {
            return "clientPinSubcommands must contain 1 to 5 (CTAP 2.0's)"
        }
        if pinToken != .powerUp && !versions.contains("FIDO_2_1") && !versions.contains("FIDO_2_1_PRE")
            && versions.contains("FIDO_2_0")
        {
            return "pinToken \(pinToken.rawValue) needs FIDO_2_1 or FIDO_2_1_PRE; a FIDO_2_0 key has powerUp"
        }
        return nil
    }
}
