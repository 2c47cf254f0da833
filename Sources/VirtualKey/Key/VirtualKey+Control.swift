import CTAPCBOR
package import CTAPCore
package import ControlProtocol

extension VirtualKey {
    /// Carries out a control command that concerns the key alone (power cycles, subscriptions and the transport
    /// part of `status` belong to the I/O loop). Returns the result, or an error, and the reports the command
    /// caused (a touch answers the pending request).
    package mutating func execute(
        _ command: ControlCommand,
        now: Duration
    ) -> (
        result: Result<JSONValue, ControlError>, outputs: [KeyOutput]
    ) {
        do {
            var outputs: [KeyOutput] = []
            let result = try execute(command, now: now, outputs: &outputs)
            return (.success(result), outputs)
        } catch {
            return (.failure(error), [])
        }
    }

    mutating func execute(
        _ command: ControlCommand,
        now: Duration,
        outputs: inout [KeyOutput]
    ) throws(ControlError)
        -> JSONValue
    {
        switch command {
        case .addCredential(let p):
            try Self.add(p, to: &authenticator)
            return ["credentialId": .string(Base64URL.encode(p.credentialId))]
        case .getCredentials:
            let credentials = try ctap { () throws(CTAPError) in try authenticator.managedCredentials() }
            return ["credentials": .array(credentials.map(Self.json))]
        case .setCredentialProperties(let id, let eligibility, let state, let signCount):
            let found: Bool
            do {
                found = try authenticator.setCredentialProperties(
                    id: id,
                    backupEligible: eligibility,
                    backupState: state,
                    signCount: signCount
                )
            } catch {
                throw Self.controlError(error)
            }
            guard found else { throw ControlError(.notFound, "no credential with id \(Base64URL.encode(id))") }
            return [:]
        case .removeCredential(let id):
            let removed = try ctap { () throws(CTAPError) in try authenticator.removeCredential(id: id) }
            guard removed else { throw ControlError(.notFound, "no credential with id \(Base64URL.encode(id))") }
            return [:]
        case .removeAllCredentials:
            let count = try ctap { () throws(CTAPError) in try authenticator.removeAllCredentials() }
            return ["removed": JSONValue(count)]
        case .setUserVerified(let verified):
            user.userVerified = verified
            return [:]
        case .setAutomaticPresenceSimulation(let enabled):
            setPresence(enabled ? .approve(after: PresenceMode.defaultDelay) : .prompt)
            return ["presence": .string(presence.description)]
        case .presence(let setting):
            switch setting {
            case .approve(let ms): setPresence(.approve(after: .milliseconds(ms)))
            case .deny(let ms): setPresence(.deny(after: .milliseconds(ms)))
            case .prompt: setPresence(.prompt)
            case .approveNext(let ms): setPresence(.approve(after: .milliseconds(ms)), once: true)
            }
            return ["presence": .string(presence.description)]
        case .touch, .heldTouch:
            let prompt = pendingPrompt
            // A touch that does not say how long is a short one.
            var held: Duration = .zero
            if case .heldTouch(let ms) = command { held = .milliseconds(ms) }
            outputs += touch(now: now, held: held)
            guard let prompt else { return ["answered": false] }
            if pendingPrompt != nil, prompt.gesture == .longTouch {
                return [
                    "answered": false, "command": .string(prompt.command),
                    "reason": .string("a long touch: touch durationMs=\(user.longTouchHold.milliseconds) or longer"),
                ]
            }
            return [
                "answered": true, "command": .string(prompt.command),
                "rpId": prompt.rpId.map(JSONValue.string) ?? .null,
            ]
        case .refuse:
            guard let prompt = pendingPrompt else { return ["answered": false] }
            outputs += refuse(now: now)
            return [
                "answered": true, "command": .string(prompt.command),
                "rpId": prompt.rpId.map(JSONValue.string) ?? .null,
            ]
        case .setOption(let changes):
            try ctap { () throws(CTAPError) in
                try authenticator.setOptions(
                    resetWindow: changes.resetWindow,
                    alwaysUv: changes.alwaysUv,
                    fingerprintSensor: changes.fingerprintSensor
                )
            }
            return options
        case .injectFault(let fault):
            if case .flashWriteFailure = fault, storageFaults == nil {
                throw ControlError(.failed, "this key's storage does not take injected faults")
            }
            faults.arm(fault)
            return ["faults": faults.json]
        case .clearFaults:
            faults = ArmedFaults()
            return ["faults": faults.json]
        case .status:
            return keyStatus()
        case .setAttestation(let key, let certificate, let root, let enterprise):
            do {
                try authenticator.installBatchAttestation(
                    privateKeyPKCS8: key,
                    certificate: certificate,
                    rootCertificate: root,
                    enterprise: enterprise.map { ($0.privateKey, $0.certificate) }
                )
            } catch {
                throw Self.controlError(error)
            }
            return ["attestation": attestationSummary]
        case .powerCycle, .subscribe, .unsubscribe, .trace:
            throw ControlError(.failed, "\(command) is handled by the I/O loop")
        case .addVirtualAuthenticator, .removeVirtualAuthenticator, .listVirtualAuthenticators:
            throw ControlError(
                .unknownCommand,
                "keys are added and removed through the process's hub socket (serve --hub), not a key's own"
            )
        }
    }

