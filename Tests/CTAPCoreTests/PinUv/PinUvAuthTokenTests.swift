import CTAPCBOR
import CTAPCore
import CTAPCoreTesting
import Testing

/// pinUvAuthParam in makeCredential and getAssertion, and the token's state (CTAP 2.1 §6.1.2, §6.2.2, §6.5.2).
@Suite struct PinUvAuthTokenTests {
    /// A key with PIN "1234" and one discoverable credential for example.com, made with a token.
    func keyWithPIN() throws -> (Harness, Registration) {
        var harness = try Harness()
        #expect(status(of: try harness.setPIN("1234")) == .ok)
        let token = try harness.token("1234", permissions: 0x01)
        let outcome = harness.cbor(.makeCredential, authorized(Request.makeCredential(rk: true), token, paramKey: 8))
        let registration = try Registration(responseMap(harness.approve(outcome)))
        return (harness, registration)
    }

    @Test func makeCredUvNotRqd() throws {
        var (harness, _) = try keyWithPIN()
        // A discoverable credential needs the PIN; a non-discoverable one does not, and is made without UV.
        #expect(status(of: harness.cbor(.makeCredential, Request.makeCredential(rk: true))) == .puatRequired)
        let plain = try harness.register(Request.makeCredential())
        #expect(plain.authData.flags & ParsedAuthData.userVerified == 0)
        // uv=true without built-in UV is an invalid option, but a pinUvAuthParam takes its place.
        let uv = Request.makeCredential().setting(7, ["uv": true])
        #expect(status(of: harness.cbor(.makeCredential, uv)) == .invalidOption)
        let token = try harness.token("1234", permissions: 0x01)
        #expect(needsPresence(harness.cbor(.makeCredential, authorized(uv, token, paramKey: 8))))
    }

    @Test func aTokenServesOneTouchThenKeepsNothingButLbw() throws {
        var (harness, _) = try keyWithPIN()
        let token = try harness.token("1234", permissions: 0x03)
        let request = authorized(Request.getAssertion(), token, paramKey: 6)
        let first = try Assertion(responseMap(harness.approve(harness.cbor(.getAssertion, request))))
        #expect(first.authData.flags & (ParsedAuthData.userVerified | ParsedAuthData.userPresent) == 0x05)
        #expect(status(of: harness.cbor(.getAssertion, request)) == .pinAuthInvalid)
        let mc = authorized(Request.makeCredential(), token, paramKey: 8)
        #expect(status(of: harness.cbor(.makeCredential, mc)) == .pinAuthInvalid)
    }

    @Test func upFalseDoesNotSpendTheToken() throws {
        var (harness, registration) = try keyWithPIN()
        let token = try harness.token("1234", permissions: 0x03)
        let probe = authorized(Request.getAssertion(up: false), token, paramKey: 6)
        let silent = try Assertion(responseMap(harness.cbor(.getAssertion, probe)))
        #expect(silent.authData.flags & 0x05 == 0x04)  // UV without UP
        #expect(silent.verifies(with: registration.publicKey))
        let real = authorized(Request.getAssertion(), token, paramKey: 6)
        #expect(status(of: harness.approve(harness.cbor(.getAssertion, real))) == .ok)
    }

