package import CTAPCBOR
import Crypto
import Secp256k1
import _CryptoExtras

/// A credential as the control plane reads and writes it: everything needed to use it somewhere else.
package struct ManagedCredential: Sendable, Equatable {
    package var id: [UInt8]
    package var rpId: String
    /// True for a discoverable (resident) credential.
    package var discoverable: Bool
    /// The private key as PKCS#8 DER.
    package var privateKey: [UInt8]
    package var algorithm: CredentialAlgorithm
    /// The user id; nil for a non-discoverable credential made through CTAP (the key does not keep it).
    package var userHandle: [UInt8]?
    package var userName: String?
    package var userDisplayName: String?
    /// The key's signature counter (one counter for every credential).
    package var signCount: UInt32
    /// The credential's blob in the large-blob array, if it has a largeBlobKey and an entry opens with it.
    package var largeBlob: [UInt8]?
    /// WebAuthn Level 3 backup eligibility (fixed once the credential exists) and backup state.
    package var backupEligible: Bool
    package var backupState: Bool

    package init(
        id: [UInt8],
        rpId: String,
        discoverable: Bool,
        privateKey: [UInt8],
        algorithm: CredentialAlgorithm = .es256,
        userHandle: [UInt8]? = nil,
        userName: String? = nil,
        userDisplayName: String? = nil,
        signCount: UInt32 = 0,
        largeBlob: [UInt8]? = nil,
        backupEligible: Bool = false,
        backupState: Bool = false
    ) {
        self.largeBlob = largeBlob
        self.backupEligible = backupEligible
        self.backupState = backupState
        self.id = id
        self.rpId = rpId
        self.discoverable = discoverable
        self.privateKey = privateKey
        self.algorithm = algorithm
        self.userHandle = userHandle
        self.userName = userName
        self.userDisplayName = userDisplayName
        self.signCount = signCount
    }
}

/// What a request did with a credential, for the control plane's events.
package struct CredentialActivity: Sendable, Equatable {
    /// The RP ID (nil for U2F, which only sees the application parameter's hash).
    package var rpId: String?
    package var credentialId: [UInt8]
    package var userHandle: [UInt8]?
}

