import Attestation
import CTAPCBOR
import Crypto
import Foundation
import Secp256k1
import Testing
import _CryptoExtras

@testable import FIDOClient
@testable import HIDAPIDevice

/// A report channel that answers from a script: whatever the client sends is recorded, and `replies` come back in
/// order.
final class ScriptedChannel: ReportChannel {
    var sent: [[UInt8]] = []
    var replies: [[UInt8]]
    let name = "scripted"

    init(replies: [[UInt8]] = []) { self.replies = replies }

    func send(_ report: [UInt8]) throws(ClientError) { sent.append(report) }

    func receive(timeoutMs: Int) throws(ClientError) -> [UInt8]? {
        replies.isEmpty ? nil : replies.removeFirst()
    }
}

@Suite struct CTAPHIDFramingTests {
    @Test(arguments: [0, 1, 57, 58, 116, 117, 1024, CTAPHIDClient.maxPayload])
    func reportsCarryThePayloadInSequence(size: Int) throws {
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let reports = CTAPHIDClient.reports(channel: 0x0102_0304, command: HIDCommand.ping, payload: payload)
        let continuations = size <= 57 ? 0 : (size - 57 + 58) / 59
        #expect(reports.count == 1 + continuations)
        #expect(reports.allSatisfy { $0.count == 64 && Array($0[0..<4]) == [1, 2, 3, 4] })
        #expect(reports[0][4] == 0x81 && Int(reports[0][5]) << 8 | Int(reports[0][6]) == size)
        for (index, report) in reports.dropFirst().enumerated() { #expect(report[4] == UInt8(index)) }
        // Reassembled by the client's own receive path, the payload is the same.
        let channel = ScriptedChannel(replies: reports)
        let client = CTAPHIDClient(channel: channel)
        let message = try client.receive(on: 0x0102_0304, timeoutMs: 100)
        #expect(message.command == HIDCommand.ping && message.payload == payload)
    }

    @Test func keepalivesAndOtherChannelsAreSkipped() throws {
        let cid: UInt32 = 0x0A0B_0C0D
        let other = CTAPHIDClient.reports(channel: 0x1111_1111, command: HIDCommand.cbor, payload: [0x00])
        let keepalive = CTAPHIDClient.reports(channel: cid, command: HIDCommand.keepalive, payload: [2])
        let answer = CTAPHIDClient.reports(channel: cid, command: HIDCommand.cbor, payload: [0x00, 0xA0])
        let channel = ScriptedChannel(replies: other + keepalive + keepalive + answer)
        let client = CTAPHIDClient(channel: channel)
        var statuses: [UInt8] = []
        let message = try client.transact(command: HIDCommand.cbor, payload: [4], on: cid, timeoutMs: 100) {
            statuses.append($0)
        }
        #expect(message.payload == [0x00, 0xA0])
        #expect(statuses == [2, 2] && client.keepalives.count == 2)
        #expect(channel.sent == CTAPHIDClient.reports(channel: cid, command: HIDCommand.cbor, payload: [4]))
    }

    /// Found by the client fuzz target: a 7-byte KEEPALIVE report announcing a status byte it does not carry
    /// trapped on the missing byte. It is now a keepalive of status 0, and the stream then ends in a timeout.
    @Test func aShortKeepaliveReportIsNotATrap() {
        let short: [UInt8] = [0x01, 0x02, 0x03, 0x04, 0xBB, 0x00, 0x60]
        let client = CTAPHIDClient(channel: ScriptedChannel(replies: [short]))
        #expect(throws: ClientError.self) { try client.receive(on: 0x0102_0304, timeoutMs: 100) }
        #expect(client.keepalives.map(\.status) == [0])
    }

    @Test func silenceAndBadSequencesAreErrors() {
        #expect(throws: ClientError.self) {
            try CTAPHIDClient(channel: ScriptedChannel()).receive(on: 1, timeoutMs: 10)
        }
        var reports = CTAPHIDClient.reports(
            channel: 1,
            command: HIDCommand.ping,
            payload: [UInt8](repeating: 1, count: 100)
        )
        reports[1][4] = 5
        #expect(throws: ClientError.self) {
            try CTAPHIDClient(channel: ScriptedChannel(replies: reports)).receive(on: 1, timeoutMs: 10)
        }
    }

    @Test func initAllocatesTheAnsweredChannel() throws {
        // The nonce is random: answer after seeing the request.
        final class Answering: ReportChannel {
            var name: String { "answering" }
            var pending: [[UInt8]] = []
            func send(_ report: [UInt8]) throws(ClientError) {
                let nonce = Array(report[7..<15])
                pending = CTAPHIDClient.reports(
                    channel: 0xFFFF_FFFF,
                    command: HIDCommand.initialize,
                    payload: nonce + [0, 0, 0, 9, 2, 1, 2, 3, 0x05]
                )
            }
            func receive(timeoutMs: Int) throws(ClientError) -> [UInt8]? {
                pending.isEmpty ? nil : pending.removeFirst()
            }
        }
        let answering = CTAPHIDClient(channel: Answering())
        let info = try answering.initialize(timeoutMs: 100)
        #expect(answering.cid == 9 && info.protocolVersion == 2 && info.wink && info.cbor && !info.noMessage)
        #expect(info.deviceVersion == (1, 2, 3))
    }

    @Test func aKeyWhoseSerialIsKnownIsFoundOnlyByIt() {
        func device(
            _ path: String,
            _ serial: String,
            usagePage: UInt16 = HIDDeviceInfo.fidoUsagePage,
            product: UInt16 = 0xF1D0
        )
            -> HIDDeviceInfo
        {
            HIDDeviceInfo(
                path: path,
                vendorID: 0x1209,
                productID: product,
                usagePage: usagePage,
                usage: 1,
                product: "",
                manufacturer: "",
                serial: serial
            )
        }
        let other = device("/dev/hidraw1", "B")
        let mouse = device("/dev/hidraw0", "M", usagePage: 1, product: 0x0001)
        let ours = device("/dev/hidraw3", "A")
        // Before the first open: the path given, the first FIDO device, the first with the IDs.
        #expect(
            DeviceAddress.hidPath("/dev/hidraw1").hidDevicePath(among: [mouse, other, ours], knownSerial: nil)
                == "/dev/hidraw1"
        )
        #expect(DeviceAddress.hidAuto.hidDevicePath(among: [mouse, other, ours], knownSerial: nil) == "/dev/hidraw1")
        #expect(
            DeviceAddress.hidID(vendor: 0x1209, product: 0x0001).hidDevicePath(among: [other, mouse], knownSerial: nil)
                == "/dev/hidraw0"
        )
        #expect(DeviceAddress.hidAuto.hidDevicePath(among: [mouse], knownSerial: nil) == nil)
        #expect(DeviceAddress.udp(host: "h", port: 1).hidDevicePath(among: [other], knownSerial: nil) == nil)
        // Key A was opened at /dev/hidraw1 and unplugged; another key B now has that node. A is not taken for B.
        for address in [DeviceAddress.hidPath("/dev/hidraw1"), .hidAuto, .hidID(vendor: 0x1209, product: 0xF1D0)] {
            #expect(address.hidDevicePath(among: [mouse, other], knownSerial: "A") == nil, "\(address)")
            #expect(
                address.hidDevicePath(among: [mouse, other, ours], knownSerial: "A") == "/dev/hidraw3",
                "\(address)"
            )
        }
        // A key without a serial number is found again by its address.
        #expect(DeviceAddress.hidPath("/dev/hidraw1").hidDevicePath(among: [other], knownSerial: "") == "/dev/hidraw1")
    }

    @Test func deviceAddressesParseOrSayWhatIsExpected() throws {
        #expect(try DeviceAddress(parsing: "udp:127.0.0.1:8111") == .udp(host: "127.0.0.1", port: 8111))
        let solo = try DeviceAddress(parsing: "udp:127.0.0.1:8111?reply-port=7112")
        #expect(solo == .udp(host: "127.0.0.1", port: 8111, replyPort: 7112))
        #expect(solo.description == "udp:127.0.0.1:8111?reply-port=7112")
        for bad in ["udp:h:1?reply-port=0", "udp:h:1?reply-port=", "udp:h:1?port=2", "udp:h:1?reply-port=70000"] {
            #expect(throws: HIDDeviceError.self, "\(bad)") { try DeviceAddress(parsing: bad) }
        }
        #expect(try DeviceAddress(parsing: "hid:/dev/hidraw3") == .hidPath("/dev/hidraw3"))
        #expect(try DeviceAddress(parsing: "hid:auto") == .hidAuto)
        #expect(try DeviceAddress(parsing: "hid:1209:F1D0") == .hidID(vendor: 0x1209, product: 0xF1D0))
        #expect(try DeviceAddress(parsing: "hid:1209:F1D0").description == "hid:1209:f1d0")
        for bad in ["", "udp:host", "udp:host:0", "udp::80", "udp:h:99999", "hid:", "usb:1"] {
            #expect(throws: HIDDeviceError.self, "\(bad)") { try DeviceAddress(parsing: bad) }
        }
    }
}

