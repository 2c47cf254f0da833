/// The options of WebDriver's Add Virtual Authenticator (WebAuthn Level 3 §11.3), with Chromium's extra ones and
/// fidosim's own, for a key added to a running `serve` or `fidosim run` through its hub socket (`--hub`).
package struct VirtualAuthenticatorOptions: Equatable, Sendable {
    /// `ctap1/u2f`, `ctap2` or `ctap2_1`.
    package var protocolName = "ctap2"
    /// Chromium's `ctap2Version`: `ctap2_0` or `ctap2_1` (nil: what the protocol says).
    package var ctap2Version: String?
    /// The transport the test asked for (`usb`, `nfc` or `internal`); the key is served as a USB key all the same.
    package var transport = "usb"
    package var hasResidentKey = false
    package var hasUserVerification = false
    package var isUserConsenting = true
    package var isUserVerified = false
    /// The CTAP extensions that WebDriver's `extensions` and Chromium's `hasLargeBlob`, `hasCredBlob`,
    /// `hasMinPinLength` and `hasPrf` switch on (the key's others are always on).
    package var optionalExtensions: Set<String> = []
    package var defaultBackupEligibility: Bool?
    package var defaultBackupState: Bool?
    /// fidosim's own: the key's name, its image (`memory` by default), a profile that replaces the one the protocol
    /// chooses, its USB serial number.
    package var name: String?
    package var flash: String?
    package var profile: String?
    package var serial: String?

    package init() {}

    /// The CTAP extensions a virtual authenticator has only when asked for (as in Chromium's, which has them only
    /// with `hasLargeBlob`, `hasCredBlob`, `hasMinPinLength` and `hasPrf`).
    package static let switchedExtensions: Set<String> = ["largeBlobKey", "credBlob", "minPinLength", "hmac-secret"]

    /// WebDriver's extension identifiers (WebAuthn's), and the CTAP extension each needs on the key; an identifier
    /// the client alone implements needs none.
    package static let extensionIdentifiers: [String: String?] = [
        "largeBlob": "largeBlobKey",
        "credBlob": "credBlob",
        "minPinLength": "minPinLength",
        "prf": "hmac-secret",
        "hmacCreateSecret": "hmac-secret",
        "credProps": nil,
        "credProtect": nil,
    ]

    /// The transports a test may name: a roaming key added at run time is on this process's HID transport, so
    /// `nfc` and `internal` are served over it too (the result says so); the others cannot be simulated here.
    package static let transports = ["usb", "nfc", "internal"]

    static func parse(_ p: Parameters) throws(ControlError) -> VirtualAuthenticatorOptions {
        var options = VirtualAuthenticatorOptions()
        if let name = try p.optionalString("protocol") {
            guard ["ctap1/u2f", "ctap2", "ctap2_1"].contains(name) else {
                throw ControlError(.invalidParams, "\"protocol\" must be ctap1/u2f, ctap2 or ctap2_1")
            }
            options.protocolName = name
        }
        if let version = try p.optionalString("ctap2Version") {
            guard ["ctap2_0", "ctap2_1"].contains(version) else {
                throw ControlError(.invalidParams, "\"ctap2Version\" must be ctap2_0 or ctap2_1")
            }
            options.ctap2Version = version
        }
        if let transport = try p.optionalString("transport") {
            guard transports.contains(transport) else {
                throw ControlError(
                    .invalidParams,
                    "\"transport\" \(transport): a key added at run time is a roaming key on this process's HID "
                        + "transport (usb; nfc and internal are served as usb); ble, hybrid and smart-card are not "
                        + "simulated"
                )
            }
            options.transport = transport
        }
        options.hasResidentKey = try p.optionalBool("hasResidentKey") ?? false
        options.hasUserVerification = try p.optionalBool("hasUserVerification") ?? false
        options.isUserConsenting = try p.optionalBool("isUserConsenting") ?? true
        options.isUserVerified = try p.optionalBool("isUserVerified") ?? false
        if let list = p.optional("extensions") {
            guard case .array(let items) = list else { throw p.wrongType("extensions", "an array of strings", list) }
            for item in items {
                guard let identifier = item.stringValue else {
                    throw ControlError(.invalidParams, "\"extensions\" must hold strings")
                }
                guard let needed = extensionIdentifiers[identifier] else {
                    throw ControlError(
                        .invalidParams,
                        "unknown extension \"\(identifier)\"; fidosim has "
                            + extensionIdentifiers.keys.sorted().joined(separator: ", ")
                    )
                }
                if let needed { options.optionalExtensions.insert(needed) }
            }
        }
        for (flag, needed) in [
            ("hasLargeBlob", "largeBlobKey"), ("hasCredBlob", "credBlob"), ("hasMinPinLength", "minPinLength"),
            ("hasPrf", "hmac-secret"),
        ] where try p.optionalBool(flag) == true {
            options.optionalExtensions.insert(needed)
        }
        options.defaultBackupEligibility = try p.optionalBool("defaultBackupEligibility")
        options.defaultBackupState = try p.optionalBool("defaultBackupState")
        if options.defaultBackupState == true && options.defaultBackupEligibility != true {
            throw ControlError(.invalidParams, "\"defaultBackupState\" true needs \"defaultBackupEligibility\" true")
        }
        if let name = try p.optionalString("name") {
            let allowed = name.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
                    || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
            }
            guard (1...64).contains(name.utf8.count), allowed, name.first != "." else {
                throw ControlError(
                    .invalidParams,
                    "\"name\" must be 1 to 64 letters, digits, '-', '_' or '.' (not first)"
                )
            }
            options.name = name
        }
        for (key, limit) in [("flash", 4096), ("profile", 4096), ("serial", 126)] {
            guard let value = try p.optionalString(key) else { continue }
            guard (1...limit).contains(value.utf8.count) else {
                throw ControlError(.invalidParams, "\"\(key)\" must be 1 to \(limit) bytes")
            }
            switch key {
            case "flash": options.flash = value
            case "profile": options.profile = value
            default: options.serial = value
            }
        }
        return options
    }

    /// The built-in profile the protocol chooses: `u2f-only` for `ctap1/u2f`, `ctap20` for CTAP 2.0, else fidosim's.
    package var protocolProfile: String {
        if protocolName == "ctap1/u2f" { return "u2f-only" }
        if ctap2Version == "ctap2_0" { return "ctap20" }
        return "fidosim"
    }
}