    /// Runs a CTAPCore operation, mapping its error to `failed`.
    func ctap<T>(_ body: () throws(CTAPError) -> T) throws(ControlError) -> T {
        do {
            return try body()
        } catch {
            throw ControlError(.failed, error.description)
        }
    }

    var storageFaults: StorageFaults? { (authenticator.storage as? FaultInjectingStorage)?.faults }

    var options: JSONValue {
        [
            "resetWindow": .boolean(authenticator.configuration.resetWindowEnabled),
            "alwaysUv": .boolean(authenticator.storage.settings.alwaysUv),
            "fingerprintSensor": .boolean(authenticator.configuration.fingerprintSensor),
        ]
    }

    /// The armed faults as one value; setting it arms each part where it acts.
    package var faults: ArmedFaults {
        get {
            var out = ArmedFaults()
            out.transport = transportFaults
            out.authenticator = authenticator.faults
            out.flashWriteFailures = storageFaults?.pendingFailures ?? 0
            return out
        }
        set {
            transportFaults = newValue.transport
            authenticator.faults = newValue.authenticator
            storageFaults?.failNextWrites(newValue.flashWriteFailures)
        }
    }

    /// The key's half of `status`: identity, options, storage, counters, presence, pending request, faults.
    mutating func keyStatus() -> JSONValue {
        let info = authenticator.info()
        let infoJSON = GetInfoJSON.json(info)
        let storage = authenticator.storage
        var status: [String: JSONValue] = [
            "protocolVersion": 1,
            "profile": .string(authenticator.configuration.profile.name),
            "aaguid": .string(Self.uuid(authenticator.configuration.aaguid)),
            "info": infoJSON,
            "attestation": attestationSummary,
            "options": options,
            "storage": [
                "credentials": JSONValue(storage.residentCount),
                "discoverableCredentials": JSONValue(authenticator.discoverableCredentialCount),
                "remainingCapacity": JSONValue(authenticator.remainingCredentialCapacity),
                "pinSet": .boolean(storage.pin != nil),
                "pinRetries": JSONValue(storage.pinRetries),
                "fingerprints": JSONValue(storage.fingerprints.count),
                "damage": .array(storage.damage.map(JSONValue.string)),
            ],
            "counters": [
                "signCount": JSONValue(storage.signCounter),
                "requests": .object(requestCounts.mapValues { JSONValue($0) }),
            ],
            "presence": .string(presence.description),
            "presenceMode": presence.json,
            "faults": faults.json,
        ]
        status["userVerified"] = user.userVerified.map(JSONValue.boolean) ?? JSONValue.null
        if let prompt = pendingPrompt {
            var pending = prompt.controlFields
            for name in ["rpId", "userName"] where pending[name] == nil { pending[name] = JSONValue.null }
            status["pending"] = .object(pending)
        } else {
            status["pending"] = JSONValue.null
        }
        return .object(status)
    }

