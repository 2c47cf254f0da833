import CTAPCBOR
import CTAPCore
package import ControlProtocol

/// What a captured key shows that `serve --profile` reproduces beyond its getInfo: CTAPHID INIT's version and
/// capabilities, and the USB identity (firmware-spec/profiles.md, "Captured profiles").
package struct CapturedIdentity: Sendable, Equatable {
    package var deviceVersion: (UInt8, UInt8, UInt8)?
    package var capabilities: UInt8?
    package var vendorID: UInt16?
    package var productID: UInt16?
    package var manufacturer: String?
    package var product: String?
    /// The serial number's length and alphabet (``CaptureRecord/SerialShape``).
    package var serialLength: Int?
    package var serialAlphabet: String?
    /// The captured key's INIT and getInfo round trips (medians), in milliseconds.
    package var initMs: Double?
    package var getInfoMs: Double?
    /// The gap between the captured key's keepalives while it waited for a touch, in milliseconds.
    package var keepaliveMs: Double?

    package static func == (a: Self, b: Self) -> Bool {
        a.deviceVersion.map { [$0.0, $0.1, $0.2] } == b.deviceVersion.map { [$0.0, $0.1, $0.2] }
            && a.capabilities == b.capabilities && a.vendorID == b.vendorID && a.productID == b.productID
            && a.manufacturer == b.manufacturer && a.product == b.product && a.serialLength == b.serialLength
            && a.serialAlphabet == b.serialAlphabet && a.initMs == b.initMs && a.getInfoMs == b.getInfoMs
            && a.keepaliveMs == b.keepaliveMs
    }

    /// fidosim's own round trip, which a captured key's latency already includes: about 0.1 ms for INIT and up to
    /// 0.8 ms for getInfo over UDP (make profile-roundtrip prints both).
    static let ownLatencyMs = 0.5

    /// How much longer than fidosim the captured key took: what the copy waits before it answers.
    package static func extra(_ captured: Double?) -> Duration {
        guard let captured, captured > ownLatencyMs else { return .zero }
        return .microseconds(Int64(((captured - ownLatencyMs) * 1000).rounded()))
    }

    /// A serial number of the captured shape, from `random` bytes.
    package func serial(random: [UInt8]) -> String? {
        guard let length = serialLength, length > 0, length <= 63, let alphabet = serialAlphabet else { return nil }
        // An alphabet fidosim does not know (or `none`) gives letters and digits.
        let letters = Array(
            CaptureRecord.SerialShape.letters[alphabet] ?? CaptureRecord.SerialShape.letters["alnum"]!
        )
        return String((0..<length).map { letters[Int(random[$0 % random.count]) % letters.count] })
    }
}

extension ProfileFile {
    /// A profile file from a key's capture (`fidosim profile capture`): the members fidosim's own profiles have,
    /// read from the captured getInfo and probes, and the capture itself, which `serve` reproduces.
    package static func document(capture: CaptureRecord, name: String) throws -> JSONValue {
        var out: [String: JSONValue] = [
            "name": .string(name),
            "description": "captured from a key by fidosim profile capture",
            "capture": capture.json,
        ]
        let info = try capture.info()
        guard let info else {
            out["versions"] = ["U2F_V2"]
            return .object(out)
        }
        func strings(_ key: Int) -> [String]? { info[CBORValue(key)]?.arrayValue?.compactMap(\.textValue) }
        func integer(_ key: Int) -> Int? { info[CBORValue(key)]?.intValue }
        let versions = (strings(0x01) ?? []).filter(KeyProfile.allVersions.contains)
        out["versions"] = .array(versions.map(JSONValue.string))
        out["extensions"] = .array(
            (strings(0x02) ?? []).filter(KeyProfile.allExtensions.contains).map(JSONValue.string)
        )
        if let protocols = info[0x06]?.arrayValue?.compactMap(\.intValue), !protocols.isEmpty {
            out["pinUvAuthProtocols"] = .array(protocols.map { .integer(Int64($0)) })
        } else {
            out["pinUvAuthProtocols"] = [1]
        }
        let algorithms =
            (info[0x0A]?.arrayValue ?? []).compactMap { $0.mapValue?["alg"]?.intValue }
            .compactMap { CredentialAlgorithm(rawValue: $0)?.name }
        out["algorithms"] = .array((algorithms.isEmpty ? ["ES256"] : algorithms).map(JSONValue.string))
        if let count = integer(0x07) { out["maxCredentialCountInList"] = .integer(Int64(min(max(count, 1), 64))) }
        if let size = integer(0x05) { out["maxMsgSize"] = .integer(Int64(min(max(size, 1024), 7609))) }
        if let remaining = integer(0x14), remaining > 0 {
            out["maxResidentCredentials"] = .integer(Int64(min(remaining, 100_000)))
        }
        if case .byteString(let aaguid)? = info[0x03], aaguid.count == 16 {
            out["aaguid"] = .string(Hex.string(aaguid))
        }
        let options = info[0x04]?.mapValue ?? [:]
        if options["alwaysUv"] == .boolean(true) { out["alwaysUv"] = true }
        // What the probes tell of the key's choices.
        let answers = capture.probeAnswers
        var behaviour: [String: JSONValue] = [:]
        if options["clientPin"] == .boolean(false), let retries = answers["clientPIN getPINRetries"]?.first {
            if retries == 0x35 { behaviour["pinRetriesWithoutPin"] = "pinNotSet" }
        }
        var quirks: [String: JSONValue] = [:]
        if answers["getAssertion: an allow list of 65"]?.first == 0x15 { quirks["rejectsLargeLists"] = true }
        if let destructive = capture.destructive {
            derive(
                destructive,
                versions: versions,
                alwaysUv: options["alwaysUv"] == .boolean(true),
                into: &out,
                behaviour: &behaviour,
                quirks: &quirks
            )
        }
        if !behaviour.isEmpty { out["behaviour"] = .object(behaviour) }
        if !quirks.isEmpty { out["quirks"] = .object(quirks) }
        return .object(out)
    }

