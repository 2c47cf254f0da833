import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Crypto
import Testing

/// authenticatorCredentialManagement (0x0A) and its preview command (0x41), CTAP 2.1 §6.8.
@Suite struct CredentialManagementTests {
    /// A key with PIN "1234" and discoverable credentials: two for example.com (alice, bob) and one for
    /// other.example (carol, credProtect 3, with a large-blob key).
    func populatedKey() throws -> (Harness, [Registration]) {
        var harness = try Harness()
        #expect(status(of: try harness.setPIN("1234")) == .ok)
        var made: [Registration] = []
        let requests = [
            Request.makeCredential(rk: true),
            Request.makeCredential(user: Request.user(id: [2], name: "bob", displayName: "Bob"), rk: true),
            Request.makeCredential(
                rpId: "other.example",
                user: Request.user(id: [3], name: "carol", displayName: nil),
                rk: true
            ).setting(6, ["credProtect": 3, "largeBlobKey": true]),
        ]
        for request in requests {
            let rpId = try #require(request[2]?["id"]?.textValue)
            let token = try harness.token("1234", permissions: 0x01, rpId: rpId)
            let outcome = harness.approve(harness.cbor(.makeCredential, authorized(request, token, paramKey: 8)))
            made.append(try Registration(responseMap(outcome)))
        }
        return (harness, made)
    }

    /// A credential management request authenticated with `token`.
    func request(
        _ subcommand: Int,
        _ params: [CBORValue: CBORValue]? = nil,
        token: PlatformToken?
    ) -> [CBORValue: CBORValue] {
        var map: [CBORValue: CBORValue] = [1: CBORValue(subcommand)]
        if let params { map[2] = .map(params) }
        if let token {
            let message = [UInt8(subcommand)] + (params.map { CBORValue.map($0).encoded() } ?? [])
            map[3] = CBORValue(token.version)
            map[4] = .byteString(token.authenticate(message))
        }
        return map
    }

    @Test(arguments: [CTAPCommand.credentialManagement, .credentialManagementPreview])
    func metadataAndEnumeration(command: CTAPCommand) throws {
        var (harness, made) = try populatedKey()
        let token = try harness.token("1234", permissions: 0x04)
        let metadata = try responseMap(harness.cbor(command, request(1, token: token)))
        #expect(metadata[1] == 3)
        #expect(metadata[2] == CBORValue(Harness.configuration.maxResidentCredentials - 3))

        let firstRP = try responseMap(harness.cbor(command, request(2, token: token)))
        #expect(firstRP[5] == 2)
        let secondRP = try responseMap(harness.cbor(command, request(3, token: nil)))
        #expect(secondRP[5] == nil)
        let rps = [firstRP, secondRP].compactMap { $0[3]?["id"]?.textValue }
        #expect(Set(rps) == ["example.com", "other.example"])
        for rp in [firstRP, secondRP] {
            #expect(rp[4] == .byteString(sha256(try #require(rp[3]?["id"]?.textValue))))
        }
        #expect(status(of: harness.cbor(command, request(3, token: nil))) == .notAllowed)

        let first = try responseMap(
            harness.cbor(command, request(4, [1: .byteString(sha256("example.com"))], token: token))
        )
        #expect(first[9] == 2)
        let second = try responseMap(harness.cbor(command, request(5, token: nil)))
        #expect(second[9] == nil)
        #expect(status(of: harness.cbor(command, request(5, token: nil))) == .notAllowed)
        let users = [first, second].compactMap { $0[6] }
        #expect(users.contains(["id": .byteString(Request.userId), "name": "alice", "displayName": "Alice"]))
        #expect(users.contains(["id": .byteString([2]), "name": "bob", "displayName": "Bob"]))
        for entry in [first, second] {
            let id = try #require(entry[7]?["id"]?.bytesValue)
            let registration = try #require(made.first { $0.credentialId == id })
            #expect(entry[7]?["type"] == "public-key")
            #expect(entry[8] == registration.credential.coseKey)
            #expect(entry[10] == 1)
            #expect(entry[11] == nil)
        }
        let other = try responseMap(
            harness.cbor(command, request(4, [1: .byteString(sha256("other.example"))], token: token))
        )
        #expect(other[10] == 3)
        #expect(other[11] == made[2].response[5])
        #expect(other[9] == 1)
    }