@Suite struct AuthenticatorDataTests {
    func coseKey(_ key: P256.Signing.PublicKey) -> CBORValue {
        let raw = Array(key.rawRepresentation)
        return COSEPublicKey.p256(x: Array(raw[0..<32]), y: Array(raw[32..<64]), algorithm: -7)
    }

    @Test func attestedDataAndExtensionsAreRead() throws {
        let key = P256.Signing.PrivateKey()
        let rpIdHash = Array(SHA256.hash(data: Array("example.com".utf8)))
        let credentialId = [UInt8](repeating: 0xAB, count: 40)
        let aaguid = [UInt8](repeating: 0x11, count: 16)
        var bytes = rpIdHash + [0xC5, 0, 0, 1, 2] + aaguid + [0, 40] + credentialId
        bytes += CBOREncoder.encode(coseKey(key.publicKey))
        bytes += CBOREncoder.encode(["credProtect": 2])
        let parsed = try ParsedAuthenticatorData(bytes)
        #expect(parsed.rpIdHash == rpIdHash && parsed.signCount == 258 && parsed.userPresent && parsed.userVerified)
        #expect(parsed.aaguid == aaguid && parsed.credentialId == credentialId)
        #expect(parsed.extensions?["credProtect"] == 2)
        let cose = try COSEPublicKey(try #require(parsed.credentialPublicKey))
        // OpenSSL reads the SubjectPublicKeyInfo built from the COSE key and verifies swift-crypto's signature.
        let message = Array("signed".utf8)
        let signature = Array(try key.signature(for: message).derRepresentation)
        #expect(try OpenSSLVerifier.verify(spki: cose.spki, message: message, signature: signature))
        #expect(try !OpenSSLVerifier.verify(spki: cose.spki, message: message + [0], signature: signature))
        // Trailing or missing bytes are refused.
        #expect(throws: ClientError.self) { try ParsedAuthenticatorData(bytes + [0]) }
        #expect(throws: ClientError.self) { try ParsedAuthenticatorData(Array(bytes.dropLast(3))) }
        #expect(throws: ClientError.self) { try ParsedAuthenticatorData(Array(bytes.prefix(36))) }
    }

    @Test func ed25519KeysVerifyThroughOpenSSL() throws {
        let key = Curve25519.Signing.PrivateKey()
        let cose = try COSEPublicKey(
            .map([1: 1, 3: -8, -1: 6, -2: .byteString(Array(key.publicKey.rawRepresentation))])
        )
        let message = Array("ed25519".utf8)
        let signature = Array(try key.signature(for: message))
        #expect(try OpenSSLVerifier.verify(spki: cose.spki, message: message, signature: signature))
        #expect(try !OpenSSLVerifier.verify(spki: cose.spki, message: message, signature: signature.reversed()))
        #expect(throws: ClientError.self) {
            try OpenSSLVerifier.verify(spki: [0x30, 0x00], message: message, signature: signature)
        }
    }