/// PKCS#8 (RFC 5208, RFC 8410, RFC 9881) encodings of credential private keys.
package enum PrivateKeyEncoding {
    /// The fixed prefix of an Ed25519 PrivateKeyInfo without the optional public key (RFC 8410 §7).
    static let ed25519Prefix: [UInt8] = [
        0x30, 0x2E, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
    ]

    /// The fixed prefix of an ML-DSA PrivateKeyInfo in the seed form (RFC 9881: `[0] IMPLICIT OCTET STRING` of the
    /// 32-byte seed); the last byte of the OID (2.16.840.1.101.3.4.3.18 or .19) names the parameter set.
    static func mlDSAPrefix(oidLast: UInt8) -> [UInt8] {
        [
            0x30, 0x34, 0x02, 0x01, 0x00, 0x30, 0x0B, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03,
            oidLast, 0x04, 0x22, 0x80, 0x20,
        ]
    }
    static let mlDSA65OID: UInt8 = 0x12
    static let mlDSA87OID: UInt8 = 0x13

    /// The raw key and algorithm of a PKCS#8 private key: P-256 → ES256, P-384 → ES384, P-521 → ES512,
    /// Ed25519 → EdDSA, ML-DSA-65/87 (seed form) → ML-DSA-65/87 (PKCS#8 does not say which of the polymorphic and
    /// fully specified identifiers a key was made for).
    package static func decode(pkcs8: [UInt8]) throws(CTAPError) -> (key: [UInt8], algorithm: CredentialAlgorithm) {
        if pkcs8.count == ed25519Prefix.count + 32, Array(pkcs8.prefix(ed25519Prefix.count)) == ed25519Prefix {
            return (Array(pkcs8.suffix(32)), .edDSA)
        }
        for (oid, algorithm) in [(mlDSA65OID, CredentialAlgorithm.mlDSA65), (mlDSA87OID, .mlDSA87)] {
            let prefix = mlDSAPrefix(oidLast: oid)
            if pkcs8.count == prefix.count + 32, Array(pkcs8.prefix(prefix.count)) == prefix {
                return (Array(pkcs8.suffix(32)), algorithm)
            }
        }
        // secp256k1 before P-256: swift-crypto's P-256 reader takes a secp256k1 key's scalar without its curve.
        if let scalar = Secp256k1.scalar(pkcs8: pkcs8) { return (scalar, .es256K) }
        if let key = try? P256.Signing.PrivateKey(derRepresentation: pkcs8) {
            return (Array(key.rawRepresentation), .es256)
        }
        if let key = try? P384.Signing.PrivateKey(derRepresentation: pkcs8) {
            return (Array(key.rawRepresentation), .es384)
        }
        if let key = try? P521.Signing.PrivateKey(derRepresentation: pkcs8) {
            return (Array(key.rawRepresentation), .es512)
        }
        // RSA: 2048 bits or more (swift-crypto refuses smaller keys), kept as PKCS#1, signing RS256 by default.
        if let key = try? _RSA.Signing.PrivateKey(derRepresentation: pkcs8), key.keySizeInBits <= 4096 {
            return (Array(key.derRepresentation), .rs256)
        }
        throw CTAPError(
            .invalidParameter,
            "the private key is not a PKCS#8 key of P-256, P-384, P-521, secp256k1, Ed25519, RSA (2048–4096 bits) or ML-DSA-65/87 (seed form)"
        )
    }

    /// The PKCS#8 DER of a raw key.
    package static func encode(key: [UInt8], algorithm: CredentialAlgorithm) throws(CTAPError) -> [UInt8] {
        guard algorithm.isRawKeyLength(key.count) else {
            throw CTAPError(.other, "a stored \(algorithm.name) key is \(key.count) bytes")
        }
        do {
            switch algorithm.keyKind {
            case .ed25519: return ed25519Prefix + key
            case .mlDSA65: return mlDSAPrefix(oidLast: mlDSA65OID) + key
            case .mlDSA87: return mlDSAPrefix(oidLast: mlDSA87OID) + key
            case .p256: return Array(try P256.Signing.PrivateKey(rawRepresentation: key).derRepresentation)
            case .p384: return Array(try P384.Signing.PrivateKey(rawRepresentation: key).derRepresentation)
            case .p521: return Array(try P521.Signing.PrivateKey(rawRepresentation: key).derRepresentation)
            case .rsa: return Array(try _RSA.Signing.PrivateKey(derRepresentation: key).pkcs8DERRepresentation)
            case .secp256k1:
                guard let der = Secp256k1.pkcs8(scalar: key) else {
                    throw CTAPError(.other, "a stored ES256K key is invalid")
                }
                return der
            }
        } catch {
            throw CTAPError(.other, "a stored \(algorithm.name) key is invalid")
        }
    }
}

extension Authenticator {
    /// The most non-discoverable credentials made through CTAP that the key remembers for ``managedCredentials``.
    package static let createdCredentialMemory = 1000

    /// Every credential the control plane can see: the stored ones (discoverable, and imported non-discoverable
    /// ones) and the non-discoverable ones made since the key started (their ids hold their keys).
    package func managedCredentials() throws(CTAPError) -> [ManagedCredential] {
        var out: [ManagedCredential] = []
        let entries = largeBlobEntries()
        for c in storage.residentCredentials.sorted(by: { $0.creationSerial < $1.creationSerial }) {
            out.append(
                ManagedCredential(
                    id: c.id,
                    rpId: c.rpId,
                    discoverable: c.discoverable,
                    privateKey: try PrivateKeyEncoding.encode(key: c.privateKey, algorithm: c.algorithm),
                    algorithm: c.algorithm,
                    userHandle: c.user.id.isEmpty && !c.discoverable ? nil : c.user.id,
                    userName: c.user.name,
                    userDisplayName: c.user.displayName,
                    signCount: countersRemoved.contains(c.id) ? 0 : storage.signCounter,
                    largeBlob: c.largeBlobKey.flatMap { key in
                        entries.lazy.compactMap { Self.openBlob($0, key: key) }.first
                    },
                    backupEligible: c.backupEligible,
                    backupState: c.backupState
                )
            )
        }
        for made in createdCredentials {
            let hash = Array(SHA256.hash(data: Array(made.rpId.utf8)))
            guard let contents = CredentialID.open(made.id, rpIdHash: hash, key: sealingKey) else { continue }
            out.append(
                ManagedCredential(
                    id: made.id,
                    rpId: made.rpId,
                    discoverable: false,
                    privateKey: try PrivateKeyEncoding.encode(key: contents.privateKey, algorithm: contents.algorithm),
                    algorithm: contents.algorithm,
                    signCount: countersRemoved.contains(made.id) ? 0 : storage.signCounter,
                    backupEligible: contents.backupEligible,
                    backupState: backupStates[made.id] ?? contents.backupState
                )
            )
        }
        return out
    }