    /// The profile members that what `--allow-destructive` recorded shows (firmware-spec/profiles.md, "What
    /// --allow-destructive adds"). A behaviour member is written only where it differs from what the versions
    /// give. Returns what was recorded that no profile member expresses.
    @discardableResult
    static func derive(
        _ record: JSONValue,
        versions: [String],
        alwaysUv: Bool,
        into out: inout [String: JSONValue],
        behaviour: inout [String: JSONValue],
        quirks: inout [String: JSONValue]
    ) -> [String] {
        var unexpressed: [String] = []
        let defaults = ProfileBehaviour.forVersions(versions)
        let pin = record["pin"]
        let token = record["token"]
        switch pin?["setAgain"]?.stringValue {
        case "30" where defaults.setPINWhenSet != .notAllowed: behaviour["setPinWhenSet"] = "notAllowed"
        case "33" where defaults.setPINWhenSet != .pinAuthInvalid: behaviour["setPinWhenSet"] = "pinAuthInvalid"
        case "30", "33", nil: break
        case let other?: unexpressed.append("pin.setAgain: \"\(other)\" (fidosim: \"33\" or \"30\")")
        }
        var model: ProfileBehaviour.PinTokenModel?
        if token?["getPinTokenTwice"]?.stringValue == "same" {
            model = .powerUp
        } else if token?["getPinTokenTwice"]?.stringValue == "different" {
            switch token?["sameTokenTwice"]?.arrayValue?.last?.stringValue {
            case "00": model = .withoutPermissions
            case "33": model = .permissions
            default: break
            }
        }
        let ctap21 = versions.contains("FIDO_2_1") || versions.contains("FIDO_2_1_PRE")
        if let model, model != defaults.pinToken {
            if model == .powerUp || ctap21 {
                behaviour["pinToken"] = .string(model.rawValue)
            } else {
                unexpressed.append("token: \(model.rawValue) tokens (fidosim: a key without FIDO_2_1 has powerUp)")
            }
        }
        if (model ?? defaults.pinToken) == .permissions, versions.contains("FIDO_2_1_PRE"),
            let preview = token?["previewWithPinToken"]?.stringValue
        {
            let accepts = preview == "00"
            if accepts != defaults.previewAcceptsPinToken { behaviour["previewAcceptsPinToken"] = .boolean(accepts) }
        }
        // alwaysUv asks for a token whatever makeCredUvNotRqd says: the answer tells nothing then.
        if !alwaysUv, let without = token?["makeCredentialWithoutToken"]?.stringValue, ["00", "36"].contains(without) {
            let notRequired = without == "00"
            if notRequired != defaults.makeCredUvNotRqd { behaviour["makeCredUvNotRqd"] = .boolean(notRequired) }
        }
        if versions.contains("FIDO_2_1"), let unknown = token?["unknownSubcommand"]?.stringValue,
            token?["subcommands"]?["9"]?.stringValue == unknown, defaults.clientPINSubcommands.contains(9)
        {
            behaviour["clientPinSubcommands"] = .array(
                defaults.clientPINSubcommands.filter { $0 != 9 }.map { .integer(Int64($0)) }
            )
        }
        // A key that answers a user's name (two accounts, verified) but not the display name does not keep it.
        let user = record["credentialManagement"]?["credentialUser"] ?? record["user"]?["user"]
        if let user, user["name"] != nil, user["displayName"] == nil { quirks["dropsDisplayName"] = true }
        if let capacity = record["capacity"], capacity["refused"]?.stringValue == "28",
            let made = capacity["made"]?.integerValue, let existing = capacity["existing"]?.integerValue,
            made + existing >= 1
        {
            out["maxResidentCredentials"] = .integer(min(made + existing, 100_000))
        }
        return unexpressed
    }

