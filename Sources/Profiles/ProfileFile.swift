import CTAPCBOR
package import CTAPCore
package import ControlProtocol

/// A key profile as a JSON file: the built-in ones (BuiltInProfiles.swift), or a user's own.
///
/// `{"name", "description", "versions", "extensions", "pinUvAuthProtocols",
/// "algorithms" (COSE names: "ES256", "EdDSA", "ES384", …), "maxCredentialCountInList", "maxResidentCredentials", "maxMsgSize", "alwaysUv", "aaguid",
/// "backupEligible", "backupState", "attestation" ("shared-batch" or "self"),
/// "quirks": {"dropsDisplayName", "rejectsLargeLists", "forcedStatus": {"makeCredential": 40, …}}}`; every member
/// but name is optional and defaults to fidosim's.
package struct ProfileFile {
    package var profile: KeyProfile
    package var description: String
    package var maxResidentCredentials: Int?
    package var maxMessageSize: Int?
    package var alwaysUv: Bool
    package var aaguid: [UInt8]?
    /// New credentials are backup eligible, backed up (WebAuthn Level 3 BE and BS).
    package var backupEligible: Bool = false
    package var backupState: Bool = false
    /// The attestation of a key without a batch of its own: fidosim's shared batch (the default) or self attestation.
    package var selfAttestation = false
    /// What a captured key presents beyond getInfo (a profile from `fidosim profile capture`).
    package var identity = CapturedIdentity()

    static let members: Set<String> = [
        "name", "description", "versions", "extensions", "pinUvAuthProtocols", "algorithms",
        "maxCredentialCountInList", "maxCredentialIdLength", "maxResidentCredentials", "maxMsgSize", "alwaysUv",
        "aaguid", "quirks",
        "behaviour", "backupEligible", "backupState", "capture", "attestation",
    ]
    static let behaviourMembers: Set<String> = [
        "pinToken", "previewAcceptsPinToken", "pinRetriesWithoutPin", "pinProtocolForRetries", "makeCredUvNotRqd",
        "optionRules",
        "clientPinSubcommands", "unsupportedPinProtocol", "setPinWhenSet", "hmacSecretSaltLength",
        "previewCredentialManagement", "credBlobNonDiscoverable", "nextFromAnotherChannel", "clientPinErrors",
        "credentialManagementWhenEmpty",
    ]
    static let commandNames: [String: UInt8] = [
        "makeCredential": 0x01, "getAssertion": 0x02, "getInfo": 0x04, "clientPIN": 0x06, "reset": 0x07,
        "getNextAssertion": 0x08, "bioEnrollment": 0x09, "credentialManagement": 0x0A, "selection": 0x0B,
        "largeBlobs": 0x0C, "config": 0x0D,
    ]

    /// The names of the built-in profiles.
    package static var builtInNames: [String] { builtIn.keys.sorted() }

    /// Whether `nameOrPath` names a file (anything with a '/' or ending in .json) rather than a built-in profile.
    package static func isPath(_ nameOrPath: String) -> Bool {
        nameOrPath.contains("/") || nameOrPath.hasSuffix(".json")
    }

    /// A built-in profile by name.
    package static func builtIn(named name: String) throws -> ProfileFile {
        guard let json = builtIn[name] else {
            throw KeySetupError(
                "no profile named \(name); built in: \(builtInNames.joined(separator: ", ")), or give a path"
            )
        }
        return try load(text: Array(json.utf8), source: "\(name) (built in)")
    }

    /// A profile from its JSON text; `source` names it in errors (a path, or a built-in name).
    package static func load(text: [UInt8], source: String) throws -> ProfileFile {
        let document: JSONValue
        do {
            document = try JSONParser.parse(text)
        } catch {
            throw KeySetupError("profile \(source) is not JSON: \(error)")
        }
        do {
            return try parse(document)
        } catch let error as KeySetupError {
            throw KeySetupError("profile \(source): \(error.message)")
        }
    }

    package static func parse(_ document: JSONValue) throws -> ProfileFile {
        guard case .object(let fields) = document else { throw KeySetupError("a profile is a JSON object") }
        for key in fields.keys.sorted() where !members.contains(key) {
            throw KeySetupError("unknown member \"\(key)\"")
        }
        func strings(_ key: String) throws -> [String]? {
            guard let value = fields[key] else { return nil }
            guard let list = value.arrayValue?.compactMap(\.stringValue), list.count == value.arrayValue?.count else {
                throw KeySetupError("\"\(key)\" must be an array of strings")
            }
            return list
        }
        func integer(_ key: String, _ range: ClosedRange<Int64>, in object: [String: JSONValue]? = nil) throws -> Int? {
            guard let value = (object ?? fields)[key] else { return nil }
            guard let n = value.integerValue, range.contains(n) else {
                throw KeySetupError("\"\(key)\" must be an integer from \(range.lowerBound) to \(range.upperBound)")
            }
            return Int(n)
        }
        func flag(_ key: String, in object: [String: JSONValue]? = nil) throws -> Bool {
            guard let value = (object ?? fields)[key] else { return false }
            guard let b = value.boolValue else { throw KeySetupError("\"\(key)\" must be true or false") }
            return b
        }
        guard let name = fields["name"]?.stringValue, !name.isEmpty else { throw KeySetupError("\"name\" is missing") }
        var profile = KeyProfile(name: name)
        if let versions = try strings("versions") { profile.versions = versions }
        if let extensions = try strings("extensions") {
            for e in extensions where !KeyProfile.allExtensions.contains(e) {
                throw KeySetupError(
                    "unknown extension \"\(e)\"; fidosim has \(KeyProfile.allExtensions.joined(separator: ", "))"
                )
            }
            profile.extensions = extensions
        }
        if let value = fields["pinUvAuthProtocols"] {
            guard let list = value.arrayValue?.compactMap(\.integerValue), list.count == value.arrayValue?.count else {
                throw KeySetupError("\"pinUvAuthProtocols\" must be an array of integers")
            }
            profile.pinUvAuthProtocols = list.map { Int($0) }
        }
        if let algorithms = try strings("algorithms") {
            profile.algorithms = try algorithms.map { name in
                guard let algorithm = CredentialAlgorithm(name: name) else {
                    let names = CredentialAlgorithm.allCases.map(\.name).joined(separator: ", ")
                    throw KeySetupError("unknown algorithm \"\(name)\": use \(names)")
                }
                return algorithm
            }
        }
        if let n = try integer("maxCredentialCountInList", 1...64) { profile.maxCredentialCountInList = n }
        if let n = try integer("maxCredentialIdLength", 16...1024) { profile.maxCredentialIdLength = n }
        if let value = fields["quirks"] {
            guard case .object(let quirks) = value else { throw KeySetupError("\"quirks\" must be an object") }
            for key in quirks.keys.sorted()
            where !["dropsDisplayName", "rejectsLargeLists", "forcedStatus"].contains(key) {
                throw KeySetupError("unknown quirk \"\(key)\"")
            }
            profile.dropsDisplayName = try flag("dropsDisplayName", in: quirks)
            profile.rejectsLargeLists = try flag("rejectsLargeLists", in: quirks)
            if let forced = quirks["forcedStatus"] {
                guard case .object(let map) = forced else { throw KeySetupError("\"forcedStatus\" must be an object") }
                for (command, status) in map {
                    guard let byte = commandNames[command] else {
                        throw KeySetupError("unknown command \"\(command)\"")
                    }
                    guard let code = status.integerValue, (0...255).contains(code) else {
                        throw KeySetupError("the status of \(command) must be 0 to 255")
                    }
                    profile.forcedStatus[byte] = UInt8(code)
                }
            }
        }
        // The behaviour follows the versions (CTAP 2.0's rules for a FIDO_2_0 key, …) unless "behaviour" says otherwise.
        profile.behaviour = .forVersions(profile.versions)
        if let value = fields["behaviour"] {
            guard case .object(let members) = value else { throw KeySetupError("\"behaviour\" must be an object") }
            try parseBehaviour(members, into: &profile.behaviour)
        }
        if let problem = profile.problem { throw KeySetupError(problem) }
        var aaguid: [UInt8]?
        if let text = fields["aaguid"]?.stringValue {
            let hex = String(text.filter { $0 != "-" })
            guard hex.count == 32, let bytes = Hex.bytes(hex) else {
                throw KeySetupError("\"aaguid\" must be 32 hex digits (dashes allowed)")
            }
            aaguid = bytes
        } else if fields["aaguid"] != nil {
            throw KeySetupError("\"aaguid\" must be a string")
        }
        var file = ProfileFile(
            profile: profile,
            description: fields["description"]?.stringValue ?? "",
            maxResidentCredentials: try integer("maxResidentCredentials", 1...100_000),
            maxMessageSize: try integer("maxMsgSize", 1024...7609),
            alwaysUv: try flag("alwaysUv"),
            aaguid: aaguid
        )
        if let capture = fields["capture"] { try parseCapture(capture, into: &file) }
        switch fields["attestation"] {
        case nil, .string("shared-batch"): file.selfAttestation = false
        case .string("self"): file.selfAttestation = true
        default: throw KeySetupError("\"attestation\" is \"shared-batch\" or \"self\"")
        }
        file.backupEligible = try flag("backupEligible")
        file.backupState = try flag("backupState")
        if file.backupState && !file.backupEligible {
            throw KeySetupError("\"backupState\" needs \"backupEligible\": only an eligible credential is backed up")
        }
        return file
    }
}

