import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// Discoverable credentials: what is stored, replacement of a user, and a full key store.
@Suite struct DiscoverableCredentialTests {
    /// 64 bytes of UTF-8 with decomposed accents (`e` + U+0301), which Swift string equality would not tell
    /// apart from precomposed ones.
    static let name: String = {
        let prefix = "Jose\u{301} Mari\u{301}a "
        return prefix + String(repeating: "n", count: 64 - prefix.utf8.count)
    }()
    static let displayName = String(repeating: "Ünïcødé ✓ ", count: 30)
    static let icon = "https://example.com/avatars/alice.png"

    @Test func storedUserIsTheRequestedUserByteForByte() throws {
        #expect(Self.name.utf8.count == 64)
        #expect(Self.displayName.count == 300)
        var harness = try Harness()
        let user: CBORValue = [
            "id": .byteString(Array(0..<64)),
            "name": .textString(Self.name),
            "displayName": .textString(Self.displayName),
            "icon": .textString(Self.icon),
        ]
        let registration = try harness.register(Request.makeCredential(user: user, rk: true))
        let stored = try #require(harness.residentCredentials.first)
        #expect(harness.residentCredentials.count == 1)
        #expect(
            stored.user
                == UserEntity(id: Array(0..<64), name: Self.name, displayName: Self.displayName, icon: Self.icon)
        )
        #expect(stored.user.name.map { Array($0.utf8) } == Array(Self.name.utf8))
        #expect(stored.user.displayName.map { Array($0.utf8) } == Array(Self.displayName.utf8))
        #expect(stored.user.icon.map { Array($0.utf8) } == Array(Self.icon.utf8))
        #expect(stored.id == registration.credentialId)
        #expect(stored.rpId == "example.com")
        #expect(stored.rpIdHash == sha256("example.com"))
        #expect(stored.privateKey.count == 32)
    }

    @Test func absentUserFieldsStayAbsent() throws {
        var harness = try Harness()
        _ = try harness.register(Request.makeCredential(user: Request.user(name: nil, displayName: nil), rk: true))
        #expect(harness.residentCredentials.map(\.user) == [UserEntity(id: Request.userId)])
    }

    @Test func sameRelyingPartyAndUserIdReplacesTheCredential() throws {
        var harness = try Harness()
        _ = try harness.register(Request.makeCredential(user: Request.user(name: "old"), rk: true))
        let second = try harness.register(Request.makeCredential(user: Request.user(name: "new"), rk: true))
        #expect(harness.residentCredentials.count == 1)
        #expect(harness.residentCredentials.first?.id == second.credentialId)
        #expect(harness.residentCredentials.first?.user.name == "new")
    }

    @Test func sameUserIdForAnotherRelyingPartyIsAnotherCredential() throws {
        var harness = try Harness()
        _ = try harness.register(Request.makeCredential(rk: true))
        _ = try harness.register(Request.makeCredential(rpId: "example.org", rk: true))
        #expect(harness.residentCredentials.map(\.rpId) == ["example.com", "example.org"])
    }

    @Test func fullKeyStoreRefusesANewUserButStillReplaces() throws {
        var harness = try Harness(configuration: AuthenticatorConfiguration(maxResidentCredentials: 2))
        _ = try harness.register(Request.makeCredential(user: Request.user(id: [1]), rk: true))
        _ = try harness.register(Request.makeCredential(user: Request.user(id: [2]), rk: true))
        let counter = harness.signCounter

        // A third distinct user: refused at once, without a touch.
        let third = harness.cbor(.makeCredential, Request.makeCredential(user: Request.user(id: [3]), rk: true))
        #expect(third == .response([0x28]))
        // The same user id for another relying party is a new credential too.
        let otherRP = harness.cbor(
            .makeCredential,
            Request.makeCredential(rpId: "example.org", user: Request.user(id: [1]), rk: true)
        )
        #expect(otherRP == .response([0x28]))
        #expect(harness.signCounter == counter)

        // Replacing user 2 still works when full.
        let replacement = try harness.register(
            Request.makeCredential(user: Request.user(id: [2], name: "bob"), rk: true)
        )
        #expect(harness.residentCredentials.map(\.user.id) == [[1], [2]])
        #expect(harness.residentCredentials.last?.id == replacement.credentialId)
        #expect(harness.residentCredentials.last?.user.name == "bob")

        // A non-discoverable credential needs no room.
        #expect(
            status(
                of: harness.approve(harness.cbor(.makeCredential, Request.makeCredential(user: Request.user(id: [3]))))
            ) == .ok
        )
    }
}