    /// Where the key answered what `--allow-destructive` recorded otherwise than fidosim does, whatever its
    /// profile says (fidosim's fixed rules: 8 PIN retries, three wrong PINs in a row block until a power cycle,
    /// PINs of 4 to 63 bytes, user names and display names kept whole): "what: the key's answer (fidosim's)".
    package static func unreproduced(_ capture: CaptureRecord) -> [String] {
        guard let record = capture.destructive else { return [] }
        let info = (try? capture.info()) ?? nil
        let versions = (info?[0x01]?.arrayValue ?? []).compactMap(\.textValue)
        var scratch: [String: JSONValue] = [:]
        var behaviour: [String: JSONValue] = [:]
        var quirks: [String: JSONValue] = [:]
        let unexpressed = derive(
            record,
            versions: versions,
            alwaysUv: info?[0x04]?.mapValue?["alwaysUv"] == .boolean(true),
            into: &scratch,
            behaviour: &behaviour,
            quirks: &quirks
        )
        let fidosim: [(String, JSONValue?, JSONValue)] = [
            ("reset", record["reset"], "00"),
            ("pin.setShort", record["pin"]?["setShort"], "37"),
            ("pin.setLong", record["pin"]?["setLong"], "37"),
            ("pin.set", record["pin"]?["set"], "00"),
            ("pin.retries", record["pin"]?["retries"], 8),
            ("pin.wrong", record["pin"]?["wrong"], ["31", "31", "34"]),
            ("pin.retriesAfterWrong", record["pin"]?["retriesAfterWrong"], 5),
            ("pin.rightWhileBlocked", record["pin"]?["rightWhileBlocked"], "34"),
            ("pin.rightAfterPowerCycle", record["pin"]?["rightAfterPowerCycle"], "00"),
            ("pin.retriesAfterRight", record["pin"]?["retriesAfterRight"], 8),
            ("pin.changeShort", record["pin"]?["changeShort"], "37"),
            ("pin.changeWrongOld", record["pin"]?["changeWrongOld"], "31"),
            ("pin.retriesAfterChange", record["pin"]?["retriesAfterChange"], 7),
            ("user.name", record["user"]?["user"]?["name"], 80),
            ("user.displayName", record["user"]?["user"]?["displayName"], 80),
        ]
        let fixed = fidosim.compactMap { name, answer, own -> String? in
            // A key that keeps no display name at all is the dropsDisplayName quirk, which fidosim has.
            guard let answer, answer != own else { return nil }
            return "\(name): \(answer.encoded) (fidosim: \(own.encoded))"
        }
        return fixed + unexpressed
    }

    /// Reads the `capture` member into the profile: the getInfo the key answers, the probes it replays, and the
    /// identity the transports present.
    static func parseCapture(_ capture: JSONValue, into file: inout ProfileFile) throws {
        let record = try CaptureRecord(json: capture)
        file.profile.capturedInfo = try record.info()
        // Members new at each request (encIdentifier, encCredStoreState): the key answers its own, when it has one.
        for member in record.getInfoPerRequest {
            file.profile.capturedInfo?[CBORValue(member)] = .byteString([])
        }
        for probe in record.probes where probe.replay {
            file.profile.cannedAnswers[probe.request] = probe.response
        }
        for probe in record.u2f where probe.replay {
            file.profile.cannedU2FAnswers[probe.request] = probe.response
        }
        var identity = CapturedIdentity()
        if let ctaphid = record.ctaphid {
            let version = ctaphid.deviceVersion
            identity.deviceVersion = (version[0], version[1], version[2])
            identity.capabilities = ctaphid.capabilities
        }
        if let usb = record.usb {
            identity.vendorID = usb.vendorID
            identity.productID = usb.productID
            identity.manufacturer = usb.manufacturer
            identity.product = usb.product
            identity.serialLength = usb.serial?.length
            identity.serialAlphabet = usb.serial?.alphabet
        }
        identity.initMs = record.timing.initMs
        identity.getInfoMs = record.timing.getInfoMs
        identity.keepaliveMs = record.timing.keepaliveMs
        file.identity = identity
    }
}