    /// Imports a credential given in WebDriver's shape; the error says whether the parameters or the key failed.
    package static func add(_ p: CredentialParameters, to authenticator: inout Authenticator) throws(ControlError) {
        let credential = ManagedCredential(
            id: p.credentialId,
            rpId: p.rpId,
            discoverable: p.isResidentCredential,
            privateKey: p.privateKey,
            userHandle: p.userHandle,
            userName: p.userName,
            userDisplayName: p.userDisplayName,
            signCount: p.signCount,
            largeBlob: p.largeBlob,
            backupEligible: p.backupEligibility ?? authenticator.configuration.backupEligible,
            backupState: p.backupState ?? authenticator.configuration.backupState
        )
        do {
            try authenticator.importCredential(credential)
        } catch {
            throw controlError(error)
        }
    }

    /// A CTAP error of a control command: INVALID_PARAMETER is the caller's `invalid-params`, anything else `failed`.
    static func controlError(_ error: CTAPError) -> ControlError {
        error.status == .invalidParameter
            ? ControlError(.invalidParams, error.diagnostic) : ControlError(.failed, error.description)
    }

    /// Which attestation makeCredential gives: the key's own batch once provisioned, fidosim's shared batch, or self
    /// attestation; with the batch's certificates.
    var attestationSummary: JSONValue {
        let own = authenticator.storage.batchAttestation
        guard let batch = own ?? authenticator.configuration.defaultAttestation else { return ["type": "self"] }
        var summary: [String: JSONValue] = [
            "type": own == nil ? "shared-batch" : "batch", "certificate": .string(Base64URL.encode(batch.certificate)),
            "rootCertificate": .string(Base64URL.encode(batch.rootCertificate)),
        ]
        if let enterprise = authenticator.storage.enterpriseAttestationKey {
            summary["enterpriseCertificate"] = .string(Base64URL.encode(enterprise.certificate))
        }
        return .object(summary)
    }

    /// A credential in WebDriver's Credential Parameters shape, plus its algorithm.
    package static func json(_ c: ManagedCredential) -> JSONValue {
        var members: [String: JSONValue] = [
            "credentialId": .string(Base64URL.encode(c.id)),
            "isResidentCredential": .boolean(c.discoverable),
            "rpId": .string(c.rpId),
            "privateKey": .string(Base64URL.encode(c.privateKey)),
            "signCount": JSONValue(c.signCount),
            "algorithm": .string(c.algorithm.name),
            "backupEligibility": .boolean(c.backupEligible), "backupState": .boolean(c.backupState),
        ]
        if let handle = c.userHandle { members["userHandle"] = .string(Base64URL.encode(handle)) }
        if let name = c.userName { members["userName"] = .string(name) }
        if let displayName = c.userDisplayName { members["userDisplayName"] = .string(displayName) }
        if let blob = c.largeBlob { members["largeBlob"] = .string(Base64URL.encode(blob)) }
        return .object(members)
    }

    /// `f1d0f1d0-5157-4e00-8a6e-000000000001`
    static func uuid(_ bytes: [UInt8]) -> String {
        let hex = Hex.string(bytes)
        guard hex.count == 32 else { return hex }
        let c = Array(hex)
        return [c[0..<8], c[8..<12], c[12..<16], c[16..<20], c[20..<32]].map { String($0) }.joined(separator: "-")
    }
}

extension PresencePrompt {
    /// The request waiting for the user, as the control plane shows it (in `status` and `prompt` events).
    var controlFields: [String: JSONValue] {
        var fields: [String: JSONValue] = [
            "command": .string(command), "gesture": .string(gesture.name),
        ]
        if let rpId { fields["rpId"] = .string(rpId) }
        if let userName { fields["userName"] = .string(userName) }
        return fields
    }
}

extension PresencePrompt.Gesture {
    /// The gesture's name in the control plane's messages and the person's prompts.
    package var name: String {
        switch self {
        case .touch: "touch"
        case .longTouch: "long touch"
        case .fingerprint: "fingerprint"
        }
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
