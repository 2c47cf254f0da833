/// The credential files test engineers already have, read into and written from the control protocol's WebDriver
/// credential objects (firmware-spec/control.md, "Credential files").
package enum CredentialFileFormat: String, CaseIterable, Sendable {
    /// `{"credentials": [...]}` of WebDriver Credential Parameters, as `getCredentials` returns them.
    case webdriver
    /// Chrome DevTools `WebAuthn.getCredentials`: the same members, binary values in standard base64.
    case cdp
    /// Playwright's storage state (`storageState({credentials: true})`): `{cookies, origins, credentials: [{id,
    /// rpId, userHandle, privateKey, publicKey}]}`; every credential is discoverable.
    case playwright
    /// Selenium's `Credential.to_dict()` / `toMap()` objects in an array: base64url with padding.
    case selenium
    /// The FIDO Alliance Credential Exchange Format 1.0 (passkeys only).
    case cxf
}

extension CredentialExchange {
    /// The members a credential object of `format` may have (CXF is read by ``webDriverCredentials(fromCXF:)``).
    static func members(_ format: CredentialFileFormat) -> Set<String> {
        switch format {
        case .webdriver:
            return [
                "credentialId", "isResidentCredential", "rpId", "privateKey", "userHandle", "signCount", "userName",
                "userDisplayName", "largeBlob", "backupEligibility", "backupState", "algorithm",
            ]
        case .cdp:
            return [
                "credentialId", "isResidentCredential", "rpId", "privateKey", "userHandle", "signCount", "userName",
                "userDisplayName", "largeBlob", "backupEligibility", "backupState",
            ]
        case .selenium:
            return ["credentialId", "isResidentCredential", "rpId", "privateKey", "userHandle", "signCount"]
        case .playwright: return ["id", "rpId", "userHandle", "privateKey", "publicKey"]
        case .cxf: return []
        }
    }

    /// Members of the document around the credentials that a format may have.
    static func documentMembers(_ format: CredentialFileFormat) -> Set<String> {
        format == .playwright ? ["cookies", "origins", "credentials"] : ["credentials"]
    }