    /// Each key type and curve the COSE reader takes: its SubjectPublicKeyInfo is the one OpenSSL writes for the same
    /// key (and, where swift-crypto makes the key, BoringSSL's too).
    @Test func subjectPublicKeyInfosAreOpenSSLsEncoding() throws {
        func ec2(_ alg: Int, _ crv: Int, x963: Data) -> CBORValue {
            let point = Array(x963.dropFirst())
            let size = point.count / 2
            return .map([
                1: 2, 3: CBORValue(alg), -1: CBORValue(crv), -2: .byteString(Array(point.prefix(size))),
                -3: .byteString(Array(point.suffix(size))),
            ])
        }
        let p256 = P256.Signing.PrivateKey().publicKey
        let p384 = P384.Signing.PrivateKey().publicKey
        let p521 = P521.Signing.PrivateKey().publicKey
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048).publicKey
        let primitives = try rsa.getKeyPrimitives()
        let k1 = try #require(Secp256k1ECDSA.publicPoint(scalar: Array(repeating: 0x5A, count: 32)))
        let ed25519 = Curve25519.Signing.PrivateKey().publicKey
        let keys: [(String, CBORValue, Data?)] = [
            ("ES256", ec2(-7, 1, x963: p256.x963Representation), p256.derRepresentation),
            ("ESP256", ec2(-9, 1, x963: p256.x963Representation), p256.derRepresentation),
            ("ES384", ec2(-35, 2, x963: p384.x963Representation), p384.derRepresentation),
            ("ES512", ec2(-36, 3, x963: p521.x963Representation), p521.derRepresentation),
            ("ES256K", ec2(-47, 8, x963: Data(k1)), nil),
            ("EdDSA", .map([1: 1, 3: -8, -1: 6, -2: .byteString(Array(ed25519.rawRepresentation))]), nil),
            (
                "RS256",
                .map([
                    1: 3, 3: -257, -1: .byteString(Array(primitives.modulus)),
                    -2: .byteString(Array(primitives.publicExponent)),
                ]),
                rsa.derRepresentation
            ),
        ]
        for (name, value, boringSSL) in keys {
            let key = try COSEPublicKey(value)
            #expect(OpenSSLVerifier.openSSLEncoding(of: key.spki) == key.spki, "\(name)")
            if let boringSSL { #expect(key.spki == Array(boringSSL), "\(name)") }
        }
        #expect(OpenSSLVerifier.openSSLEncoding(of: Array(p256.derRepresentation) + [0]) == nil, "trailing bytes")
    }

