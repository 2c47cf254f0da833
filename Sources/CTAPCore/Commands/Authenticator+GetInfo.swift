import CTAPCBOR
import Crypto
import _CryptoExtras

extension Authenticator {
    /// The authenticatorGetInfo response map: only what this build implements and tests.
    mutating func getInfo() -> CBORValue {
        let settings = storage.settings
        var options: [CBORValue: CBORValue] = [
            // False only on a key with no room for discoverable credentials (maxResidentCredentials 0).
            "rk": .boolean(configuration.maxResidentCredentials > 0),
            "up": true,
            "plat": false,
            // Present and false: a PIN can be set; true once one is.
            "clientPin": .boolean(storage.pin != nil),
            "pinUvAuthToken": true,
            "credMgmt": true,
            // libfido2 sends only the preview command 0x41, which behaves like 0x0A.
            "credentialMgmtPreview": true,
            // alwaysUv takes makeCredUvNotRqd away (CTAP 2.1 §6.11.2).
            "makeCredUvNotRqd": .boolean(!settings.alwaysUv && configuration.profile.behaviour.makeCredUvNotRqd),
            "largeBlobs": true,
            "authnrCfg": true,
            "alwaysUv": .boolean(settings.alwaysUv),
            "setMinPINLength": true,
            "perCredMgmtRO": true,
        ]
        // Capable of enterprise attestation (a provisioned batch attestation with its enterprise certificate);
        // true once enableEnterpriseAttestation has run.
        if canAttestEnterprise { options["ep"] = .boolean(settings.enterpriseAttestation) }
        if configuration.fingerprintSensor {
            // Present: the sensor exists; true once a finger is enrolled.
            options["uv"] = .boolean(isBuiltInUVConfigured)
            options["bioEnroll"] = .boolean(!storage.fingerprints.isEmpty)
            options["userVerificationMgmtPreview"] = .boolean(!storage.fingerprints.isEmpty)
            options["uvBioEnroll"] = true
            options["uvAcfg"] = true
        }
        let info: CBORValue = [
            0x01: .array(KeyProfile.allVersions.map { .textString($0) }),
            0x02: .array(ExtensionName.supported.map { .textString($0) }),
            0x03: .byteString(configuration.aaguid),
            0x04: .map(options),
            0x05: CBORValue(configuration.maxMessageSize),
            0x06: .array(PinUvAuthProtocol.supported.map { CBORValue($0.rawValue) }),
            0x07: 8,  // maxCredentialCountInList
            0x08: CBORValue(maxCredentialIdLength),
            0x09: .array(configuration.transports.map { .textString($0) }),
            0x0A: .array(
                configuration.profile.algorithms.map { ["alg": CBORValue($0.rawValue), "type": "public-key"] }
            ),
            0x0B: CBORValue(configuration.maxLargeBlobArray),
            0x0C: .boolean(settings.forcePINChange),
            0x0D: CBORValue(minPINLength),
            0x0E: CBORValue(configuration.firmwareVersion),
            0x0F: CBORValue(maxCredBlobLength),
            0x10: CBORValue(Self.maxRPIDsForSetMinPINLength),
            0x14: CBORValue(remainingDiscoverableCredentials),
            // attestationFormats: "none" is implied and must not be listed (CTAP 2.2 §6.4); it is still honoured
            // in attestationFormatsPreference.
            0x16: ["packed"],
            0x18: .boolean(settings.longTouchForReset),
            0x1A: .array(configuration.transportsForReset.map { .textString($0) }),
            0x1B: .boolean(settings.pinComplexityPolicy),
            0x1D: 63,  // maxPINLength, in code points
            0x1F: .array(configCommands.map { CBORValue($0) }),
        ]
        guard case .map(var map) = info else { return info }
        if let identifier = encryptedIdentifier() { map[0x19] = .byteString(identifier) }
        if let state = encryptedCredentialStoreState() { map[0x1E] = .byteString(state) }
        if let url = configuration.pinComplexityPolicyURL { map[0x1C] = .byteString(Array(url.utf8)) }
        if configuration.fingerprintSensor {
            map[0x11] = CBORValue(Self.preferredPlatformUvAttempts)
            map[0x12] = 0x02  // uvModality: fingerprint_internal
            map[0x17] = CBORValue(settings.uvCountSinceLastPinEntry)
        }
        applyProfile(&map)
        if let captured = configuration.profile.capturedInfo { map = Self.capturedInfo(captured, live: map) }
        return .map(map)
    }

