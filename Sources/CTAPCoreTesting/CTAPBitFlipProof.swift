import CTAPCBOR
package import CTAPCore
import Crypto
package import FlashStore

/// Damage proof at the CTAP level (storage.md, "Damage"): a key with discoverable credentials, replaced ones, a
/// signature counter and a large-blob array is written to flash; then, trial by trial, one random bit (or one random
/// byte) of a copy of its flash is changed, the key starts from the copy, and every credential is asserted and its
/// signature verified against the public key the key returned when it made the credential.
///
/// A violation is: a signature that does not verify, a counter at or below the one before the damage, a credential
/// lost although the damage is outside its record, a credential lost without the damage being reported, a
/// large-blob array that is neither the stored one nor (with damage reported) the initial one, and, for one flipped
/// bit, any loss at all or a key that does not start.
package enum CTAPBitFlipProof {
    package typealias Storage = FlashStorage<SimulatedFlash>

    package enum Damage: String, Sendable {
        /// One random bit of the pages that hold the log flipped.
        case bit
        /// One random byte that is not erased replaced by another value.
        case byte
    }

    package struct Report: Sendable, CustomStringConvertible {
        package var damage = Damage.bit
        package var trials = 0
        package var credentials = 0
        /// Trials whose mount reported something (a corrected bit or damage).
        package var reported = 0
        /// Trials where every finding was a corrected bit.
        package var corrected = 0
        package var assertions = 0
        /// Credentials answered as absent because the damage hit their own record (reported).
        package var lostToTheirDamage = 0
        /// Keys that refused to start because a record of their own state was damaged (reported).
        package var refusedStarts = 0
        package var violations: [String] = []

        package var description: String {
            "\(trials) trials of one flipped \(damage.rawValue) on a key with \(credentials) discoverable credentials: "
                + "\(assertions) assertions verified, \(reported) trials reported damage (\(corrected) all corrected), "
                + "\(lostToTheirDamage) credentials lost to damage in their own record, \(refusedStarts) starts "
                + "refused for damaged key state, 0 undamaged lost and 0 wrong signatures unless listed: "
                + "\(violations.count) violations"
        }
    }

    struct Credential {
        var id: [UInt8]
        var rpId: String
        var publicKey: P256.Signing.PublicKey
        var storeKey: UInt16 = 0
    }

    package static func run(
        geometry: FlashGeometry = .nrf52840,
        credentials count: Int = 20,
        trials: Int,
        seed: UInt64,
        damage: Damage,
        progress: (Double) -> Void = { _ in }
    ) -> Report {
        var report = Report()
        report.damage = damage
        var entropy = EntropySource(SeededGenerator(seed: seed))
        guard let storage = try? Storage(device: SimulatedFlash(geometry: geometry), entropy: &entropy),
            var key = try? Authenticator(
                configuration: AuthenticatorConfiguration(resetWindowEnabled: false),
                storage: storage,
                entropy: entropy,
                now: .zero
            )
        else {
            report.violations.append("the key could not be created")
            return report
        }
        // The key's life before the damage: registrations, some replaced (their old records wiped), assertions
        // (counter records written and wiped), a large-blob array.
        var credentials: [Credential] = []
        for i in 0..<count + count / 4 {
            let index = i < count ? i : i - count
            guard let made = register(&key, rp: "rp\(index).example.com", user: index) else {
                report.violations.append("registration \(i) failed")
                return report
            }
            if i < count { credentials.append(made) } else { credentials[index] = made }
        }
        for i in 0..<30 { _ = assert(&key, credentials[i % count]) }
        let body = CBORValue.array([.byteString([UInt8](repeating: 0x5A, count: 900))]).encoded()
        let array = body + LargeBlobArray.checksum(body)
        _ = CTAPPowerCutProof.respond(
            &key,
            [0x0C] + CBORValue.map([2: .byteString(array), 3: 0, 4: CBORValue(array.count)]).encoded()
        )
        guard let written = key.storage as? Storage, written.largeBlobArray == array else {
            report.violations.append("the large-blob array was not written")
            return report
        }
        report.credentials = credentials.count
        let image = written.store.device.image
        let counterBefore = written.signCounter
        for key in written.store.keys where key >= StorageKey.firstCredential {
            guard let bytes = try? written.store.get(key), let c = CredentialRecord.decode(bytes),
                let i = credentials.firstIndex(where: { $0.id == c.id })
            else { continue }
            credentials[i].storeKey = key
        }
        let extents = recordExtents(image, geometry: geometry)
        let used = image.indices.filter { image[$0] != 0xFF }
        let logBytes = (0..<geometry.pageCount).filter { page in
            StoreFormat.decodeSlotB(Array(image[page * geometry.pageSize..<(page + 1) * geometry.pageSize])) != nil
        }.flatMap { page in page * geometry.pageSize..<(page + 1) * geometry.pageSize }

        var generator = SeededGenerator(seed: seed &+ 17)
        for trial in 0..<trials {
            progress(Double(trial) / Double(max(trials, 1)))
            var damaged = image
            let at: Int
            switch damage {
            case .bit:
                at = logBytes[Int(generator.next() % UInt64(logBytes.count))]
                damaged[at] ^= 1 << UInt8(generator.next() % 8)
            case .byte:
                at = used[Int(generator.next() % UInt64(used.count))]
                damaged[at] ^= UInt8(truncatingIfNeeded: generator.next() % 255 + 1)
            }
            report.trials += 1
            let place = "trial \(trial) (seed \(seed), \(damage.rawValue) at \(at))"
            var mountEntropy = EntropySource(SeededGenerator(seed: 5))
            let mounted: Storage
            do {
                mounted = try Storage(
                    device: SimulatedFlash(geometry: geometry, image: damaged),
                    entropy: &mountEntropy
                )
            } catch {
                report.refusedStarts += 1
                if damage == .bit { report.violations.append("\(place): the key does not start: \(error)") }
                continue
            }
            let findings = mounted.store.recovery.damage
            if !findings.isEmpty { report.reported += 1 }
            if !findings.isEmpty && findings.allSatisfy({ $0.kind.isCorrected }) { report.corrected += 1 }
            guard
                var trialKey = try? Authenticator(
                    configuration: AuthenticatorConfiguration(resetWindowEnabled: false),
                    storage: mounted,
                    entropy: mountEntropy,
                    now: .zero
                )
            else {
                report.violations.append("\(place): the authenticator could not start")
                continue
            }
            if mounted.largeBlobArray != array
                && !(mounted.largeBlobArray == LargeBlobArray.initial && !mounted.damage.isEmpty)
            {
                report.violations.append("\(place): the large-blob array is neither the stored one nor the initial one")
            }
            for credential in credentials {
                let response = assert(&trialKey, credential)
                switch response {
                case .verified(let counter):
                    report.assertions += 1
                    if counter <= counterBefore {
                        report.violations.append("\(place): \(credential.rpId) signed with counter \(counter)")
                    }
                case .wrongSignature:
                    report.violations.append("\(place): \(credential.rpId): the signature does not verify")
                case .status(let status) where status == CTAPStatus.noCredentials.rawValue:
                    let own = extents[credential.storeKey, default: []].contains { $0.contains(at) }
                    if findings.isEmpty {
                        report.violations.append("\(place): \(credential.rpId) lost, nothing reported")
                    } else if !own || damage == .bit {
                        report.violations.append(
                            "\(place): \(credential.rpId) lost to damage outside its record: \(findings)"
                        )
                    } else {
                        report.lostToTheirDamage += 1
                    }
                case .status(let status):
                    report.violations.append("\(place): \(credential.rpId): getAssertion answered \(status)")
                }
            }
            if report.violations.count >= 20 { break }
        }
        return report
    }

    /// The bytes whose damage may cost each store key: the records that wrote it (header to commit word), and the
    /// page header of each page holding one.
    static func recordExtents(_ image: [UInt8], geometry: FlashGeometry) -> [UInt16: [Range<Int>]] {
        let format = StoreFormat(geometry: geometry)
        var extents: [UInt16: [Range<Int>]] = [:]
        for page in 0..<geometry.pageCount {
            let base = page * geometry.pageSize
            let bytes = Array(image[base..<base + geometry.pageSize])
            guard let slotB = StoreFormat.decodeSlotBVersioned(bytes) else { continue }
            for record in format.parseRecords(bytes, version: slotB.version).records where record.committed {
                for u in record.updates {
                    extents[u.key, default: []] += [
                        base + record.offset..<base + record.commitOffset + geometry.wordSize, base + 8..<base + 16,
                    ]
                }
            }
        }
        return extents
    }

    static func register(_ key: inout Authenticator, rp: String, user: Int) -> Credential? {
        let params = CTAPRequests.makeCredential(
            rpId: rp,
            rpName: nil,
            user: CTAPRequests.user(
                id: [UInt8](repeating: UInt8(user), count: 32),
                name: "user \(user)",
                displayName: nil
            ),
            rk: true,
            clientDataHash: Array(repeating: 1, count: 32)
        )
        let response = CTAPPowerCutProof.respond(&key, CTAPRequests.message(.makeCredential, params))
        guard response.first == 0, let map = try? CBORDecoder.decode(Array(response.dropFirst())),
            let authData = map[2]?.bytesValue, authData.count > 55
        else { return nil }
        let idLength = Int(authData[53]) << 8 | Int(authData[54])
        guard authData.count > 55 + idLength,
            let cose = try? CBORDecoder.decode(Array(authData[(55 + idLength)...])),
            let x = cose[-2]?.bytesValue, let y = cose[-3]?.bytesValue,
            let publicKey = try? P256.Signing.PublicKey(rawRepresentation: x + y)
        else { return nil }
        return Credential(id: Array(authData[55..<55 + idLength]), rpId: rp, publicKey: publicKey)
    }

    enum Assertion {
        case verified(counter: UInt32)
        case wrongSignature
        case status(UInt8)
    }

    static func assert(_ key: inout Authenticator, _ credential: Credential) -> Assertion {
        let clientDataHash = [UInt8](repeating: 2, count: 32)
        let params = CTAPRequests.getAssertion(
            rpId: credential.rpId,
            allowList: [credential.id],
            up: false,
            clientDataHash: clientDataHash
        )
        let response = CTAPPowerCutProof.respond(&key, CTAPRequests.message(.getAssertion, params))
        guard let status = response.first else { return .status(0xFF) }
        guard status == 0, let map = try? CBORDecoder.decode(Array(response.dropFirst())),
            let authData = map[2]?.bytesValue, let signature = map[3]?.bytesValue, authData.count >= 37
        else { return .status(status == 0 ? 0xFF : status) }
        guard let ecdsa = try? P256.Signing.ECDSASignature(derRepresentation: signature),
            credential.publicKey.isValidSignature(ecdsa, for: authData + clientDataHash)
        else { return .wrongSignature }
        return .verified(counter: authData[33..<37].reduce(0) { $0 << 8 | UInt32($1) })
    }
}
