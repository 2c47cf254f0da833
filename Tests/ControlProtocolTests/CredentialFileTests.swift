import Testing

@testable import ControlProtocol

/// Credential files in the shapes the tools that write them document (firmware-spec/control.md, "Credential
/// files"): read into addCredential parameters, written back, and each malformed variant named.
@Suite struct CredentialFileTests {
    // Bytes whose base64 has + and / and whose base64url has - and _: 0xFB 0xEF 0xBE -> "++--" / "----".
    static let id: [UInt8] = [0xFB, 0xEF, 0xBE, 0xFF, 0xFF, 0xFF, 0x01]
    static let handle: [UInt8] = [0xFA, 0xCE]
    static let key: [UInt8] = [0x30, 0x81, 0x87, 0x02, 0x01, 0x00, 0xFE]

    static func expected(resident: Bool = true, signCount: Int64 = 3) -> [String: JSONValue] {
        [
            "credentialId": .string(Base64URL.encode(id)), "privateKey": .string(Base64URL.encode(key)),
            "userHandle": .string(Base64URL.encode(handle)), "isResidentCredential": .boolean(resident),
            "rpId": "example.com", "signCount": .integer(signCount),
        ]
    }

    @Test func chromeDevToolsUsesStandardBase64() throws {
        // WebAuthn.getCredentials' result, binary members in standard base64 with padding.
        let text = """
            {"credentials": [{"credentialId": "++++////AQ==", "isResidentCredential": true, "rpId": "example.com",
              "privateKey": "MIGHAgEA/g==", "userHandle": "+s4=", "signCount": 3, "backupEligibility": true,
              "backupState": false, "userName": "alice", "userDisplayName": "Alice", "largeBlob": "AAE="}]}
            """
        let document = try JSONParser.parse(text)
        #expect(try CredentialExchange.detect(document) == .cdp)
        let (read, format, _) = try CredentialExchange.read(document, format: nil)
        #expect(format == .cdp)
        var want = Self.expected()
        want["backupEligibility"] = true
        want["backupState"] = false
        want["userName"] = "alice"
        want["userDisplayName"] = "Alice"
        want["largeBlob"] = "AAE"
        #expect(read == [.object(want)])
        let (written, _) = CredentialExchange.write(
            read,
            format: .cdp,
            accountId: [],
            timestamp: 0,
            publicKey: { _ in nil }
        )
        #expect(written["credentials"]?.arrayValue?[0]["credentialId"] == "++++////AQ==")
        #expect(written["credentials"]?.arrayValue?[0]["userHandle"] == "+s4=")
        #expect(try CredentialExchange.read(written, format: nil).credentials == read)
    }

    @Test func seleniumPadsBase64URL() throws {
        // Selenium's Credential.to_dict(): urlsafe_b64encode, so padded; userHandle only when there is one.
        let text = """
            [{"credentialId": "----____AQ==", "isResidentCredential": true, "rpId": "example.com",
              "privateKey": "MIGHAgEA_g==", "signCount": 3, "userHandle": "-s4="},
             {"credentialId": "----____AQ==", "isResidentCredential": false, "rpId": "example.com",
              "privateKey": "MIGHAgEA_g==", "signCount": 3}]
            """
        let document = try JSONParser.parse(text)
        #expect(try CredentialExchange.detect(document) == .selenium)
        let (read, _, _) = try CredentialExchange.read(document, format: nil)
        var second = Self.expected(resident: false)
        second["userHandle"] = nil
        #expect(read == [.object(Self.expected()), .object(second)])
        let (written, _) = CredentialExchange.write(
            read,
            format: .selenium,
            accountId: [],
            timestamp: 0,
            publicKey: { _ in nil }
        )
        #expect(written == document)
    }