    /// getInfo members that follow the key's state: a captured profile answers them live.
    static let liveMembers: Set<Int> = [0x0C, 0x0D, 0x14, 0x17, 0x18, 0x19, 0x1B, 0x1E]
    /// Options that follow the key's state.
    static let liveOptions: Set<String> = [
        "clientPin", "uv", "bioEnroll", "userVerificationMgmtPreview", "alwaysUv", "makeCredUvNotRqd", "ep",
    ]

    /// A captured key's getInfo: its members, with the live value of each member and option that follows the key's
    /// state where this key has one (a live member the captured key lacks stays out; encIdentifier and
    /// encCredStoreState, new at each request, are never copied).
    static func capturedInfo(
        _ captured: [CBORValue: CBORValue],
        live: [CBORValue: CBORValue]
    ) -> [CBORValue: CBORValue] {
        var out = captured
        for key in captured.keys {
            guard let number = key.intValue else { continue }
            if number == 0x04, case .map(var options) = captured[key], case .map(let liveOptions)? = live[key] {
                for name in options.keys {
                    guard let text = name.textValue, Self.liveOptions.contains(text), let value = liveOptions[name]
                    else { continue }
                    options[name] = value
                }
                out[key] = .map(options)
            } else if Self.liveMembers.contains(number) {
                out[key] = live[key] ?? ([0x19, 0x1E].contains(number) ? nil : captured[key])
            }
        }
        return out
    }

    /// Narrows getInfo to the key's profile: its versions, extensions, protocols and algorithms; without
    /// FIDO_2_1 only the members and options CTAP 2.0 defines (and the preview options with FIDO_2_1_PRE).
    func applyProfile(_ map: inout [CBORValue: CBORValue]) {
        let profile = configuration.profile
        guard profile != .fidosim else { return }
        map[0x01] = .array(profile.versions.map { .textString($0) })
        let extensions = ExtensionName.supported.filter { profile.allows(extension: $0) }
        map[0x02] = extensions.isEmpty ? nil : .array(extensions.map { .textString($0) })
        // What only a key with the extension has (CTAP 2.1 §6.4): the largeBlobs option and the array's size come
        // with largeBlobKey, maxCredBlobLength with credBlob (Chromium refuses a getInfo that has one without the
        // other, and treats the key as U2F-only).
        if !profile.allows(extension: ExtensionName.largeBlobKey), case .map(var options)? = map[0x04] {
            options["largeBlobs"] = nil
            map[0x04] = .map(options)
            map[0x0B] = nil
        }
        if !profile.allows(extension: ExtensionName.credBlob) { map[0x0F] = nil }
        map[0x06] = .array(profile.pinUvAuthProtocols.map { CBORValue($0) })
        map[0x07] = CBORValue(profile.maxCredentialCountInList)
        if !profile.ctap23 {
            // The members fidosim added with CTAP 2.3 (and the 2.2 ones that came with them).
            for key in [0x18, 0x1A, 0x1C, 0x1E, 0x1F] { map[CBORValue(key)] = nil }
        }
        if !profile.ctap21Preview, case .map(var options)? = map[0x04] {
            // Without FIDO_2_1_PRE the preview commands 0x40 and 0x41 do not exist: their options are not offered.
            options["credentialMgmtPreview"] = nil
            options["userVerificationMgmtPreview"] = nil
            map[0x04] = .map(options)
        }
        guard !profile.ctap21 else { return }
        for key in map.keys where (key.intValue ?? 0) >= 0x09 { map[key] = nil }
        if case .map(let options)? = map[0x04] {
            var kept: Set<String> = ["rk", "up", "plat", "clientPin", "uv"]
            if profile.ctap21Preview {
                kept.formUnion(["userVerificationMgmtPreview", "bioEnroll"])
                // The preview's credential management by the name the profile's vendor gave it.
                kept.insert(profile.behaviour.previewCredentialManagement.rawValue)
            }
            map[0x04] = .map(options.filter { key, _ in key.textValue.map(kept.contains) ?? false })
        }
    }