    /// An EC2 key whose algorithm is not defined on its curve is no key (ES256 is P-256; secp256k1 is ES256K's).
    @Test(arguments: [
        (-7, 8), (-7, 2), (-35, 1), (-36, 2), (-47, 1), (-9, 3), (-51, 1), (-52, 8), (-25, 8), (-8, 1), (-257, 1),
    ])
    func ec2KeysWhoseAlgorithmIsNotTheirCurvesAreRefused(alg: Int, crv: Int) {
        let size = [1: 32, 2: 48, 3: 66, 8: 32][crv]!
        let key: CBORValue = .map([
            1: 2, 3: CBORValue(alg), -1: CBORValue(crv), -2: .byteString(Array(repeating: 1, count: size)),
            -3: .byteString(Array(repeating: 2, count: size)),
        ])
        #expect(throws: ClientError.self) { try COSEPublicKey(key) }
    }

    @Test func cborItemLengthsMatchTheEncoder() throws {
        let values: [CBORValue] = [
            0, 23, 24, 65536, -1, "text", .byteString([1, 2, 3]), [1, [2, [3]]], ["a": ["b": true]], .null,
        ]
        for value in values {
            let bytes = CBOREncoder.encode(value)
            #expect(try CBORItem.length(bytes + [0xFF, 0xFF], at: 0) == bytes.count, "\(value)")
            if bytes.count > 1 {
                #expect(throws: ClientError.self) { try CBORItem.length(Array(bytes.dropLast()), at: 0) }
            }
        }
        #expect(throws: ClientError.self) { try CBORItem.length([0xC0, 0x00], at: 0) }  // a tag
        #expect(throws: ClientError.self) { try CBORItem.length([0x9F], at: 0) }  // indefinite length
        // Nested too deep.
        #expect(throws: ClientError.self) { try CBORItem.length([0x81] + [UInt8](repeating: 0x81, count: 40), at: 0) }
    }
}