    @Test func permissionsAndRPAreEnforced() throws {
        var (harness, _) = try keyWithPIN()
        let gaOnly = try harness.token("1234", permissions: 0x02)
        #expect(
            status(of: harness.cbor(.makeCredential, authorized(Request.makeCredential(), gaOnly, paramKey: 8)))
                == .pinAuthInvalid
        )
        let other = try harness.token("1234", permissions: 0x03, rpId: "other.example")
        #expect(
            status(of: harness.cbor(.getAssertion, authorized(Request.getAssertion(up: false), other, paramKey: 6)))
                == .pinAuthInvalid
        )
        // A token without an RP is bound to the first RP it is used for.
        let unbound = try harness.token("1234", permissions: 0x03)
        #expect(
            status(of: harness.cbor(.getAssertion, authorized(Request.getAssertion(up: false), unbound, paramKey: 6)))
                == .ok
        )
        let elsewhere = authorized(Request.getAssertion(rpId: "other.example", up: false), unbound, paramKey: 6)
        #expect(status(of: harness.cbor(.getAssertion, elsewhere)) == .pinAuthInvalid)
    }

    @Test(arguments: [1, 2])
    func aWrongOrForeignParamIsPINAuthInvalid(version: Int) throws {
        var (harness, _) = try keyWithPIN()
        let token = try harness.token("1234", permissions: 0x03, version: version)
        var request = authorized(Request.getAssertion(up: false), token, paramKey: 6)
        var param = try #require(request[6]?.bytesValue)
        #expect(param.count == (version == 1 ? 16 : 32))
        param[0] ^= 0x80
        request[6] = .byteString(param)
        #expect(status(of: harness.cbor(.getAssertion, request)) == .pinAuthInvalid)
        // The protocol named must be the one the param was made with.
        let mismatched = authorized(Request.getAssertion(up: false), token, paramKey: 6).setting(
            7,
            CBORValue(3 - version)
        )
        #expect(status(of: harness.cbor(.getAssertion, mismatched)) == .pinAuthInvalid)
    }

    @Test func theUsageTimerStopsTheToken() throws {
        var (harness, _) = try keyWithPIN()
        // Not used within 30 s of being obtained: gone.
        let idle = try harness.token("1234", permissions: 0x02)
        harness.now += .seconds(31)
        #expect(
            status(of: harness.cbor(.getAssertion, authorized(Request.getAssertion(up: false), idle, paramKey: 6)))
                == .pinAuthInvalid
        )
        // Used at once, it lives for the maximum usage period of 10 minutes.
        let busy = try harness.token("1234", permissions: 0x02)
        let request = authorized(Request.getAssertion(up: false), busy, paramKey: 6)
        #expect(status(of: harness.cbor(.getAssertion, request)) == .ok)
        harness.now += .seconds(590)
        #expect(status(of: harness.cbor(.getAssertion, request)) == .ok)
        harness.now += .seconds(20)
        #expect(status(of: harness.cbor(.getAssertion, request)) == .pinAuthInvalid)
    }

    @Test func aPowerCycleForgetsTheToken() throws {
        var (harness, _) = try keyWithPIN()
        let token = try harness.token("1234", permissions: 0x02)
        harness.authenticator.powerCycle(now: harness.now)
        #expect(
            status(of: harness.cbor(.getAssertion, authorized(Request.getAssertion(up: false), token, paramKey: 6)))
                == .pinAuthInvalid
        )
    }

    @Test func aNewTokenReplacesTheOld() throws {
        var (harness, _) = try keyWithPIN()
        let first = try harness.token("1234", permissions: 0x02)
        _ = try harness.token("1234", permissions: 0x02)
        #expect(
            status(of: harness.cbor(.getAssertion, authorized(Request.getAssertion(up: false), first, paramKey: 6)))
                == .pinAuthInvalid
        )
    }

    @Test func theSelectionProbeReportsThePINState() throws {
        var harness = try Harness()
        let probe = Request.makeCredential().setting(8, .byteString([])).setting(9, 2)
        #expect(status(of: harness.approve(harness.cbor(.makeCredential, probe))) == .pinNotSet)
        _ = try harness.setPIN("1234")
        #expect(status(of: harness.approve(harness.cbor(.makeCredential, probe))) == .pinInvalid)
        let gaProbe = Request.getAssertion().setting(6, .byteString([])).setting(7, 2)
        #expect(status(of: harness.approve(harness.cbor(.getAssertion, gaProbe))) == .pinInvalid)
        #expect(status(of: harness.answer(harness.cbor(.getAssertion, gaProbe), with: .denied)) == .operationDenied)
    }

    @Test func namesOnlyWithUVAndSeveralAccounts() throws {
        var (harness, _) = try keyWithPIN()
        let token = try harness.token("1234", permissions: 0x01)
        let second = Request.makeCredential(user: Request.user(id: [9, 9], name: "bob", displayName: "Bob"), rk: true)
        _ = try Registration(
            responseMap(harness.approve(harness.cbor(.makeCredential, authorized(second, token, paramKey: 8))))
        )
        let plain = try harness.getAssertion(Request.getAssertion())
        #expect(plain.user == ["id": .byteString([9, 9])])
        let ga = try harness.token("1234", permissions: 0x02)
        let verified = try harness.getAssertion(authorized(Request.getAssertion(), ga, paramKey: 6))
        #expect(verified.user == ["id": .byteString([9, 9]), "name": "bob", "displayName": "Bob"])
        #expect(verified.response[5] == 2)
        let next = try Assertion(responseMap(harness.cbor(.getNextAssertion)))
        #expect(next.user == ["id": .byteString(Request.userId), "name": "alice", "displayName": "Alice"])
        #expect(next.authData.flags & 0x05 == 0x05)
    }
}