    /// Stores a credential given by the control plane. It replaces a stored credential with the same id, and a
    /// discoverable one of the same RP and user. A signCount above the key's counter raises the counter.
    package mutating func importCredential(_ credential: ManagedCredential) throws(CTAPError) {
        let (rawKey, algorithm) = try PrivateKeyEncoding.decode(pkcs8: credential.privateKey)
        if credential.backupState && !credential.backupEligible {
            throw CTAPError(.invalidParameter, "only a backup-eligible credential can be backed up")
        }
        let rpIdHash = Array(SHA256.hash(data: Array(credential.rpId.utf8)))
        if credential.largeBlob != nil && !credential.discoverable {
            throw CTAPError(.invalidParameter, "a large blob needs a discoverable credential")
        }
        let largeBlobKey = credential.largeBlob.map { _ in entropy.bytes(32) }
        let record = ResidentCredential(
            id: credential.id,
            rpId: credential.rpId,
            rpIdHash: rpIdHash,
            user: UserEntity(
                id: credential.userHandle ?? [],
                name: credential.userName,
                displayName: credential.userDisplayName
            ),
            privateKey: rawKey,
            creationSerial: storage.newestCreationSerial + 1,
            algorithm: algorithm,
            largeBlobKey: largeBlobKey,
            discoverable: credential.discoverable,
            backupEligible: credential.backupEligible,
            backupState: credential.backupState
        )
        let replaced =
            (storage.residentCredential(id: record.id).map { [$0] } ?? [])
            + storage.residentCredentials(rpIdHash: rpIdHash).filter { $0.id != record.id && $0.replaces(record) }
        if replaced.isEmpty && remainingDiscoverableCredentials <= 0 {
            throw CTAPError(.keyStoreFull, "no room for another credential")
        }
        // The blob goes in before the credential: if the array is full, nothing is stored. (A credential that then
        // fails to store leaves an entry no key opens, which platforms garbage-collect.)
        if let blob = credential.largeBlob, let largeBlobKey { try addLargeBlob(blob, key: largeBlobKey) }
        for old in replaced where old.id != record.id { try storage.deleteResident(id: old.id) }
        try storage.storeResident(record)
        createdCredentials.removeAll { $0.id == record.id }
        try storage.raiseSignCounter(to: credential.signCount)
    }

    /// WebDriver's Set Credential Properties: changes a credential's backup state; its backup eligibility was fixed
    /// when it was made (asking for another is INVALID_PARAMETER). Returns whether the key has the credential.
    /// The control plane's setCredentialProperties: the backup flags (a credential's eligibility is fixed), and its
    /// signature counter: -1 removes it (its assertions report 0, as WebDriver's signCount -1), a number raises the
    /// key's one counter to it (it never goes back: every credential shares it, as on most hardware keys). Returns
    /// whether the key has the credential; nothing changes when it has not, or when a value is refused.
    package mutating func setCredentialProperties(
        id: [UInt8],
        backupEligible: Bool?,
        backupState: Bool?,
        signCount: Int64? = nil
    ) throws(CTAPError) -> Bool {
        if let signCount, signCount >= 0, signCount < Int64(storage.signCounter) {
            throw CTAPError(
                .invalidParameter,
                "the key's counter is at \(storage.signCounter) and never goes back (one counter for every credential)"
            )
        }
        guard try setBackupProperties(id: id, backupEligible: backupEligible, backupState: backupState) else {
            return false
        }
        if let signCount {
            if signCount < 0 {
                countersRemoved.insert(id)
            } else {
                countersRemoved.remove(id)
                try storage.raiseSignCounter(to: UInt32(signCount))
            }
        }
        return true
    }

