import CTAPCBOR
import Crypto

/// A credential that can answer an assertion.
struct AssertionCandidate: Sendable {
    var id: [UInt8]
    var privateKey: [UInt8]
    /// The stored user of a discoverable credential; nil for a non-discoverable one.
    var user: UserEntity?
}

/// Everything getAssertion needs once the user has touched the key (or without a touch for up=false).
struct AssertionPlan: Sendable {
    var rpIdHash: [UInt8]
    var clientDataHash: [UInt8]
    var candidates: [AssertionCandidate]
    var userPresent: Bool
    /// True when the credentials were found by an allow list (no numberOfCredentials, no getNextAssertion).
    var fromAllowList: Bool
}

/// State kept between getAssertion and getNextAssertion.
struct NextAssertionState: Sendable {
    var plan: AssertionPlan
    var remaining: ArraySlice<AssertionCandidate>
    var lastTime: Duration
}

extension Authenticator {
    /// authenticatorGetAssertion (0x02), up to the point where user presence is needed.
    mutating func getAssertion(_ params: RequestParameters, now: Duration) throws(CTAPError) -> AuthenticatorOutcome {
        let pinUvAuthParam = try params.bytes(0x06, "pinUvAuthParam")
        if pinUvAuthParam?.isEmpty == true {
            return askPresence(.pinProbe, PresencePrompt(command: "getAssertion (select)"))
        }
        guard let rpId = try params.text(0x01, "rpId") else { throw CTAPError(.missingParameter, "rpId missing") }
        guard let clientDataHash = try params.bytes(0x02, "clientDataHash") else {
            throw CTAPError(.missingParameter, "clientDataHash missing")
        }
        let allowList = try params.array(0x03, "allowList").map { (list) throws(CTAPError) in
            try CredentialDescriptor.list(list)
        } ?? []
        _ = try params.subMap(0x04, "extensions")
        let options = try RequestOptions(params.subMap(0x05, "options"))
        let pinUvAuthProtocol = try params.int(0x07, "pinUvAuthProtocol")
        if pinUvAuthParam != nil {
            guard pinUvAuthProtocol != nil else { throw CTAPError(.missingParameter, "pinUvAuthProtocol missing") }
            throw CTAPError(.invalidParameter, "no PIN/UV auth protocol is supported")
        }
        if options.rk != nil { throw CTAPError(.unsupportedOption, "rk is not an option of getAssertion") }
        if options.uv == true { throw CTAPError(.invalidOption, "no built-in user verification") }
        guard clientDataHash.count == 32 else { throw CTAPError(.invalidLength, "clientDataHash is not 32 bytes") }

        let rpIdHash = Array(SHA256.hash(data: Array(rpId.utf8)))
        var candidates: [AssertionCandidate] = []
        if allowList.isEmpty {
            candidates = storage.residentCredentials
                .filter { $0.rpIdHash == rpIdHash }
                .sorted { $0.creationSerial > $1.creationSerial }
                .map { AssertionCandidate(id: $0.id, privateKey: $0.privateKey, user: $0.user) }
        } else {
            for descriptor in allowList where descriptor.type == "public-key" {
                if let found = lookUp(descriptor.id, rpIdHash: rpIdHash) {
                    candidates = [found]
                    break
                }
            }
        }
        guard !candidates.isEmpty else { throw CTAPError(.noCredentials, "no credential for \(rpId)") }
        let userPresent = options.up ?? true
        let plan = AssertionPlan(
            rpIdHash: rpIdHash, clientDataHash: clientDataHash, candidates: candidates, userPresent: userPresent,
            fromAllowList: !allowList.isEmpty)
        if userPresent {
            let user = candidates.count == 1 ? candidates[0].user : nil
            return askPresence(
                .getAssertion(plan),
                PresencePrompt(command: "getAssertion", rpId: rpId, userName: user?.name ?? user?.displayName))
        }
        return .response(Self.success(try finishGetAssertion(plan, now: now)))
    }

    /// Signs the first assertion and keeps the rest for getNextAssertion.
    mutating func finishGetAssertion(_ plan: AssertionPlan, now: Duration) throws(CTAPError) -> CBORValue {
        let count = plan.candidates.count
        if !plan.fromAllowList && count > 1 {
            nextAssertion = NextAssertionState(plan: plan, remaining: plan.candidates.dropFirst(), lastTime: now)
        }
        var response = try assertion(plan.candidates[0], plan: plan)
        if !plan.fromAllowList && count > 1 {
            response[.unsigned(5)] = CBORValue(count)
        }
        return .map(response)
    }

    /// authenticatorGetNextAssertion (0x08).
    mutating func getNextAssertion(now: Duration) throws(CTAPError) -> AuthenticatorOutcome {
        guard var state = nextAssertion, let candidate = state.remaining.first else {
            nextAssertion = nil
            throw CTAPError(.notAllowed, "no getAssertion to continue")
        }
        guard now - state.lastTime <= configuration.getNextAssertionTimeout else {
            nextAssertion = nil
            throw CTAPError(.notAllowed, "getNextAssertion came too late")
        }
        state.remaining = state.remaining.dropFirst()
        state.lastTime = now
        nextAssertion = state.remaining.isEmpty ? nil : state
        return .response(Self.success(.map(try assertion(candidate, plan: state.plan))))
    }

    /// One signed assertion response map. The counter is committed before the signature is made.
    mutating func assertion(_ candidate: AssertionCandidate, plan: AssertionPlan) throws(CTAPError) -> [CBORValue:
        CBORValue]
    {
        let counter = try storage.incrementSignCounter()
        let authData = AuthenticatorData.make(
            rpIdHash: plan.rpIdHash, flags: plan.userPresent ? .userPresent : [], signCount: counter)
        let signature = try Self.sign(authData + plan.clientDataHash, with: candidate.privateKey)
        var response: [CBORValue: CBORValue] = [
            .unsigned(1): ["id": .byteString(candidate.id), "type": "public-key"],
            .unsigned(2): .byteString(authData),
            .unsigned(3): .byteString(signature),
        ]
        if let user = candidate.user {
            // Without user verification only the user id is returned (CTAP 2.1 §6.2).
            response[.unsigned(4)] = ["id": .byteString(user.id)]
        }
        return response
    }
}
