import CTAPCBOR
package import Conformance
import ControlProtocol
package import FIDOClient
package import HIDAPIDevice
package import Profiles

/// `fidosim profile capture`: what a key shows, recorded without changing it (firmware-spec/profiles.md, "Captured
/// profiles"). The result is the `capture` member of a profile file (``CaptureRecord``): getInfo's bytes, CTAPHID
/// INIT's version and capabilities, the USB identity hidapi gives, the answers to a fixed set of harmless probes, and
/// timing.
///
/// Nothing here changes the key: no request that makes, stores or erases anything, none that needs a touch, no
/// PIN. Every probe is malformed, unknown, or about a relying party (`probe.invalid`) the key holds nothing for.
package struct KeyCapture {
    /// One probe: its request (a CTAP2 message or a U2F APDU), and whether its answer depends on nothing the key
    /// holds, so that a copy may answer it with the captured bytes (`replay`).
    package struct Probe: Sendable {
        package var name: String
        package var request: [UInt8]
        package var replay: Bool

        /// The probe with the key's answer, as the capture records it.
        func answered(_ response: [UInt8]) -> CaptureRecord.Probe {
            CaptureRecord.Probe(name: name, request: request, response: response, replay: replay)
        }
    }

    /// The CTAP2 probes, in order.
    package static var ctap2Probes: [Probe] {
        let hash = CBORValue.byteString(Array(repeating: 0x5A, count: 32))
        let nobody = CBORValue.textString("probe.invalid")
        func message(_ command: UInt8, _ parameters: CBORValue) -> [UInt8] {
            [command] + CBOREncoder.encode(parameters)
        }
        let longList = CBORValue.array(
            (0..<65).map { index in
                ["type": "public-key", "id": .byteString(Array(repeating: UInt8(index), count: 16))]
            }
        )
        return [
            Probe(name: "unknown command 0x3f", request: [0x3F], replay: true),
            Probe(name: "unknown command 0x7f", request: [0x7F], replay: true),
            Probe(name: "vendor command 0x40 without parameters", request: [0x40], replay: false),
            Probe(name: "getInfo with a parameter", request: [0x04, 0xA0], replay: true),
            Probe(name: "makeCredential: not CBOR", request: [0x01, 0xFF], replay: true),
            Probe(name: "makeCredential: an array, not a map", request: [0x01, 0x80], replay: true),
            Probe(name: "makeCredential: a truncated map", request: [0x01, 0xA1, 0x01], replay: true),
            Probe(name: "makeCredential: an empty map", request: [0x01, 0xA0], replay: true),
            Probe(name: "makeCredential: trailing bytes", request: [0x01, 0xA0, 0x00], replay: true),
            Probe(name: "getAssertion: an empty map", request: [0x02, 0xA0], replay: true),
            Probe(name: "clientPIN: an empty map", request: [0x06, 0xA0], replay: true),
            Probe(
                name: "clientPIN: an unknown subcommand",
                request: message(0x06, [0x01: 1, 0x02: 0x7F]),
                replay: false
            ),
            Probe(
                name: "clientPIN getPINRetries",
                request: message(0x06, [0x01: 1, 0x02: 1]),
                replay: false
            ),
            Probe(
                name: "clientPIN getPINRetries: an unknown protocol",
                request: message(0x06, [0x01: 99, 0x02: 1]),
                replay: false
            ),
            Probe(name: "getNextAssertion with nothing pending", request: [0x08], replay: false),
            Probe(
                name: "getAssertion: an unknown option",
                request: message(0x02, [0x01: nobody, 0x02: hash, 0x05: ["up": false, "zz": true]]),
                replay: false
            ),
            Probe(
                name: "getAssertion: an unknown relying party without up",
                request: message(0x02, [0x01: nobody, 0x02: hash, 0x05: ["up": false]]),
                replay: false
            ),
            Probe(
                name: "getAssertion: an allow list of 65",
                request: message(0x02, [0x01: nobody, 0x02: hash, 0x03: longList, 0x05: ["up": false]]),
                replay: false
            ),
            Probe(
                name: "getAssertion: an empty pinUvAuthParam without a protocol",
                request: message(0x02, [0x01: nobody, 0x02: hash, 0x06: .byteString([])]),
                replay: false
            ),
        ]
    }

    /// The U2F probes (raw messages, CTAPHID_MSG or short APDUs).
    package static var u2fProbes: [Probe] {
        let authenticate =
            [0x00, 0x02, 0x07, 0x00, 0x81] + [UInt8](repeating: 0x11, count: 32) + [UInt8](repeating: 0x22, count: 32)
            + [64] + [UInt8](repeating: 0x33, count: 64)
        return [
            Probe(name: "VERSION", request: [0x00, 0x03, 0x00, 0x00, 0x00], replay: true),
            Probe(name: "VERSION with data", request: [0x00, 0x03, 0x00, 0x00, 0x01, 0x00, 0x00], replay: true),
            Probe(name: "class 0x80", request: [0x80, 0x03, 0x00, 0x00, 0x00], replay: true),
            Probe(name: "unknown instruction 0x99", request: [0x00, 0x99, 0x00, 0x00, 0x00], replay: true),
            Probe(name: "REGISTER without data", request: [0x00, 0x01, 0x00, 0x00, 0x00], replay: true),
            Probe(name: "a three-byte message", request: [0x00, 0x03, 0x00], replay: true),
            Probe(name: "AUTHENTICATE check-only, a foreign key handle", request: Array(authenticate), replay: false),
        ]
    }

    let open: () throws -> KeyLink
    let hidDevice: HIDDeviceInfo?
    /// Who touches the key for the keepalive measurement; nil: no request that needs a touch is sent.
    let toucher: (any DeviceOperator)?
    /// With `--allow-destructive`: who touches and power-cycles the key, and how many discoverable credentials the
    /// capacity probe makes at most.
    let destructive: (deviceOperator: any DeviceOperator, capacityLimit: Int)?

    /// `open` opens the key (the runner's opener); `hidDevice` is what hidapi lists for it, when it is a HID device;
    /// with `toucher`, one authenticatorSelection (a FIDO_2_1 key) is touched to time the keepalives; with
    /// `destructive`, the key is reset and its PIN, token, credential management and capacity rules are recorded
    /// (`DestructiveCapture`).
    package init(
        open: @escaping () throws -> KeyLink,
        hidDevice: HIDDeviceInfo?,
        toucher: (any DeviceOperator)? = nil,
        destructive: (deviceOperator: any DeviceOperator, capacityLimit: Int)? = nil
    ) {
        self.open = open
        self.hidDevice = hidDevice
        self.toucher = toucher
        self.destructive = destructive
    }

    /// The capture.
    package func run() throws -> CaptureRecord {
        let link = try open()
        try link.initialize()
        let client = CTAP2Client(link: link)
        var capture = CaptureRecord()
        var speaksCTAP2 = true
        var speaksU2F = true
        if let hid = client.hid, let info = hid.info {
            capture.ctaphid = CaptureRecord.HIDIdentity(
                protocolVersion: info.protocolVersion,
                deviceVersion: [info.deviceVersion.major, info.deviceVersion.minor, info.deviceVersion.build],
                capabilities: info.capabilities
            )
            speaksCTAP2 = info.cbor
            speaksU2F = !info.noMessage
        }
        if let device = hidDevice {
            capture.usb = CaptureRecord.USBIdentity(
                vendorID: device.vendorID,
                productID: device.productID,
                manufacturer: device.manufacturer,
                product: device.product,
                serial: CaptureRecord.SerialShape(of: device.serial)
            )
        }
        // The versions getInfo lists: what needs FIDO_2_0 (the destructive capture) or FIDO_2_1 (selection) asks.
        var versions: [String] = []
        if speaksCTAP2 {
            let info = try client.sendRaw([0x04])
            if client.card != nil && !info.ok {
                speaksCTAP2 = false
            } else {
                versions = ((try? info.map())?[1]?.arrayValue ?? []).compactMap(\.textValue)
                (capture.getInfo, capture.getInfoPerRequest) = Self.stableInfo(info)
            }
        }
        if let card = client.card { speaksU2F = card.version == "U2F_V2" }
        if speaksCTAP2 {
            for probe in Self.ctap2Probes {
                let answer = try client.sendRaw(probe.request)
                capture.probes.append(probe.answered([answer.status] + answer.body))
            }
        }
        if speaksU2F {
            for probe in Self.u2fProbes {
                let (data, status) = try client.u2f(probe.request)
                capture.u2f.append(probe.answered(data + [UInt8(status >> 8), UInt8(status & 0xFF)]))
            }
        }
        capture.timing = try timing(client, getInfo: speaksCTAP2)
        if let toucher, client.hid != nil, versions.contains("FIDO_2_1") {
            capture.timing.keepaliveMs = try keepaliveCadence(client, toucher: toucher)
            capture.timing.keepaliveUnmeasured = capture.timing.keepaliveMs == nil
        }
        if let destructive, speaksCTAP2, versions.contains("FIDO_2_0") {
            let context = try ConformanceContext(
                open: open,
                deviceOperator: destructive.deviceOperator,
                allowDestructive: true,
                pin: nil
            )
            do {
                capture.destructive = try DestructiveCapture(ctx: context, capacityLimit: destructive.capacityLimit)
                    .run()
            } catch let failure as CheckFailure {
                // A request the capture needed (a PIN token, say) was refused: say which, and what came back.
                let answer = [failure.expected.map { "expected \($0)" }, failure.actual.map { "got \($0)" }]
                    .compactMap { $0 }.joined(separator: ", ")
                throw CaptureStopped(failure.message + (answer.isEmpty ? "" : " (\(answer))"))
            } catch let skip as CheckSkip {
                throw CaptureStopped(skip.reason)
            } catch let error as ClientError {
                // The key answered, but not as a request of the capture needs (not a transport failure).
                switch error {
                case .malformed, .hidError: throw CaptureStopped("\(error)")
                case .transport, .timeout: throw error
                }
            }
        }
        return capture
    }

    /// The median gap between keepalives while an authenticatorSelection waits for the touch `toucher` gives.
    func keepaliveCadence(_ client: CTAP2Client, toucher: any DeviceOperator) throws -> Double? {
        var times: [Double] = []
        client.onKeepalive = { _ in times.append(CTAPHIDClient.nowMs()) }
        defer { client.onKeepalive = nil }
        try toucher.touchNeeded("authenticatorSelection (to time the key's keepalives)")
        let answer = try client.sendRaw([0x0B])
        try? toucher.restore()
        guard answer.ok else { throw ClientError.malformed("authenticatorSelection answered \(answer.status)") }
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }.sorted()
        guard !gaps.isEmpty else { return nil }
        return (gaps[gaps.count / 2] * 10).rounded() / 10
    }

    /// getInfo's answer without the members that are new at each request (re-encoded canonically), and which of
    /// them it had. An answer that is not a CBOR map stays as it is.
    static func stableInfo(_ info: CTAPResponse) -> ([UInt8], [Int]) {
        guard info.ok, let value = try? CBORDecoder.decode(info.body, maxDepth: 8), case .map(var map) = value else {
            return ([info.status] + info.body, [])
        }
        let present = CaptureRecord.perRequestMembers.filter { map[CBORValue($0)] != nil }.sorted()
        for member in present { map[CBORValue(member)] = nil }
        return ([info.status] + CBOREncoder.encode(.map(map)), present)
    }

    /// The median of 9 INIT and of 9 getInfo round trips, in milliseconds (one decimal).
    func timing(_ client: CTAP2Client, getInfo: Bool) throws -> CaptureRecord.Timing {
        var out = CaptureRecord.Timing()
        func median(_ samples: [Double]) -> Double {
            let sorted = samples.sorted()
            return (sorted[sorted.count / 2] * 10).rounded() / 10
        }
        if let hid = client.hid {
            var samples: [Double] = []
            for _ in 0..<9 {
                let start = CTAPHIDClient.nowMs()
                _ = try hid.initialize()
                samples.append(CTAPHIDClient.nowMs() - start)
            }
            out.initMs = median(samples)
        }
        if getInfo {
            var samples: [Double] = []
            for _ in 0..<9 {
                let start = CTAPHIDClient.nowMs()
                _ = try client.sendRaw([0x04])
                samples.append(CTAPHIDClient.nowMs() - start)
            }
            out.getInfoMs = median(samples)
        }
        return out
    }
}