    mutating func setBackupProperties(
        id: [UInt8],
        backupEligible: Bool?,
        backupState: Bool?
    ) throws(CTAPError) -> Bool {
        func check(_ eligible: Bool) throws(CTAPError) {
            if let backupEligible, backupEligible != eligible {
                throw CTAPError(.invalidParameter, "a credential's backup eligibility is fixed when it is made")
            }
        }
        if backupState == true && backupEligible == false {
            throw CTAPError(.invalidParameter, "only a backup-eligible credential can be backed up")
        }
        if var stored = storage.residentCredential(id: id) {
            try check(stored.backupEligible)
            if backupState == true && !stored.backupEligible {
                throw CTAPError(.invalidParameter, "only a backup-eligible credential can be backed up")
            }
            guard let backupState, backupState != stored.backupState else { return true }
            stored.backupState = backupState
            try storage.storeResident(stored)
            return true
        }
        guard let made = createdCredentials.first(where: { $0.id == id }),
            let contents = CredentialID.open(
                id,
                rpIdHash: Array(SHA256.hash(data: Array(made.rpId.utf8))),
                key: sealingKey
            )
        else { return false }
        try check(contents.backupEligible)
        if backupState == true && !contents.backupEligible {
            throw CTAPError(.invalidParameter, "only a backup-eligible credential can be backed up")
        }
        if let backupState { backupStates[id] = backupState }
        return true
    }

    /// Deletes a credential by id; returns whether the key had it.
    package mutating func removeCredential(id: [UInt8]) throws(CTAPError) -> Bool {
        let remembered = createdCredentials.contains { $0.id == id }
        createdCredentials.removeAll { $0.id == id }
        return try storage.deleteResident(id: id) || remembered
    }

    /// Deletes every stored credential and forgets the non-discoverable ones made since start (their ids still
    /// work: only a reset makes them useless).
    package mutating func removeAllCredentials() throws(CTAPError) -> Int {
        let ids = storage.residentCredentials.map(\.id)
        for id in ids { try storage.deleteResident(id: id) }
        defer { createdCredentials.removeAll() }
        return ids.count + createdCredentials.count
    }

    /// Changes run options from the control plane.
    package mutating func setOptions(
        resetWindow: Bool? = nil,
        alwaysUv: Bool? = nil,
        fingerprintSensor: Bool? = nil
    ) throws(CTAPError) {
        if let alwaysUv, alwaysUv != storage.settings.alwaysUv || !storage.settings.alwaysUvChosen {
            var settings = storage.settings
            settings.alwaysUv = alwaysUv
            settings.alwaysUvChosen = true
            try storage.setSettings(settings)
        }
        if let resetWindow { configuration.resetWindowEnabled = resetWindow }
        if let fingerprintSensor { configuration.fingerprintSensor = fingerprintSensor }
    }

    /// Installs a batch attestation identity: from now on makeCredential answers packed attestation with the
    /// certificate in x5c, and U2F register uses it. With `enterprise` (a key and its certificate from the same
    /// root), the key offers enterprise attestation (getInfo ep) signed by that key.
    package mutating func installBatchAttestation(
        privateKeyPKCS8: [UInt8],
        certificate: [UInt8],
        rootCertificate: [UInt8],
        enterprise: (privateKey: [UInt8], certificate: [UInt8])? = nil
    ) throws(CTAPError) {
        func p256(_ pkcs8: [UInt8]) throws(CTAPError) -> [UInt8] {
            let (key, algorithm) = try PrivateKeyEncoding.decode(pkcs8: pkcs8)
            guard algorithm == .es256 else { throw CTAPError(.invalidParameter, "an attestation key must be P-256") }
            return key
        }
        let key = try p256(privateKeyPKCS8)
        let certificates = [certificate, rootCertificate] + (enterprise.map { [$0.certificate] } ?? [])
        guard certificates.allSatisfy({ !$0.isEmpty && $0.count <= 2048 }) else {
            throw CTAPError(.invalidParameter, "certificates are 1 to 2048 bytes of DER")
        }
        let enterpriseKey = try enterprise.map { (e) throws(CTAPError) in try p256(e.privateKey) }
        try storage.setBatchAttestation(
            BatchAttestationKey(privateKey: key, certificate: certificate, rootCertificate: rootCertificate)
        )
        if let enterprise, let enterpriseKey {
            try storage.setEnterpriseAttestationKey(privateKey: enterpriseKey, certificate: enterprise.certificate)
        }
    }