@Suite struct CertificateTests {
    @Test func aBatchCertificateMeetsThePackedRules() throws {
        let aaguid = [UInt8](repeating: 0x42, count: 16)
        let batch = try BatchAttestation.provision(aaguid: aaguid, notBefore: Date())
        let leaf = try X509Certificate(der: batch.certificate)
        let root = try X509Certificate(der: batch.rootCertificate)
        #expect(leaf.version == 3 && leaf.organizationalUnit == "Authenticator Attestation" && leaf.country == "US")
        #expect(!leaf.isCA && root.isCA)
        #expect(leaf.aaguidExtension?.aaguid == aaguid && leaf.aaguidExtension?.critical == false)
        try AttestationVerifier.checkPackedCertificate(leaf, aaguid: aaguid)
        #expect(throws: ClientError.self) {
            try AttestationVerifier.checkPackedCertificate(leaf, aaguid: [UInt8](repeating: 0, count: 16))
        }
        #expect(throws: ClientError.self) { try AttestationVerifier.checkPackedCertificate(root, aaguid: aaguid) }
        #expect(leaf.isSigned(by: root) && !root.isSigned(by: leaf))
        // The leaf's key, read by OpenSSL, verifies a signature the batch key makes.
        let key = try P256.Signing.PrivateKey(rawRepresentation: batch.privateKey)
        let signature = Array(try key.signature(for: Array("x".utf8)).derRepresentation)
        #expect(try OpenSSLVerifier.verify(spki: leaf.publicKeySPKI(), message: Array("x".utf8), signature: signature))
        #expect(throws: ClientError.self) { try X509Certificate(der: [0x30, 0x03, 0x02, 0x01, 0x01]) }
    }
}

@Suite struct PinProtocolTests {
    /// The authenticator's half done here with swift-crypto, independently of PlatformPinProtocol's code path.
    @Test(arguments: [1, 2]) func sharedSecretsAgreeWithTheAuthenticatorsHalf(version: Int) throws {
        let authenticator = P256.KeyAgreement.PrivateKey()
        let raw = Array(authenticator.publicKey.rawRepresentation)
        let platform = try PlatformPinProtocol(
            version: version,
            authenticatorKey: COSEPublicKey.p256(x: Array(raw[0..<32]), y: Array(raw[32..<64]), algorithm: -25)
        )
        let peer = try COSEPublicKey(platform.platformKey)
        #expect(peer.algorithm == -25)
        let z = try authenticator.sharedSecretFromKeyAgreement(
            with: P256.KeyAgreement.PublicKey(rawRepresentation: peer.x + peer.y!)
        ).withUnsafeBytes { Array($0) }
        let expected: [UInt8]
        if version == 1 {
            expected = Array(SHA256.hash(data: z))
        } else {
            func derive(_ info: String) -> [UInt8] {
                HKDF<SHA256>.deriveKey(
                    inputKeyMaterial: SymmetricKey(data: z),
                    salt: [UInt8](repeating: 0, count: 32),
                    info: Array(info.utf8),
                    outputByteCount: 32
                ).withUnsafeBytes { Array($0) }
            }
            expected = derive("CTAP2 HMAC key") + derive("CTAP2 AES key")
        }
        #expect(platform.sharedSecret == expected)
        let plaintext = [UInt8](repeating: 0x5A, count: 64)
        let encrypted = try platform.encrypt(plaintext)
        #expect(encrypted.count == (version == 1 ? 64 : 80))
        #expect(try platform.decrypt(encrypted) == plaintext)
        #expect(throws: ClientError.self) { try platform.encrypt([1, 2, 3]) }
        let mac = platform.authenticate([1, 2, 3])
        let hmacKey = version == 1 ? expected : Array(expected[0..<32])
        let full = Array(HMAC<SHA256>.authenticationCode(for: [1, 2, 3], using: SymmetricKey(data: hmacKey)))
        #expect(mac == (version == 1 ? Array(full.prefix(16)) : full))
    }
}

@Suite struct PacerTests {
    /// 32 reports go at once; each one after them waits about a millisecond (a USB full-speed endpoint's pace).
    @Test func thePacerLetsABurstThroughThenOnePerMillisecond() {
        var pacer = ReportPacer(burst: 32, intervalNs: 1_000_000)
        let start = ReportPacer.nowNs()
        for _ in 0..<42 { pacer.wait() }
        #expect(ReportPacer.nowNs() - start >= 9_000_000)
    }
}

@Suite struct HIDDiscoveryTests {
    /// The report descriptor CTAP 2.1 §11.2.8.1 gives for a FIDO device: usage page 0xF1D0, usage 0x01, then the
    /// application collection.
    static let fido: [UInt8] = [
        0x06, 0xD0, 0xF1, 0x09, 0x01, 0xA1, 0x01, 0x09, 0x20, 0x15, 0x00, 0x26, 0xFF, 0x00, 0x75, 0x08, 0x95, 0x40,
        0x81, 0x02, 0x09, 0x21, 0x15, 0x00, 0x26, 0xFF, 0x00, 0x75, 0x08, 0x95, 0x40, 0x91, 0x02, 0xC0,
    ]

