/// Conversions between the WebDriver credential objects of the control protocol and the FIDO Alliance
/// Credential Exchange Format (CXF 1.0): a header with accounts, items, and `passkey` credentials.
package enum CredentialExchange {
    /// Why a file could not be read as credentials.
    package struct FormatError: Error, Equatable, CustomStringConvertible, Sendable {
        package var description: String
        package init(_ description: String) { self.description = description }
    }

    /// A CXF document with one account whose items are the discoverable credentials among `credentials`
    /// (WebDriver objects as `getCredentials` returns them). Non-discoverable credentials are not passkeys and
    /// are left out; the second value counts them.
    package static func cxf(
        from credentials: [JSONValue],
        accountId: [UInt8],
        timestamp: Int64
    ) -> (document: JSONValue, skipped: Int) {
        var items: [JSONValue] = []
        var skipped = 0
        for c in credentials {
            guard c["isResidentCredential"] == true, let id = c["credentialId"]?.stringValue,
                let rpId = c["rpId"]?.stringValue, let key = c["privateKey"]?.stringValue,
                let handle = c["userHandle"]?.stringValue
            else {
                skipped += 1
                continue
            }
            let name = c["userName"]?.stringValue ?? ""
            let passkey: JSONValue = [
                "type": "passkey", "credentialId": .string(id), "rpId": .string(rpId), "username": .string(name),
                "userDisplayName": .string(c["userDisplayName"]?.stringValue ?? name), "userHandle": .string(handle),
                "key": .string(key),
            ]
            // An item id is at most 64 bytes: the credential id's first 64 bytes, re-encoded.
            let itemId = Base64URL.decode(id).map { Base64URL.encode(Array($0.prefix(64))) } ?? id
            items.append([
                "id": .string(itemId), "title": .string(rpId), "subtitle": .string(name),
                "creationAt": .integer(timestamp), "modifiedAt": .integer(timestamp), "credentials": [passkey],
            ])
        }
        let document: JSONValue = [
            "version": ["major": 1, "minor": 0],
            "exporterRpId": "fidosim.invalid",
            "exporterDisplayName": "fidosim",
            "timestamp": .integer(timestamp),
            "accounts": [
                [
                    "id": .string(Base64URL.encode(accountId)), "username": "", "email": "", "collections": [],
                    "items": .array(items),
                ]
            ],
        ]
        return (document, skipped)
    }

    /// The passkeys of a CXF document as WebDriver `addCredential` parameters (resident, signCount 0), and the
    /// number of other credentials (passwords, notes, …) that were not passkeys. Accepts version 1.x and the
    /// draft 0.x documents; unknown members are ignored, as CXF asks.
    package static func webDriverCredentials(
        fromCXF document: JSONValue
    ) throws(FormatError) -> (
        credentials: [JSONValue], skipped: Int
    ) {
        guard case .object = document else { throw FormatError("a CXF document is a JSON object") }
        if let major = document["version"]?["major"]?.integerValue ?? document["version"]?.integerValue, major > 1 {
            throw FormatError("CXF version \(major) is newer than this reader (1.x)")
        }
        guard let accounts = document["accounts"]?.arrayValue else { throw FormatError("no \"accounts\" array") }
        var out: [JSONValue] = []
        var skipped = 0
        for account in accounts {
            guard let items = account["items"]?.arrayValue else {
                throw FormatError("an account has no \"items\" array")
            }
            for item in items {
                guard let credentials = item["credentials"]?.arrayValue else {
                    throw FormatError("an item has no \"credentials\" array")
                }
                for credential in credentials {
                    guard credential["type"] == "passkey" else {
                        skipped += 1
                        continue
                    }
                    func field(_ name: String) throws(FormatError) -> String {
                        guard let value = credential[name]?.stringValue else {
                            throw FormatError("a passkey has no string \"\(name)\"")
                        }
                        return value
                    }
                    var params: [String: JSONValue] = [
                        "credentialId": .string(try field("credentialId")), "rpId": .string(try field("rpId")),
                        "privateKey": .string(try field("key")), "userHandle": .string(try field("userHandle")),
                        "isResidentCredential": true, "signCount": 0,
                    ]
                    let username = credential["username"]?.stringValue ?? credential["userName"]?.stringValue
                    if let username, !username.isEmpty { params["userName"] = .string(username) }
                    if let display = credential["userDisplayName"]?.stringValue, !display.isEmpty {
                        params["userDisplayName"] = .string(display)
                    }
                    out.append(.object(params))
                }
            }
        }
        return (out, skipped)
    }

    /// The credentials of a WebDriver credentials file: `{"credentials": [...]}` or a bare array.
    package static func webDriverCredentials(fromFile document: JSONValue) throws(FormatError) -> [JSONValue] {
        if let list = document.arrayValue ?? document["credentials"]?.arrayValue { return list }
        throw FormatError("expected {\"credentials\": [...]} or an array of credentials")
    }

    /// Whether a document is CXF rather than a WebDriver credentials file.
    package static func isCXF(_ document: JSONValue) -> Bool { document["accounts"] != nil }
}
