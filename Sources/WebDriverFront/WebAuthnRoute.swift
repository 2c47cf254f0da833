package import ControlProtocol

/// A request of a WebDriver client that the front answers itself: the WebAuthn specification's WebDriver extension
/// commands (WebAuthn Level 3 §11.3 to §11.10), carried out with real fidosim keys through the hub and the keys'
/// control sockets, and the end of a session (whose keys go with it). Everything else goes to the driver.
///
/// Pure: a request's method, path and body in, a command (or nil: forward it) out.
package enum WebAuthnRoute: Equatable, Sendable {
    case addAuthenticator(session: String, options: [String: JSONValue])
    case removeAuthenticator(session: String, id: String)
    case addCredential(session: String, id: String, credential: [String: JSONValue])
    case getCredentials(session: String, id: String)
    case removeCredential(session: String, id: String, credentialId: String)
    case removeAllCredentials(session: String, id: String)
    case setUserVerified(session: String, id: String, verified: JSONValue)
    case setCredentialProperties(session: String, id: String, credentialId: String, properties: [String: JSONValue])
    /// Delete Session: forwarded, then the session's keys are removed.
    case deleteSession(session: String)

    /// Why a request to the front's own commands is refused: a WebDriver error code and message.
    package struct Refusal: Error, Equatable, Sendable {
        package var error: String
        package var message: String
    }

    /// The route of a request; nil when it is the driver's. Members a client adds to address the command (Selenium
    /// sends `authenticatorId` and `credentialId` in the body too) are dropped from what goes to the key.
    package static func route(method: String, path: String, body: [UInt8]) throws(Refusal) -> WebAuthnRoute? {
        let path = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard parts.count >= 2, parts[0] == "session" else { return nil }
        let session = parts[1]
        if parts.count == 2 {
            return method == "DELETE" ? .deleteSession(session: session) : nil
        }
        guard parts.count >= 4, parts[2] == "webauthn", parts[3] == "authenticator" else { return nil }
        let rest = Array(parts.dropFirst(4))
        // The members that address a command in its path, which a client may repeat in the body.
        let addressing = ["sessionId", "authenticatorId"] + (rest.count > 2 ? ["credentialId"] : [])
        func object() throws(Refusal) -> [String: JSONValue] {
            if body.isEmpty { return [:] }
            let value: JSONValue
            do {
                value = try JSONParser.parse(body)
            } catch {
                throw Refusal(error: "invalid argument", message: "the body is not JSON: \(error)")
            }
            guard case .object(var members) = value else {
                throw Refusal(error: "invalid argument", message: "the body is not a JSON object")
            }
            for name in addressing { members[name] = nil }
            return members
        }
        switch (method, rest.count) {
        case ("POST", 0):
            let options = try object()
            try checkAuthenticatorOptions(options)
            return .addAuthenticator(session: session, options: options)
        case ("DELETE", 1): return .removeAuthenticator(session: session, id: rest[0])
        case ("POST", 2) where rest[1] == "credential":
            let credential = try object()
            try checkCredentialParameters(credential)
            return .addCredential(session: session, id: rest[0], credential: credential)
        case ("GET", 2) where rest[1] == "credentials": return .getCredentials(session: session, id: rest[0])
        case ("DELETE", 2) where rest[1] == "credentials": return .removeAllCredentials(session: session, id: rest[0])
        case ("DELETE", 3) where rest[1] == "credentials":
            return .removeCredential(session: session, id: rest[0], credentialId: rest[2])
        case ("POST", 2) where rest[1] == "uv":
            let members = try object()
            guard let verified = members["isUserVerified"], verified.boolValue != nil else {
                throw Refusal(error: "invalid argument", message: "isUserVerified must be a boolean")
            }
            return .setUserVerified(session: session, id: rest[0], verified: verified)
        case ("POST", 4) where rest[1] == "credentials" && rest[3] == "props":
            return .setCredentialProperties(
                session: session,
                id: rest[0],
                credentialId: rest[2],
                properties: try object()
            )
        default:
            throw Refusal(error: "unknown command", message: "\(method) \(path) is no WebAuthn extension command")
        }
    }

    /// Add Virtual Authenticator's parameters as the WebAuthn specification's algorithm checks them (§11.3), and
    /// chromedriver with it: `protocol` and `transport` are required strings, the flags booleans, `extensions` an
    /// array of strings. A transport a USB key cannot be is refused with that one reason.
    static func checkAuthenticatorOptions(_ options: [String: JSONValue]) throws(Refusal) {
        guard let name = options["protocol"]?.stringValue else {
            throw Refusal(error: "invalid argument", message: "protocol must be a string: ctap1/u2f, ctap2 or ctap2_1")
        }
        guard ["ctap1/u2f", "ctap2", "ctap2_1"].contains(name) else {
            throw Refusal(
                error: "invalid argument",
                message: "unsupported protocol \(name): ctap1/u2f, ctap2 or ctap2_1"
            )
        }
        guard let transport = options["transport"]?.stringValue else {
            throw Refusal(error: "invalid argument", message: "transport must be a string: usb, nfc or internal")
        }
        guard ["usb", "nfc", "internal"].contains(transport) else {
            let reason =
                ["ble", "hybrid", "smart-card", "cable"].contains(transport)
                ? "a fidosim key is a USB security key, which cannot be \(transport)"
                : "unknown transport \(transport)"
            throw Refusal(error: "invalid argument", message: reason + " (usb; nfc and internal are served as usb)")
        }
        for flag in [
            "hasResidentKey", "hasUserVerification", "isUserConsenting", "isUserVerified", "hasLargeBlob",
            "hasCredBlob", "hasMinPinLength", "hasPrf", "defaultBackupEligibility", "defaultBackupState",
        ] {
            if let value = options[flag], value.boolValue == nil {
                throw Refusal(error: "invalid argument", message: "\(flag) must be a boolean")
            }
        }
        if let extensions = options["extensions"] {
            guard case .array(let items) = extensions, items.allSatisfy({ $0.stringValue != nil }) else {
                throw Refusal(error: "invalid argument", message: "extensions must be an array of strings")
            }
        }
    }

    /// Add Credential's parameters as the specification's algorithm checks them (§11.5): `credentialId`, `rpId` and
    /// `privateKey` strings, `isResidentCredential` a boolean, `signCount` a number (or null: no counter),
    /// `userHandle` a string when given (and required for a resident credential).
    static func checkCredentialParameters(_ credential: [String: JSONValue]) throws(Refusal) {
        for name in ["credentialId", "rpId", "privateKey"] where credential[name]?.stringValue == nil {
            throw Refusal(error: "invalid argument", message: "\(name) must be a string")
        }
        guard let resident = credential["isResidentCredential"]?.boolValue else {
            throw Refusal(error: "invalid argument", message: "isResidentCredential must be a boolean")
        }
        switch credential["signCount"] {
        // null: a credential without a counter (chromedriver takes it; the DevTools domain spells it -1).
        case .integer, .null: break
        case .number(let value) where value == value.rounded() && value >= 0: break
        default: throw Refusal(error: "invalid argument", message: "signCount must be a number or null")
        }
        if let handle = credential["userHandle"], handle.stringValue == nil, handle != .null {
            throw Refusal(error: "invalid argument", message: "userHandle must be a string")
        }
        if resident && credential["userHandle"]?.stringValue == nil {
            throw Refusal(error: "invalid argument", message: "a resident credential needs a userHandle")
        }
    }

    /// The session a route belongs to.
    package var session: String {
        switch self {
        case .addAuthenticator(let s, _), .removeAuthenticator(let s, _), .addCredential(let s, _, _),
            .getCredentials(let s, _), .removeCredential(let s, _, _), .removeAllCredentials(let s, _),
            .setUserVerified(let s, _, _), .setCredentialProperties(let s, _, _, _), .deleteSession(let s):
            s
        }
    }

    /// A WebDriver response body: `{"value": …}`.
    package static func success(_ value: JSONValue) -> String { JSONValue.object(["value": value]).encoded }

    /// A WebDriver error body and its HTTP status (400 for invalid argument, 404 for an unknown command, else 500).
    package static func failure(_ refusal: Refusal) -> (status: Int, body: String) {
        let status =
            switch refusal.error {
            case "invalid argument": 400
            case "unknown command": 404
            default: 500
            }
        let body = JSONValue.object([
            "value": .object([
                "error": .string(refusal.error), "message": .string(refusal.message), "stacktrace": "",
            ])
        ]).encoded
        return (status, body)
    }

    /// A key's refusal (a control error code and message) as the WebDriver error a client expects: a bad parameter
    /// or an unknown id is invalid argument (as the specification says of an authenticator or a credential that does
    /// not exist), anything else unknown error.
    package static func refusal(code: String, message: String) -> Refusal {
        switch code {
        case "invalid-params", "not-found", "invalid-request", "parse-error", "too-large":
            Refusal(error: "invalid argument", message: message)
        default:
            Refusal(error: "unknown error", message: message)
        }
    }
}
