import CTAPCBOR
import CTAPCore
package import FlashStore

/// Power cuts at every flash write of a CTAP workload, checked at the level a relying party sees.
///
/// The workload (deterministic from a seed) registers discoverable credentials until the store is full,
/// replaces some (same rp and user), signs assertions, writes large-blob arrays of up to 4 KiB, and resets the
/// key every 700 operations. Before each operation
/// the flash is snapshotted; the operation is run uncut to count its flash mutations, then once per mutation
/// and tear mode with the power cut there. After each cut the flash is remounted (optionally with a second cut
/// during the remount) and checked:
/// - the discoverable credentials equal those acknowledged before the operation or those after it, and so
///   does the large-blob array (never a mix, never a torn array);
/// - the stored signature counter is at least the highest counter acknowledged in a response (so the next
///   signature carries a larger one: a counter value is never repeated and never goes down);
/// - the flash rules were never broken (a breach traps);
/// - periodically, no private key of a credential that is not stored is left anywhere in the raw image.
package enum CTAPPowerCutProof {
    package struct Report: Sendable, CustomStringConvertible {
        package var operations = 0
        package var cutPoints = 0
        package var scenarios = 0
        package var nestedScenarios = 0
        package var imageScans = 0
        /// Registrations refused with CTAP2_ERR_KEY_STORE_FULL (the store was full).
        package var storeFullRefusals = 0
        /// Assertions signed.
        package var assertions = 0
        /// Large-blob arrays written.
        package var largeBlobWrites = 0
        /// Resets done.
        package var resets = 0
        /// Discoverable credentials replaced (the same RP and user registered again).
        package var replacements = 0
        package var violations: [String] = []

        package var description: String {
            "\(operations) CTAP operations (\(assertions) assertions, \(largeBlobWrites) large-blob arrays, "
                + "\(replacements) replacements, \(resets) resets, \(storeFullRefusals) refused as store full), "
                + "\(cutPoints) cut points, \(scenarios) scenarios "
                + "(\(nestedScenarios) with a cut during the remount), \(imageScans) image scans, "
                + "\(violations.count) violations"
        }
    }

    typealias Storage = FlashStorage<SimulatedFlash>

    struct State: Equatable {
        /// Ids of the stored discoverable credentials (each id is unique and names its rp, user and key).
        var credentials: Set<[UInt8]>
        var counter: UInt32
        var largeBlobs: [UInt8]
    }

    static func state(of storage: Storage) -> State {
        State(
            credentials: Set(storage.residentCredentials.map(\.id)),
            counter: storage.signCounter,
            largeBlobs: storage.largeBlobArray
        )
    }

    static func storage(of authenticator: Authenticator) -> Storage? { authenticator.storage as? Storage }

    /// Runs the proof; `cutLimit` bounds the cut points, `nestedEvery` puts a second cut into every n-th
    /// remount (0: never), `scanEvery` scans the raw image every n-th scenario (0: never). Operations before
    /// `cutFrom` run without cuts (to replay one operation of a long workload: its state is the same), and of the
    /// others every `cutEvery`-th is cut (a bounded run that still reaches a full store and resets). The key is
    /// reset every `resetEvery` operations.
    package static func run(
        geometry: FlashGeometry,
        operations: Int,
        seed: UInt64,
        cutLimit: Int,
        nestedEvery: Int = 7,
        scanEvery: Int = 50,
        cutFrom: Int = 0,
        cutEvery: Int = 1,
        resetEvery: Int = 700,
        progress: (Double) -> Void = { _ in }
    ) -> Report {
        var report = Report()
        var generator = SeededGenerator(seed: seed)
        var entropy = EntropySource(SeededGenerator(seed: seed &+ 1))
        guard let initial = try? Storage(device: SimulatedFlash(geometry: geometry), entropy: &entropy),
            var key = try? Authenticator(
                configuration: AuthenticatorConfiguration(resetWindowEnabled: false),
                storage: initial,
                entropy: entropy,
                now: .zero
            )
        else {
            report.violations.append("the key could not be created")
            return report
        }
        var acknowledgedCounter: UInt32 = 0
        var everWritten: [[UInt8]: [UInt8]] = [:]  // credential id → private key
        var users: [[UInt8]] = []

        for index in 0..<operations {
            guard report.cutPoints < cutLimit, report.violations.count < 20 else { break }
            progress(Double(report.cutPoints) / Double(max(cutLimit, 1)))
            let request = nextRequest(&generator, users: &users, index: index, resetEvery: resetEvery)
            guard let beforeStorage = storage(of: key) else { break }
            let before = state(of: beforeStorage)
            // Uncut run: how many flash mutations, and the state after.
            var uncut = key
            let startCount = beforeStorage.store.device.mutationCount
            let response = respond(&uncut, request)
            guard let afterStorage = storage(of: uncut) else { break }
            let mutations = afterStorage.store.device.mutationCount - startCount
            let after = state(of: afterStorage)
            for c in afterStorage.residentCredentials { everWritten[c.id] = c.privateKey }
            report.operations += 1
            if response.first == 0x28 { report.storeFullRefusals += 1 }
            if request.name == "assert" && response.first == 0 { report.assertions += 1 }
            if request.name == "largeBlobs" && response == [0] { report.largeBlobWrites += 1 }
            if request.name == "reset" && response == [0] { report.resets += 1 }
            if request.name == "replace" && response.first == 0 { report.replacements += 1 }
            let cuts = index >= cutFrom && (index - cutFrom) % max(1, cutEvery) == 0 ? mutations : 0

            for cut in stride(from: 1, through: cuts, by: 1) {
                guard report.cutPoints < cutLimit else { break }
                report.cutPoints += 1
                for tear in TearMode.all(seed: seed &+ UInt64(index) &* 7919 &+ UInt64(cut)) {
                    report.scenarios += 1
                    var trial = key
                    guard var trialStorage = storage(of: trial) else { continue }
                    trialStorage.withDevice { $0.armPowerCut(atMutation: cut, tear: tear) }
                    trial.storage = trialStorage
                    _ = respond(&trial, request)
                    guard var device = storage(of: trial)?.store.device else { continue }
                    device.repower()
                    let nested = nestedEvery > 0 && report.scenarios % nestedEvery == 0
                    if nested {
                        // Cut the recovering mount too, at its first mutation, then mount again.
                        report.nestedScenarios += 1
                        device.armPowerCut(atMutation: 1, tear: .randomBits(seed: UInt64(report.scenarios)))
                        _ = try? FlashKVStore.mount(&device)
                        device.repower()
                    }
                    var mountEntropy = EntropySource(SeededGenerator(seed: 5))
                    let recovered: Storage
                    do {
                        recovered = try Storage(device: device, entropy: &mountEntropy)
                    } catch {
                        report.violations.append(
                            "seed \(seed) op \(index) (\(request.name)) cut \(cut) \(tear): remount failed: \(error)"
                        )
                        continue
                    }
                    let found = state(of: recovered)
                    if found.largeBlobs != before.largeBlobs && found.largeBlobs != after.largeBlobs {
                        report.violations.append(
                            "seed \(seed) op \(index) (\(request.name)) cut \(cut) \(tear): the large-blob array is "
                                + "neither the one before nor the one after (\(found.largeBlobs.count) bytes)"
                        )
                    }
                    if found.credentials != before.credentials && found.credentials != after.credentials {
                        report.violations.append(
                            "seed \(seed) op \(index) (\(request.name)) cut \(cut) \(tear): credentials are neither "
                                + "the state before nor after (\(found.credentials.count) found, "
                                + "\(before.credentials.count) before, \(after.credentials.count) after)"
                        )
                    }
                    if found.counter < acknowledgedCounter {
                        report.violations.append(
                            "seed \(seed) op \(index) (\(request.name)) cut \(cut) \(tear): counter \(found.counter) "
                                + "below the acknowledged \(acknowledgedCounter)"
                        )
                    }
                    if scanEvery > 0 && report.scenarios % scanEvery == 0 {
                        report.imageScans += 1
                        let live = Set(recovered.residentCredentials.map(\.id))
                        let dead = everWritten.filter { !live.contains($0.key) }.map(\.value)
                        if let leak = firstOccurrence(of: dead, in: recovered.store.device.image) {
                            report.violations.append(
                                "seed \(seed) op \(index) (\(request.name)) cut \(cut) \(tear): a deleted private key "
                                    + "is still in the image at offset \(leak)"
                            )
                        }
                    }
                }
            }
            // Continue from the uncut result; remember what was acknowledged.
            key = uncut
            if let counter = signatureCounter(in: response) {
                if counter <= acknowledgedCounter {
                    report.violations.append("seed \(seed) op \(index): counter \(counter) repeated or went down")
                }
                acknowledgedCounter = max(acknowledgedCounter, counter)
            }
        }
        return report
    }

    struct Request {
        var name: String
        var message: [UInt8]
    }

    static func nextRequest(
        _ g: inout SeededGenerator,
        users: inout [[UInt8]],
        index: Int,
        resetEvery: Int = 700
    ) -> Request {
        let roll = g.next() % 100
        // A reset every 700 operations by default: enough registrations in between to fill an nRF52840 store.
        if index % resetEvery == resetEvery - 1 {
            return Request(name: "reset", message: [0x07])
        }
        if roll < 45 || users.isEmpty {
            // A new user, or (sometimes) a replacement of an existing one.
            let replace = !users.isEmpty && roll % 5 == 0
            let user: [UInt8]
            if replace {
                user = users[Int(g.next() % UInt64(users.count))]
            } else {
                var id = Array(repeating: UInt8(0xA5), count: 64)
                for b in 0..<8 { id[b] = UInt8(truncatingIfNeeded: index >> (8 * b)) }
                user = id
                users.append(id)
            }
            let params = CTAPRequests.makeCredential(
                rpId: "rp\(g.next() % 5).example.com",
                rpName: nil,
                user: CTAPRequests.user(id: user, name: String(repeating: "u", count: 64), displayName: nil),
                rk: true,
                clientDataHash: Array(repeating: 1, count: 32)
            )
            return Request(
                name: replace ? "replace" : "register",
                message: CTAPRequests.message(.makeCredential, params)
            )
        }
        if roll >= 90 {
            // A whole large-blob array in one fragment: a CBOR array of one byte string and its checksum.
            let size = Int(g.next() % 4000)
            let body = CBORValue.array([.byteString([UInt8](repeating: UInt8(truncatingIfNeeded: index), count: size))])
                .encoded()
            let array = body + LargeBlobArray.checksum(body)
            let params: CBORValue = [2: .byteString(array), 3: 0, 4: CBORValue(array.count)]
            return Request(name: "largeBlobs", message: [0x0C] + params.encoded())
        }
        let params = CTAPRequests.getAssertion(
            rpId: "rp\(g.next() % 5).example.com",
            up: false,
            clientDataHash: Array(repeating: 2, count: 32)
        )
        return Request(name: "assert", message: CTAPRequests.message(.getAssertion, params))
    }

    static func respond(_ key: inout Authenticator, _ request: Request) -> [UInt8] { respond(&key, request.message) }

    /// The answer to a CTAP2 message, the user approving when the key asks.
    static func respond(_ key: inout Authenticator, _ message: [UInt8]) -> [UInt8] {
        var outcome = key.handleCBOR(message, now: .zero)
        if case .needsUserPresence = outcome { outcome = key.resume(.approved, now: .zero) }
        guard case .response(let bytes) = outcome else { return [] }
        return bytes
    }

    /// The signature counter in a successful makeCredential or getAssertion response.
    static func signatureCounter(in response: [UInt8]) -> UInt32? {
        guard response.first == 0, let map = try? CBORDecoder.decode(Array(response.dropFirst())) else { return nil }
        // Key 2 is authData in both responses (makeCredential: 1 fmt, 2 authData; getAssertion: 2 authData).
        guard let data = map[2]?.bytesValue, data.count >= 37 else { return nil }
        return data[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
    }

    static func firstOccurrence(of needles: [[UInt8]], in haystack: [UInt8]) -> Int? {
        guard !needles.isEmpty, haystack.count >= 32 else { return nil }
        var prefixes: [UInt64: [[UInt8]]] = [:]
        for n in needles where n.count >= 8 {
            let p = n.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            prefixes[p, default: []].append(n)
        }
        var window: UInt64 = 0
        for i in 0..<haystack.count {
            window = window << 8 | UInt64(haystack[i])
            guard i >= 7, let candidates = prefixes[window] else { continue }
            let start = i - 7
            for n in candidates
            where start + n.count <= haystack.count && Array(haystack[start..<(start + n.count)]) == n {
                return start
            }
        }
        return nil
    }
}