    /// The format of a credentials document: CXF by its accounts, Playwright by its storage state or its `id`
    /// members, else by how its binary values are written (`+` or `/`: Chrome DevTools; `-` or `_` with `=`
    /// padding: Selenium; otherwise WebDriver; values that have none of these decode alike in every format).
    package static func detect(_ document: JSONValue) throws(FormatError) -> CredentialFileFormat {
        if isCXF(document) { return .cxf }
        if document["cookies"] != nil || document["origins"] != nil { return .playwright }
        let list = document.arrayValue ?? document["credentials"]?.arrayValue ?? [document]
        if list.contains(where: { $0["id"] != nil && $0["credentialId"] == nil }) { return .playwright }
        var standard = false
        var url = false
        var padded = false
        for credential in list {
            for name in ["credentialId", "privateKey", "userHandle", "largeBlob"] {
                guard let text = credential[name]?.stringValue, !text.hasPrefix("-----BEGIN") else { continue }
                standard = standard || text.utf8.contains { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") }
                url = url || text.utf8.contains { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
                padded = padded || text.hasSuffix("=")
            }
        }
        if standard && url {
            throw FormatError("the file mixes base64 (+ /) and base64url (- _): give --format")
        }
        if standard { return .cdp }
        if url { return padded ? .selenium : .webdriver }
        return padded ? .cdp : .webdriver
    }

    /// The credentials of a document as `addCredential` parameters (binary values base64url, no `algorithm`),
    /// with the format they were read as and, for CXF, the number of items that were not passkeys. An unknown
    /// member, a missing one or a value of the wrong type is an error naming it and the format.
    package static func read(
        _ document: JSONValue,
        format requested: CredentialFileFormat?
    ) throws(FormatError) -> (credentials: [JSONValue], format: CredentialFileFormat, skipped: Int) {
        let format: CredentialFileFormat
        if let requested { format = requested } else { format = try detect(document) }
        if format == .cxf {
            let (credentials, skipped) = try webDriverCredentials(fromCXF: document)
            return (credentials, .cxf, skipped)
        }
        let list: [JSONValue]
        if let array = document.arrayValue {
            list = array
        } else if case .object(let object) = document {
            for name in object.keys where !documentMembers(format).contains(name) {
                throw FormatError("unknown member \"\(name)\" in the document (read as \(format.rawValue))")
            }
            guard let array = document["credentials"]?.arrayValue else {
                throw FormatError("no \"credentials\" array (read as \(format.rawValue))")
            }
            list = array
        } else {
            throw FormatError("expected a JSON object or an array of credentials (read as \(format.rawValue))")
        }
        var out: [JSONValue] = []
        for (index, item) in list.enumerated() {
            do {
                out.append(try credential(item, format: format))
            } catch {
                throw FormatError("credential \(index + 1): \(error.description)")
            }
        }
        return (out, format, 0)
    }

    /// One credential object of `format` as `addCredential` parameters.
    package static func credential(_ item: JSONValue, format: CredentialFileFormat) throws(FormatError) -> JSONValue {
        let suffix = " (read as \(format.rawValue))"
        guard case .object(let object) = item else { throw FormatError("not a JSON object" + suffix) }
        let allowed = members(format)
        for name in object.keys.sorted() where !allowed.contains(name) {
            throw FormatError("unknown member \"\(name)\"" + suffix)
        }
        func binary(_ name: String, required: Bool) throws(FormatError) -> JSONValue? {
            guard let value = object[name], value != .null else {
                if required { throw FormatError("missing member \"\(name)\"" + suffix) }
                return nil
            }
            guard let text = value.stringValue else { throw FormatError("\"\(name)\" is not a string" + suffix) }
            let bytes: [UInt8]?
            if name == "privateKey" {
                bytes = privateKeyBytes(text)
            } else {
                bytes = format == .cdp ? Base64URL.decodeStandard(text) : Base64URL.decode(text)
            }
            guard let bytes else {
                let kind =
                    name == "privateKey"
                    ? "PKCS#8 in base64, base64url or PEM" : format == .cdp ? "base64" : "base64url"
                throw FormatError("\"\(name)\" is not \(kind)" + suffix)
            }
            return .string(Base64URL.encode(bytes))
        }
        func typed(_ name: String, _ check: (JSONValue) -> Bool, _ kind: String) throws(FormatError) -> JSONValue? {
            guard let value = object[name], value != .null else { return nil }
            guard check(value) else { throw FormatError("\"\(name)\" is not \(kind)" + suffix) }
            return value
        }
        var out: [String: JSONValue] = [:]
        if format == .playwright {
            guard let rpId = object["rpId"]?.stringValue else {
                throw FormatError("missing string member \"rpId\"" + suffix)
            }
            out["credentialId"] = try binary("id", required: true)
            out["rpId"] = .string(rpId)
            out["privateKey"] = try binary("privateKey", required: true)
            out["userHandle"] = try binary("userHandle", required: true)
            _ = try binary("publicKey", required: false)  // derived from the private key
            out["isResidentCredential"] = true
            out["signCount"] = 0
            return .object(out)
        }
        out["credentialId"] = try binary("credentialId", required: true)
        out["privateKey"] = try binary("privateKey", required: true)
        out["userHandle"] = try binary("userHandle", required: false)
        out["largeBlob"] = try binary("largeBlob", required: false)
        guard let resident = object["isResidentCredential"]?.boolValue else {
            throw FormatError("missing boolean member \"isResidentCredential\"" + suffix)
        }
        out["isResidentCredential"] = .boolean(resident)
        out["rpId"] = try typed("rpId", { $0.stringValue != nil }, "a string")
        out["signCount"] = try typed("signCount", { $0.integerValue != nil }, "an integer")
        for name in ["userName", "userDisplayName"] {
            out[name] = try typed(name, { $0.stringValue != nil }, "a string")
        }
        for name in ["backupEligibility", "backupState"] {
            out[name] = try typed(name, { $0.boolValue != nil }, "a boolean")
        }
        _ = try typed("algorithm", { $0.stringValue != nil }, "a string")
        return .object(out.filter { $0.value != .null })
    }

    /// PKCS#8 bytes from base64url, base64, or a PEM `PRIVATE KEY` block.
    static func privateKeyBytes(_ text: String) -> [UInt8]? {
        guard text.hasPrefix("-----BEGIN") else { return Base64URL.decode(text) ?? Base64URL.decodeStandard(text) }
        let lines = text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).map { $0.trimmingBlanks() }
        guard lines.first == "-----BEGIN PRIVATE KEY-----", lines.last == "-----END PRIVATE KEY-----" else {
            return nil
        }
        return Base64URL.decodeStandard(lines.dropFirst().dropLast().joined())
    }

    /// A document of `format` holding `credentials` (WebDriver objects as `getCredentials` returns them), and the
    /// number left out: CXF and Playwright hold discoverable credentials only, and Playwright P-256 ones only
    /// (`publicKey` gives the SPKI of a PKCS#8 key, nil for other algorithms).
    package static func write(
        _ credentials: [JSONValue],
        format: CredentialFileFormat,
        accountId: [UInt8],
        timestamp: Int64,
        publicKey: ([UInt8]) -> [UInt8]?
    ) -> (document: JSONValue, skipped: Int) {
        func recode(_ value: JSONValue?, standard: Bool, padded: Bool) -> JSONValue? {
            guard let text = value?.stringValue, let bytes = Base64URL.decode(text) else { return nil }
            return .string(Base64URL.encode(bytes, standard: standard, padded: padded))
        }
        switch format {
        case .webdriver:
            return (["credentials": .array(credentials)], 0)
        case .cxf:
            return cxf(from: credentials, accountId: accountId, timestamp: timestamp)
        case .cdp, .selenium:
            let cdp = format == .cdp
            let list: [JSONValue] = credentials.map { c in
                var out: [String: JSONValue] = [:]
                for name in members(format) where name != "algorithm" {
                    guard let value = c[name], value != .null else { continue }
                    if ["credentialId", "privateKey", "userHandle", "largeBlob"].contains(name) {
                        out[name] = recode(value, standard: cdp, padded: true)
                    } else {
                        out[name] = value
                    }
                }
                return .object(out)
            }
            return (cdp ? ["credentials": .array(list)] : .array(list), 0)
        case .playwright:
            var list: [JSONValue] = []
            var skipped = 0
            for c in credentials {
                guard c["isResidentCredential"] == true, let rpId = c["rpId"], let id = c["credentialId"],
                    let handle = c["userHandle"], let key = c["privateKey"]?.stringValue,
                    let der = Base64URL.decode(key), let spki = publicKey(der)
                else {
                    skipped += 1
                    continue
                }
                list.append([
                    "id": id, "rpId": rpId, "userHandle": handle, "privateKey": .string(key),
                    "publicKey": .string(Base64URL.encode(spki)),
                ])
            }
            return (["cookies": [], "origins": [], "credentials": .array(list)], skipped)
        }
    }
}