    @Test func theTopLevelUsageOfAReportDescriptor() {
        #expect(ReportDescriptor.topLevelUsage(Self.fido).map { [$0.page, $0.usage] } == [0xF1D0, 0x01])
        // A keyboard: Generic Desktop (1), Keyboard (6).
        #expect(
            ReportDescriptor.topLevelUsage([0x05, 0x01, 0x09, 0x06, 0xA1, 0x01, 0xC0]).map { [$0.page, $0.usage] } == [
                1, 6,
            ]
        )
        // An extended (4-byte) usage carries its page.
        #expect(
            ReportDescriptor.topLevelUsage([0x0B, 0x01, 0x00, 0xD0, 0xF1, 0xA1, 0x01]).map { [$0.page, $0.usage] } == [
                0xF1D0, 1,
            ]
        )
        // Truncated, no collection, or a collection before any usage: no answer rather than a guess.
        #expect(ReportDescriptor.topLevelUsage([0x06, 0xD0]) == nil)
        #expect(ReportDescriptor.topLevelUsage([0x06, 0xD0, 0xF1, 0x09, 0x01]) == nil)
        #expect(ReportDescriptor.topLevelUsage([0xA1, 0x01]) == nil)
        #expect(ReportDescriptor.topLevelUsage([0xFE, 0x10]) == nil)
    }

    /// hidapi-libusb names a device by its USB interface (1-1:1.0); usbhid's node under it has the descriptor.
    @Test func theLibusbBackendsUsagePageComesFromSysfs() throws {
        let root = "/tmp/fidosim-sysfs-\(getpid())"
        let node = "\(root)/1-1:1.0/0003:1209:F1D0.0001"
        #expect(system("mkdir -p '\(node)' '\(root)/2-1:1.0'") == 0)
        defer { _ = system("rm -rf '\(root)'") }
        let fd = open("\(node)/report_descriptor", O_WRONLY | O_CREAT, 0o644)
        #expect(Self.fido.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == Self.fido.count)
        close(fd)
        #expect(HIDDevice.usageFromSysfs(interface: "1-1:1.0", root: root).map { [$0.0, $0.1] } == [0xF1D0, 1])
        // An interface without a bound driver, or a name that is not an interface's, has none.
        #expect(HIDDevice.usageFromSysfs(interface: "2-1:1.0", root: root) == nil)
        #expect(HIDDevice.usageFromSysfs(interface: "../1-1:1.0", root: root) == nil)
        #expect(HIDDevice.usageFromSysfs(interface: "", root: root) == nil)
    }
}

/// A scripted hidapi: each read returns the next entry (an empty one is a zero-length read that returns at once).
nonisolated(unsafe) private var scriptedReads: [[UInt8]] = []

@Suite(.serialized) struct ZeroLengthReportTests {
    static func api() -> HIDAPI {
        HIDAPI(
            initialize: { 0 },
            enumerate: { _, _ in nil },
            freeEnumeration: { _ in },
            openPath: { _ in OpaquePointer(bitPattern: 1) },
            write: { _, _, count in Int32(count) },
            readTimeout: { _, buffer, _, timeout in
                guard !scriptedReads.isEmpty else {
                    usleep(UInt32(max(0, timeout)) * 1000)
                    return 0
                }
                let next = scriptedReads.removeFirst()
                for (i, byte) in next.enumerated() { buffer![i] = byte }
                return Int32(next.count)
            },
            close: { _ in }
        )
    }

    /// The Linux HID gadget on dummy_hcd follows each report with a zero-length packet, which hidapi's libusb
    /// backend hands over as a read of 0 bytes: that is not the end of the answer.
    @Test func zeroLengthReportsAreSkippedNotTakenForATimeout() throws {
        let report = [UInt8](repeating: 0xAB, count: 64)
        scriptedReads = [[], report, [], [], report]
        let channel = try HIDDevice(path: "scripted", api: Self.api())
        #expect(try channel.receive(timeoutMs: 1000) == report)
        #expect(try channel.receive(timeoutMs: 1000) == report)
        #expect(channel.zeroLengthReads == 3)
        // With nothing left, the read waits out its time and answers nil.
        let start = ReportPacer.nowNs()
        #expect(try channel.receive(timeoutMs: 30) == nil)
        #expect(ReportPacer.nowNs() - start >= 25_000_000)
    }
}