extension ProfileFile {
    /// The "behaviour" object: each member names one choice (firmware-spec/profiles.md).
    static func parseBehaviour(_ fields: [String: JSONValue], into behaviour: inout ProfileBehaviour) throws {
        for key in fields.keys.sorted() where !behaviourMembers.contains(key) {
            throw KeySetupError(
                "unknown behaviour \"\(key)\"; known: \(behaviourMembers.sorted().joined(separator: ", "))"
            )
        }
        func choice<T: RawRepresentable & CaseIterable>(_ key: String, _ type: T.Type) throws -> T?
        where T.RawValue == String {
            guard let value = fields[key] else { return nil }
            guard let text = value.stringValue, let parsed = T(rawValue: text) else {
                let names = T.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
                throw KeySetupError("behaviour \"\(key)\" must be one of \(names)")
            }
            return parsed
        }
        func flag(_ key: String) throws -> Bool? {
            guard let value = fields[key] else { return nil }
            guard let b = value.boolValue else { throw KeySetupError("behaviour \"\(key)\" must be true or false") }
            return b
        }
        if let v = try choice("pinToken", ProfileBehaviour.PinTokenModel.self) { behaviour.pinToken = v }
        if let v = try flag("previewAcceptsPinToken") { behaviour.previewAcceptsPinToken = v }
        if let v = try choice("pinRetriesWithoutPin", ProfileBehaviour.RetriesWithoutPIN.self) {
            behaviour.pinRetriesWithoutPIN = v
        }
        if let v = try choice("pinProtocolForRetries", ProfileBehaviour.PinProtocolForRetries.self) {
            behaviour.pinProtocolForRetries = v
        }
        if let v = try flag("makeCredUvNotRqd") { behaviour.makeCredUvNotRqd = v }
        if let v = try choice("optionRules", ProfileBehaviour.OptionRules.self) { behaviour.optionRules = v }
        if let value = fields["clientPinSubcommands"] {
            guard let list = value.arrayValue?.compactMap(\.integerValue), list.count == value.arrayValue?.count else {
                throw KeySetupError("behaviour \"clientPinSubcommands\" must be an array of integers")
            }
            behaviour.clientPINSubcommands = list.map { Int($0) }
        }
        if let v = try choice("unsupportedPinProtocol", ProfileBehaviour.UnsupportedProtocolStatus.self) {
            behaviour.unsupportedProtocol = v
        }
        if let v = try choice("previewCredentialManagement", ProfileBehaviour.PreviewCredentialManagement.self) {
            behaviour.previewCredentialManagement = v
        }
        if let v = try choice("setPinWhenSet", ProfileBehaviour.SetPINWhenSetStatus.self) {
            behaviour.setPINWhenSet = v
        }
        if let v = try choice("hmacSecretSaltLength", ProfileBehaviour.SaltLengthCheck.self) {
            behaviour.saltLength = v
        }
        if let v = try choice("credBlobNonDiscoverable", ProfileBehaviour.CredBlobNonDiscoverable.self) {
            behaviour.credBlobNonDiscoverable = v
        }
        if let v = try choice("nextFromAnotherChannel", ProfileBehaviour.NextFromAnotherChannel.self) {
            behaviour.nextFromAnotherChannel = v
        }
        if let v = try choice("clientPinErrors", ProfileBehaviour.ClientPINErrors.self) {
            behaviour.clientPINErrors = v
        }
        if let v = try choice("credentialManagementWhenEmpty", ProfileBehaviour.CredentialManagementWhenEmpty.self) {
            behaviour.credentialManagementWhenEmpty = v
        }
    }
}
