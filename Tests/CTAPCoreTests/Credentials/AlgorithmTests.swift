import CTAPCBOR
import CTAPCoreTesting
import Crypto
import FlashStore
import Secp256k1
import Testing
import _CryptoExtras

@testable import CTAPCore

/// Every credential algorithm beside ES256: its COSE key exactly as the registry gives it, its signatures, its
/// credential id, its flash record and its PKCS#8 form. (python-fido2 and OpenSSL check the same from outside in
/// tools/interop/test_algorithms_interop.py.)
@Suite struct AlgorithmTests {
    func request(_ algorithms: [Int], rk: Bool = false) -> [CBORValue: CBORValue] {
        Request.makeCredential(rk: rk).setting(
            4,
            .array(algorithms.map { ["alg": CBORValue($0), "type": "public-key"] })
        )
    }

    /// A verifier for the COSE key of `algorithm`; throws unless the key has exactly the registry's members.
    func verifier(_ cose: CBORValue, _ algorithm: CredentialAlgorithm) throws -> ([UInt8], [UInt8]) -> Bool {
        guard let map = cose.mapValue, cose[3] == CBORValue(algorithm.rawValue) else {
            throw HarnessFailure("alg is not \(algorithm.rawValue): \(cose)")
        }
        func ec2(_ curve: Int, _ size: Int) throws -> [UInt8] {
            guard map.count == 5, cose[1] == 2, cose[-1] == CBORValue(curve),
                let x = cose[-2]?.bytesValue, let y = cose[-3]?.bytesValue, x.count == size, y.count == size
            else { throw HarnessFailure("not an EC2 key of curve \(curve): \(cose)") }
            return [0x04] + x + y
        }
        switch algorithm {
        case .es256, .esp256:
            let key = try P256.Signing.PublicKey(x963Representation: try ec2(1, 32))
            return { sig, data in
                (try? P256.Signing.ECDSASignature(derRepresentation: sig)).map { key.isValidSignature($0, for: data) }
                    ?? false
            }
        case .es384, .esp384:
            let key = try P384.Signing.PublicKey(x963Representation: try ec2(2, 48))
            return { sig, data in
                (try? P384.Signing.ECDSASignature(derRepresentation: sig)).map { key.isValidSignature($0, for: data) }
                    ?? false
            }
        case .es512, .esp512:
            let key = try P521.Signing.PublicKey(x963Representation: try ec2(3, 66))
            return { sig, data in
                (try? P521.Signing.ECDSASignature(derRepresentation: sig)).map { key.isValidSignature($0, for: data) }
                    ?? false
            }
        case .edDSA, .ed25519:
            guard map.count == 4, cose[1] == 1, cose[-1] == 6, let x = cose[-2]?.bytesValue, x.count == 32 else {
                throw HarnessFailure("not an OKP Ed25519 key: \(cose)")
            }
            let key = try Curve25519.Signing.PublicKey(rawRepresentation: x)
            return { sig, data in key.isValidSignature(sig, for: data) }
        case .mlDSA65:
            guard map.count == 3, cose[1] == 7, let pub = cose[-1]?.bytesValue, pub.count == 1952 else {
                throw HarnessFailure("not an AKP ML-DSA-65 key: \(cose)")
            }
            let key = try MLDSA65.PublicKey(rawRepresentation: pub)
            return { sig, data in sig.count == 3309 && key.isValidSignature(sig, for: data) }
        case .mlDSA87:
            guard map.count == 3, cose[1] == 7, let pub = cose[-1]?.bytesValue, pub.count == 2592 else {
                throw HarnessFailure("not an AKP ML-DSA-87 key: \(cose)")
            }
            let key = try MLDSA87.PublicKey(rawRepresentation: pub)
            return { sig, data in sig.count == 4627 && key.isValidSignature(sig, for: data) }
        case .es256K:
            let point = try ec2(8, 32)
            return { sig, data in Secp256k1ECDSA.verify(point: point, message: data, signature: sig) }
        case .rs256, .ps256:
            guard map.count == 4, cose[1] == 3, let n = cose[-1]?.bytesValue, let e = cose[-2]?.bytesValue,
                n.count == 256, n[0] != 0, e == [0x01, 0x00, 0x01]
            else { throw HarnessFailure("not a 2048-bit RSA key: \(cose)") }
            let key = try _RSA.Signing.PublicKey(n: n, e: e)
            let padding: _RSA.Signing.Padding = algorithm == .ps256 ? .PSS : .insecurePKCS1v1_5
            return { sig, data in
                sig.count == 256
                    && key.isValidSignature(
                        _RSA.Signing.RSASignature(rawRepresentation: sig),
                        for: data,
                        padding: padding
                    )
            }
        }
    }