    /// Whether the key can give an enterprise attestation: it has a batch attestation and an enterprise key and
    /// certificate from the same provisioning (getInfo ep is present only then).
    var canAttestEnterprise: Bool {
        storage.batchAttestation != nil && storage.enterpriseAttestationKey != nil
    }

    /// The entries of the stored large-blob array (none when it does not decode).
    func largeBlobEntries() -> [CBORValue] {
        let array = storage.largeBlobArray
        guard LargeBlobArray.isIntact(array), let value = try? CBORDecoder.decode(Array(array.dropLast(16))),
            let entries = value.arrayValue
        else { return [] }
        return entries
    }

    /// The blob of an entry that opens with `key` (AES-256-GCM, then DEFLATE), or nil.
    static func openBlob(_ entry: CBORValue, key: [UInt8]) -> [UInt8]? {
        guard let ciphertext = entry[1]?.bytesValue, ciphertext.count >= 16, let nonce = entry[2]?.bytesValue,
            nonce.count == 12, let size = entry[3]?.intValue, size >= 0, size <= 1 << 20,
            let box = try? AES.GCM.SealedBox(
                nonce: AES.GCM.Nonce(data: nonce),
                ciphertext: ciphertext.dropLast(16),
                tag: ciphertext.suffix(16)
            ),
            let compressed = try? AES.GCM.open(
                box,
                using: SymmetricKey(data: key),
                authenticating: Array("blob".utf8) + littleEndian64(UInt64(size))
            )
        else { return nil }
        guard let blob = try? Deflate.inflate(Array(compressed), maxOutput: size), blob.count == size else {
            return nil
        }
        return blob
    }

    static func littleEndian64(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    /// Writes `blob` into the large-blob array under `key`, replacing an entry that opens with the same key.
    mutating func addLargeBlob(_ blob: [UInt8], key: [UInt8]) throws(CTAPError) {
        var entries = largeBlobEntries().filter { Self.openBlob($0, key: key) == nil }
        let nonce = entropy.bytes(12)
        let sealed: AES.GCM.SealedBox
        do {
            sealed = try AES.GCM.seal(
                Deflate.store(blob),
                using: SymmetricKey(data: key),
                nonce: AES.GCM.Nonce(data: nonce),
                authenticating: Array("blob".utf8) + Self.littleEndian64(UInt64(blob.count))
            )
        } catch {
            throw CTAPError(.other, "sealing a large blob failed: \(error)")
        }
        entries.append([
            1: .byteString(Array(sealed.ciphertext) + Array(sealed.tag)), 2: .byteString(nonce),
            3: CBORValue(blob.count),
        ])
        let body = CBORValue.array(entries).encoded()
        let array = body + LargeBlobArray.checksum(body)
        guard array.count <= configuration.maxLargeBlobArray else {
            throw CTAPError(.largeBlobStorageFull, "the large-blob array would be \(array.count) bytes")
        }
        try storage.setLargeBlobArray(array)
    }

    mutating func rememberCreated(id: [UInt8], rpId: String) {
        createdCredentials.append(CreatedCredential(id: id, rpId: rpId))
        if createdCredentials.count > Self.createdCredentialMemory { createdCredentials.removeFirst() }
    }
}

/// A non-discoverable credential made through CTAP since the key started.
struct CreatedCredential: Sendable, Equatable {
    var id: [UInt8]
    var rpId: String
}

extension Authenticator {
    /// The authenticatorGetInfo map as a host would read it now (the control plane's status).
    package mutating func info() -> CBORValue { getInfo() }

    /// The number of discoverable credentials stored.
    package var discoverableCredentialCount: Int { storage.discoverableCount }

    /// How many more credentials the key accepts.
    package var remainingCredentialCapacity: Int { remainingDiscoverableCredentials }
}