    /// maxCredentialIdLength: the longest id of the profile's algorithms (``CredentialID``; 63 with ES256 and EdDSA
    /// only, as before fidosim had others), or the profile's larger figure (the key it imitates says so). Imported
    /// credentials may keep longer ids of their own.
    var maxCredentialIdLength: Int {
        max(configuration.profile.longestCredentialId, configuration.profile.maxCredentialIdLength ?? 0)
    }

    /// The device identifier: 16 bytes from the device secret, so stable across power cycles and new after reset.
    var deviceIdentifier: [UInt8] {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: storage.deviceSecret),
            salt: Array("fidosim".utf8),
            info: Array("device identifier v1".utf8),
            outputByteCount: 16
        ).withUnsafeBytes { Array($0) }
    }

    /// encIdentifier (getInfo 0x19, CTAP 2.2): the device identifier encrypted for the persistent token's holder.
    mutating func encryptedIdentifier() -> [UInt8]? {
        encryptForPersistentToken(deviceIdentifier, info: "encIdentifier")
    }

    /// The credential store's state: 16 bytes that change whenever a discoverable credential is made, replaced,
    /// updated or deleted, and with a reset, and that say nothing else (an HMAC under a key from the device secret
    /// over the stored records, so neither use nor the counter shows in it).
    var credentialStoreState: [UInt8] {
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: storage.deviceSecret),
            salt: Array("fidosim".utf8),
            info: Array("credential store state v1".utf8),
            outputByteCount: 32
        )
        var mac = HMAC<SHA256>(key: key)
        for credential in storage.residentCredentials.filter(\.discoverable).sorted(by: {
            $0.id.lexicographicallyPrecedes($1.id)
        }) {
            let record = CredentialRecord.encode(credential)
            mac.update(data: CBORValue(record.count).encoded() + record)
        }
        return Array(mac.finalize().prefix(16))
    }

    /// encCredStoreState (getInfo 0x1E, CTAP 2.3): the credential store's state encrypted for the persistent
    /// token's holder, so a platform can tell that its cached credential list is stale.
    mutating func encryptedCredentialStoreState() -> [UInt8]? {
        guard configuration.profile.ctap23 else { return nil }
        return encryptForPersistentToken(credentialStoreState, info: "encCredStoreState")
    }

    /// IV ‖ AES-128-CBC(HKDF-SHA-256(persistent token, 32 zero bytes, info, 16), IV, value) for a 16-byte value,
    /// with a fresh IV each time (CTAP 2.2 §6.4, encIdentifier); nil while the key has no persistent token.
    mutating func encryptForPersistentToken(_ value: [UInt8], info: String) -> [UInt8]? {
        guard let persistent = storage.persistentToken else { return nil }
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: persistent),
            salt: [UInt8](repeating: 0, count: 32),
            info: Array(info.utf8),
            outputByteCount: 16
        )
        let iv = entropy.bytes(16)
        guard let ivValue = try? AES._CBC.IV(ivBytes: iv),
            let sealed = try? AES._CBC.encrypt(value, using: key, iv: ivValue, noPadding: true)
        else { return nil }
        return iv + Array(sealed)
    }
}