    static let idLengths: [CredentialAlgorithm: Int] = [
        .es256: 63, .esp256: 63, .edDSA: 63, .ed25519: 63, .mlDSA65: 63, .mlDSA87: 63,
        .es384: 79, .esp384: 79, .es512: 97, .esp512: 97, .rs256: 31, .ps256: 31, .es256K: 63,
    ]

    @Test(arguments: CredentialAlgorithm.allCases, [true, false])
    func aCredentialAttestsAndSignsWithItsAlgorithm(algorithm: CredentialAlgorithm, resident: Bool) throws {
        var harness = try Harness()
        let registration = try harness.register(request([algorithm.rawValue], rk: resident))
        let verify = try verifier(registration.credential.coseKey, algorithm)
        #expect(registration.credentialId.count == Self.idLengths[algorithm])
        let statement = try #require(registration.response[3])
        #expect(statement["alg"] == CBORValue(algorithm.rawValue))
        let signature = try #require(statement["sig"]?.bytesValue)
        #expect(verify(signature, registration.authData.bytes + Request.clientDataHash))

        let allowList = resident ? nil : [registration.credentialId]
        let assertion = try harness.getAssertion(Request.getAssertion(allowList: allowList))
        #expect(assertion.credentialId == registration.credentialId)
        #expect(verify(assertion.signature, assertion.authData.bytes + Request.clientDataHash))
        #expect(!verify(assertion.signature, assertion.authData.bytes + [UInt8](repeating: 0, count: 32)))
    }

    @Test(arguments: [
        ([-9, -7], -9), ([-19, -8], -19), ([-36, -35, -7], -36), ([-52, -7], -52), ([-50, -49], -50),
        ([-47, -257, -51], -47), ([-65535, -37], -37),
    ])
    func theFirstSupportedAlgorithmWinsAndIsKept(offered: [Int], chosen: Int) throws {
        var harness = try Harness()
        let registration = try harness.register(request(offered, rk: true))
        #expect(registration.credential.coseKey[3] == CBORValue(chosen))
        #expect(harness.residentCredentials.first?.algorithm.rawValue == chosen)
    }

    @Test func eachAlgorithmHasItsOwnCredentialIdByteAndTheOldOnesStay() {
        let bytes = CredentialAlgorithm.allCases.map(\.idByte)
        #expect(Set(bytes).count == bytes.count)
        #expect(CredentialAlgorithm.es256.idByte == 1 && CredentialAlgorithm.edDSA.idByte == 2)
        for algorithm in CredentialAlgorithm.allCases {
            #expect(CredentialAlgorithm(idByte: algorithm.idByte) == algorithm)
            #expect(CredentialAlgorithm(name: algorithm.name) == algorithm)
        }
        #expect(CredentialAlgorithm(idByte: 0) == nil && CredentialAlgorithm(idByte: 14) == nil)
    }

    @Test func aProfileWithoutAnAlgorithmNeverChoosesIt() throws {
        var configuration = Harness.configuration
        configuration.profile = KeyProfile(name: "two", algorithms: [.es256, .edDSA])
        var harness = try Harness(configuration: configuration)
        let registration = try harness.register(request([-35, -49, -8]))
        #expect(registration.credential.coseKey[3] == -8)
        let info = try responseMap(harness.cbor(.getInfo))
        #expect(info[10]?.arrayValue?.compactMap { $0["alg"]?.intValue } == [-7, -8])
        #expect(info[8] == 63)
    }

    @Test func maxCredentialIdLengthIsTheLongestIdOfTheProfile() throws {
        var harness = try Harness()
        let info = try responseMap(harness.cbor(.getInfo))
        #expect(info[8] == 97)
    }