    @Test func authenticationRules() throws {
        var (harness, _) = try populatedKey()
        #expect(status(of: harness.cbor(.credentialManagement, request(1, token: nil))) == .puatRequired)
        let gaOnly = try harness.token("1234", permissions: 0x02)
        #expect(status(of: harness.cbor(.credentialManagement, request(1, token: gaOnly))) == .pinAuthInvalid)
        let token = try harness.token("1234", permissions: 0x04)
        var tampered = request(1, token: token)
        tampered[4] = .byteString([UInt8](repeating: 0, count: 32))
        #expect(status(of: harness.cbor(.credentialManagement, tampered)) == .pinAuthInvalid)
        #expect(
            status(of: harness.cbor(.credentialManagement, request(1, token: token).setting(3, nil)))
                == .missingParameter
        )
        #expect(
            status(of: harness.cbor(.credentialManagement, request(1, token: token).setting(3, 7))) == .invalidParameter
        )
        #expect(status(of: harness.cbor(.credentialManagement, request(0x0F, token: token))) == .invalidSubcommand)
        // The parameters are signed as sent: a MAC over other parameters does not verify.
        var swapped = request(4, [1: .byteString(sha256("example.com"))], token: token)
        swapped[2] = [1: .byteString(sha256("other.example"))]
        #expect(status(of: harness.cbor(.credentialManagement, swapped)) == .pinAuthInvalid)
        // Credential management does not spend the token.
        #expect(status(of: harness.cbor(.credentialManagement, request(1, token: token))) == .ok)
        #expect(status(of: harness.cbor(.credentialManagement, request(1, token: token))) == .ok)
    }

    @Test func withoutAPINThereIsNoCredentialManagement() throws {
        var harness = try Harness()
        #expect(status(of: harness.cbor(.credentialManagement, request(1, token: nil))) == .pinNotSet)
    }

    @Test func aTokenForOneRPSeesOnlyThatRP() throws {
        var (harness, made) = try populatedKey()
        let token = try harness.token("1234", permissions: 0x04, rpId: "other.example")
        #expect(status(of: harness.cbor(.credentialManagement, request(1, token: token))) == .pinAuthInvalid)
        #expect(status(of: harness.cbor(.credentialManagement, request(2, token: token))) == .pinAuthInvalid)
        let mine = request(4, [1: .byteString(sha256("other.example"))], token: token)
        #expect(status(of: harness.cbor(.credentialManagement, mine)) == .ok)
        let theirs = request(4, [1: .byteString(sha256("example.com"))], token: token)
        #expect(status(of: harness.cbor(.credentialManagement, theirs)) == .pinAuthInvalid)
        let deleteTheirs = request(6, [2: Request.descriptor(made[0].credentialId)], token: token)
        #expect(status(of: harness.cbor(.credentialManagement, deleteTheirs)) == .pinAuthInvalid)
        #expect(harness.residentCredentials.count == 3)
    }

    @Test func deleteMakesTheCredentialUnusable() throws {
        var (harness, made) = try populatedKey()
        let token = try harness.token("1234", permissions: 0x04)
        let delete = request(6, [2: Request.descriptor(made[1].credentialId)], token: token)
        #expect(harness.cbor(.credentialManagement, delete) == .response([0x00]))
        #expect(status(of: harness.cbor(.credentialManagement, delete)) == .noCredentials)
        let gone = Request.getAssertion(allowList: [made[1].credentialId])
        #expect(status(of: harness.cbor(.getAssertion, gone)) == .noCredentials)
        #expect(harness.residentCredentials.map(\.user.id) == [Request.userId, [3]])
        let metadata = try responseMap(harness.cbor(.credentialManagement, request(1, token: token)))
        #expect(metadata[1] == 2)
    }

    @Test func updateUserInformationRenamesThePasskey() throws {
        var (harness, made) = try populatedKey()
        let token = try harness.token("1234", permissions: 0x04)
        let rename = request(
            7,
            [2: Request.descriptor(made[0].credentialId), 3: Request.user(name: "alice.new", displayName: nil)],
            token: token
        )
        #expect(harness.cbor(.credentialManagementPreview, rename) == .response([0x00]))
        let listed = try responseMap(
            harness.cbor(.credentialManagement, request(4, [1: .byteString(sha256("example.com"))], token: token))
        )
        let entries = [listed] + [try responseMap(harness.cbor(.credentialManagement, request(5, token: nil)))]
        #expect(entries.compactMap { $0[6] }.contains(["id": .byteString(Request.userId), "name": "alice.new"]))
        // The credential itself is unchanged: it still signs, under the same id.
        let assertion = try harness.getAssertion(Request.getAssertion(allowList: [made[0].credentialId]))
        #expect(assertion.verifies(with: made[0].publicKey))
        // That touch spent the token's permissions (§6.2.2 step 9.d), cm included.
        #expect(status(of: harness.cbor(.credentialManagement, request(1, token: token))) == .pinAuthInvalid)

        let token2 = try harness.token("1234", permissions: 0x04)
        let wrongUser = request(
            7,
            [2: Request.descriptor(made[0].credentialId), 3: Request.user(id: [9], name: "x")],
            token: token2
        )
        #expect(status(of: harness.cbor(.credentialManagement, wrongUser)) == .invalidParameter)
        let noUser = request(7, [2: Request.descriptor(made[0].credentialId)], token: token2)
        #expect(status(of: harness.cbor(.credentialManagement, noUser)) == .missingParameter)
    }

    @Test func enumerationStateEndsWithAnotherCommand() throws {
        var (harness, _) = try populatedKey()
        let token = try harness.token("1234", permissions: 0x04)
        _ = try responseMap(harness.cbor(.credentialManagement, request(2, token: token)))
        _ = harness.cbor(.getInfo)
        #expect(status(of: harness.cbor(.credentialManagement, request(3, token: nil))) == .notAllowed)
        #expect(status(of: harness.cbor(.credentialManagement, request(5, token: nil))) == .notAllowed)
    }

    @Test func emptyKeyEnumeratesNothing() throws {
        var harness = try Harness()
        _ = try harness.setPIN("1234")
        let token = try harness.token("1234", permissions: 0x04)
        let metadata = try responseMap(harness.cbor(.credentialManagement, request(1, token: token)))
        #expect(metadata[1] == 0)
        #expect(status(of: harness.cbor(.credentialManagement, request(2, token: token))) == .noCredentials)
        let none = request(4, [1: .byteString(sha256("example.com"))], token: token)
        #expect(status(of: harness.cbor(.credentialManagement, none)) == .noCredentials)
    }

    @Test func nonCanonicalParametersAreRefused() throws {
        var (harness, _) = try populatedKey()
        let token = try harness.token("1234", permissions: 0x04)
        // {2: {...}, 1: 4}: keys out of order.
        let params: [CBORValue: CBORValue] = [1: .byteString(sha256("example.com"))]
        let signed = token.authenticate([4] + CBORValue.map(params).encoded())
        let body: [UInt8] =
            [0xA4, 0x02] + CBORValue.map(params).encoded() + [0x01, 0x04, 0x03, 0x02, 0x04]
            + CBORValue.byteString(signed).encoded()
        #expect(harness.cbor(raw: [0x0A] + body) == .response([CTAPStatus.invalidCBOR.rawValue]))
    }
}