    @Test func playwrightStorageStateHoldsPasskeys() throws {
        // storageState({credentials: true}): five string members, base64url without padding.
        let text = """
            {"cookies": [], "origins": [], "credentials": [{"id": "----____AQ", "rpId": "example.com",
              "userHandle": "-s4", "privateKey": "MIGHAgEA_g", "publicKey": "MFkw"}]}
            """
        let document = try JSONParser.parse(text)
        #expect(try CredentialExchange.detect(document) == .playwright)
        let (read, _, _) = try CredentialExchange.read(document, format: nil)
        #expect(read == [.object(Self.expected(signCount: 0))])
        // Written back with the public key the caller derives; non-discoverable credentials are left out.
        var nonResident = Self.expected(resident: false)
        nonResident["credentialId"] = "AA"
        let (written, skipped) = CredentialExchange.write(
            read + [.object(nonResident)],
            format: .playwright,
            accountId: [],
            timestamp: 0,
            publicKey: { $0 == Self.key ? [0x30, 0x59, 0x30] : nil }
        )
        #expect(skipped == 1)
        #expect(written == document)
    }

    @Test func webDriverAndPEMKeys() throws {
        let pem = "-----BEGIN PRIVATE KEY-----\nMIGHAgEA/g==\n-----END PRIVATE KEY-----\n"
        let document: JSONValue = [
            "credentials": [
                [
                    "credentialId": "----____AQ", "isResidentCredential": true, "rpId": "example.com",
                    "privateKey": .string(pem), "userHandle": "-s4", "signCount": 3, "algorithm": "ES256",
                ]
            ]
        ]
        #expect(try CredentialExchange.detect(document) == .webdriver)
        #expect(try CredentialExchange.read(document, format: nil).credentials == [.object(Self.expected())])
    }

    @Test(
        arguments: [
            // (document, format or nil for auto, what the error must say)
            (
                "[{\"credentialId\": \"AA==\", \"isResidentCredential\": true, \"privateKey\": \"AA==\", \"colour\": 1}]",
                nil, "credential 1: unknown member \"colour\" (read as cdp)"
            ),
            (
                "[{\"credentialId\": \"AA\", \"isResidentCredential\": true, \"privateKey\": \"AA\", \"backupState\": 1}]",
                nil, "credential 1: \"backupState\" is not a boolean (read as webdriver)"
            ),
            (
                "[{\"credentialId\": \"AA\", \"privateKey\": \"AA\"}]", "webdriver",
                "credential 1: missing boolean member \"isResidentCredential\" (read as webdriver)"
            ),
            (
                "[{\"credentialId\": \"-_\", \"isResidentCredential\": true, \"privateKey\": \"AA\"}]", "cdp",
                "credential 1: \"credentialId\" is not base64 (read as cdp)"
            ),
            (
                "[{\"credentialId\": \"AA\", \"isResidentCredential\": true, \"privateKey\": \"AA\", \"userName\": \"a\"}]",
                "selenium", "credential 1: unknown member \"userName\" (read as selenium)"
            ),
            (
                "{\"cookies\": [], \"credentials\": [{\"id\": \"AA\", \"rpId\": \"a\", \"privateKey\": \"AA\"}]}", nil,
                "credential 1: missing member \"userHandle\" (read as playwright)"
            ),
            (
                "{\"credentials\": [], \"extra\": true}", "webdriver",
                "unknown member \"extra\" in the document (read as webdriver)"
            ),
            (
                "[{\"credentialId\": \"AA\", \"isResidentCredential\": true, \"privateKey\": \"-----BEGIN EC PRIVATE KEY-----\\nAA\\n-----END EC PRIVATE KEY-----\"}]",
                nil, "credential 1: \"privateKey\" is not PKCS#8 in base64, base64url or PEM (read as webdriver)"
            ),
            (
                "[{\"credentialId\": \"+_\", \"isResidentCredential\": true, \"privateKey\": \"AA\"}]", nil,
                "the file mixes base64 (+ /) and base64url (- _): give --format"
            ),
        ] as [(String, String?, String)]
    )
    func malformedFilesNameTheMember(text: String, format: String?, message: String) throws {
        let document = try JSONParser.parse(text)
        #expect(throws: CredentialExchange.FormatError(message)) {
            _ = try CredentialExchange.read(document, format: format.flatMap(CredentialFileFormat.init(rawValue:)))
        }
    }
}