    @Test(arguments: CredentialAlgorithm.allCases)
    func aStoredCredentialSurvivesARemount(algorithm: CredentialAlgorithm) throws {
        var entropy = EntropySource(SeededGenerator(seed: 7))
        let storage = try FlashStorage(device: SimulatedFlash(geometry: .nrf52840), entropy: &entropy)
        var authenticator = try Authenticator(storage: storage, entropy: entropy, now: .zero)
        guard
            case .needsUserPresence = authenticator.handleCBOR(
                [0x01] + CBORValue.map(request([algorithm.rawValue], rk: true)).encoded(),
                now: .zero
            ),
            case .response(let made) = authenticator.resume(.approved, now: .zero)
        else { throw HarnessFailure("makeCredential did not complete") }
        let registration = try Registration(try CBORDecoder.decode(Array(made.dropFirst())))
        let verify = try verifier(registration.credential.coseKey, algorithm)
        guard let flash = authenticator.storage as? FlashStorage<SimulatedFlash> else {
            throw HarnessFailure("storage")
        }
        var fresh = EntropySource(SeededGenerator(seed: 8))
        let remounted = try FlashStorage(device: flash.store.device, entropy: &fresh)
        #expect(remounted.residentCredentials.first?.algorithm == algorithm)
        #expect(remounted.residentCredentials.first.map { algorithm.isRawKeyLength($0.privateKey.count) } == true)
        var again = try Authenticator(storage: remounted, entropy: fresh, now: .zero)
        let ga = [0x02] + CBORValue.map(Request.getAssertion(up: false)).encoded()
        guard case .response(let bytes) = again.handleCBOR(ga, now: .zero) else { throw HarnessFailure("no response") }
        let assertion = try Assertion(try CBORDecoder.decode(Array(bytes.dropFirst())))
        #expect(verify(assertion.signature, assertion.authData.bytes + Request.clientDataHash))
    }

    @Test(arguments: CredentialAlgorithm.allCases)
    func pkcs8RoundTripsToTheKeysFamily(algorithm: CredentialAlgorithm) throws {
        var harness = try Harness()
        _ = try harness.register(request([algorithm.rawValue], rk: true))
        let stored = try #require(harness.residentCredentials.first)
        let der = try PrivateKeyEncoding.encode(key: stored.privateKey, algorithm: algorithm)
        let decoded = try PrivateKeyEncoding.decode(pkcs8: der)
        #expect(decoded.key == stored.privateKey)
        // PKCS#8 names the key, not the COSE identifier: a fully specified one comes back as its polymorphic twin.
        let family: [CredentialAlgorithm: CredentialAlgorithm] = [
            .esp256: .es256, .esp384: .es384, .esp512: .es512, .ps256: .rs256,
        ]
        #expect(decoded.algorithm == family[algorithm] ?? (algorithm == .ed25519 ? .edDSA : algorithm))
    }

    @Test(arguments: [CredentialAlgorithm.rs256, .ps256])
    func aNonDiscoverableRSACredentialIsStoredAndGoesWithAReset(algorithm: CredentialAlgorithm) throws {
        var harness = try Harness()
        let registration = try harness.register(request([algorithm.rawValue], rk: false))
        let stored = try #require(harness.residentCredentials.first)
        #expect(!stored.discoverable && stored.id == registration.credentialId)
        // Not discoverable: an empty allow list finds nothing, the id does, and the answer names no user.
        #expect(status(of: harness.cbor(.getAssertion, Request.getAssertion(up: false))) == .noCredentials)
        let assertion = try harness.getAssertion(Request.getAssertion(allowList: [registration.credentialId]))
        #expect(assertion.response[4] == nil)
        _ = harness.approve(harness.cbor(.reset))
        #expect(harness.residentCredentials.isEmpty)
        let again = harness.cbor(.getAssertion, Request.getAssertion(allowList: [registration.credentialId], up: false))
        #expect(status(of: again) == .noCredentials)
    }

    @Test func aTruncatedOrForeignPKCS8KeyIsAClearError() throws {
        let p384 = Array(P384.Signing.PrivateKey().derRepresentation)
        #expect(throws: CTAPError.self) { try PrivateKeyEncoding.decode(pkcs8: Array(p384.dropLast(3))) }
        #expect(throws: CTAPError.self) { try PrivateKeyEncoding.decode(pkcs8: [0x30, 0x00]) }
    }
}
