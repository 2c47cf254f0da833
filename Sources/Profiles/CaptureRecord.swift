package import CTAPCBOR
package import ControlProtocol

/// The `capture` member of a profile file, spelled once: `fidosim profile capture` (the Capture target) fills one
/// and writes its ``json``; `serve --profile` reads one with ``init(json:)`` (firmware-spec/profiles.md, "Captured
/// profiles"). The names of the members live here and nowhere else.
///
/// `destructive`, what `--allow-destructive` recorded, stays a JSON object: its members are answers by name, written
/// by `DestructiveCapture` and read by the profile's derivation (``ProfileFile/unreproduced(_:)``).
package struct CaptureRecord: Sendable, Equatable {
    /// The format; a capture of another version is refused.
    package static let version = 1

    /// getInfo members that are new at each request (CTAP 2.2 encIdentifier 0x19 and encCredStoreState 0x1E): a
    /// capture records that the key has them, not their bytes.
    package static let perRequestMembers: Set<Int> = [0x19, 0x1E]

    /// CTAPHID INIT's answer: the protocol version, the device version (major, minor, build) and the capabilities.
    package struct HIDIdentity: Sendable, Equatable {
        package var protocolVersion: UInt8?
        package var deviceVersion: [UInt8]
        package var capabilities: UInt8

        package init(protocolVersion: UInt8?, deviceVersion: [UInt8], capabilities: UInt8) {
            self.protocolVersion = protocolVersion
            self.deviceVersion = deviceVersion
            self.capabilities = capabilities
        }
    }

    /// What a serial number looks like, not the serial itself: its length and its alphabet (`none`, `digits`,
    /// `upper-hex`, `lower-hex`, `upper-alnum`, `alnum`).
    package struct SerialShape: Sendable, Equatable {
        /// The letters of each alphabet a serial may have (`none`: an empty serial).
        package static let letters: [String: String] = [
            "digits": "0123456789", "upper-hex": "0123456789ABCDEF", "lower-hex": "0123456789abcdef",
            "upper-alnum": "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
            "alnum": "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        ]

        package var length: Int?
        package var alphabet: String?

        package init(length: Int?, alphabet: String?) {
            self.length = length
            self.alphabet = alphabet
        }

        package init(of serial: String) {
            length = serial.count
            alphabet =
                if serial.isEmpty {
                    "none"
                } else if serial.allSatisfy({ $0.isASCII && $0.isNumber }) {
                    "digits"
                } else if serial.allSatisfy({ $0.isHexDigit && !$0.isLowercase }) {
                    "upper-hex"
                } else if serial.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) {
                    "lower-hex"
                } else if serial.allSatisfy({ $0.isASCII && ($0.isNumber || $0.isUppercase) }) {
                    "upper-alnum"
                } else {
                    "alnum"
                }
        }
    }

    /// The USB identity hidapi gives.
    package struct USBIdentity: Sendable, Equatable {
        package var vendorID: UInt16
        package var productID: UInt16
        package var manufacturer: String?
        package var product: String?
        package var serial: SerialShape?

        package init(
            vendorID: UInt16,
            productID: UInt16,
            manufacturer: String?,
            product: String?,
            serial: SerialShape?
        ) {
            self.vendorID = vendorID
            self.productID = productID
            self.manufacturer = manufacturer
            self.product = product
            self.serial = serial
        }
    }

    /// One probe's request and the key's answer (a CTAP2 status and body, or U2F data and status word); `replay`:
    /// the answer depends on nothing the key holds, so a copy answers it with these bytes.
    package struct Probe: Sendable, Equatable {
        package var name: String
        package var request: [UInt8]
        package var response: [UInt8]
        package var replay: Bool

        package init(name: String, request: [UInt8], response: [UInt8], replay: Bool) {
            self.name = name
            self.request = request
            self.response = response
            self.replay = replay
        }
    }

    /// Round trips, in milliseconds: the medians of INIT and getInfo, and the gap between keepalives while the key
    /// waited for a touch.
    package struct Timing: Sendable, Equatable {
        package var initMs: Double?
        package var getInfoMs: Double?
        package var keepaliveMs: Double?
        /// The keepalives were timed but too few came to measure a gap: `keepaliveMs` is written as null.
        package var keepaliveUnmeasured = false

        package init(initMs: Double? = nil, getInfoMs: Double? = nil, keepaliveMs: Double? = nil) {
            self.initMs = initMs
            self.getInfoMs = getInfoMs
            self.keepaliveMs = keepaliveMs
        }
    }

    /// getInfo's answer (status byte, then CBOR) without the per-request members; nil for a key without CTAP2.
    package var getInfo: [UInt8]?
    /// Which per-request members getInfo had.
    package var getInfoPerRequest: [Int] = []
    package var ctaphid: HIDIdentity?
    package var usb: USBIdentity?
    /// The CTAP2 probes' answers, and the U2F probes'.
    package var probes: [Probe] = []
    package var u2f: [Probe] = []
    package var timing = Timing()
    package var destructive: JSONValue?

    package init() {}

    /// The captured getInfo map; nil for a key that has none (U2F only).
    package func info() throws -> [CBORValue: CBORValue]? {
        guard let bytes = getInfo else { return nil }
        guard bytes.first == 0x00 else {
            throw KeySetupError("capture \"getInfo\" must be the hex of a successful answer (status 00, then CBOR)")
        }
        guard let value = try? CBORDecoder.decode(Array(bytes.dropFirst()), maxDepth: 8), case .map(let map) = value
        else { throw KeySetupError("capture \"getInfo\" is not a CBOR map after its status byte") }
        return map
    }

    /// Each CTAP2 probe's answer by name.
    package var probeAnswers: [String: [UInt8]] {
        Dictionary(probes.map { ($0.name, $0.response) }, uniquingKeysWith: { _, last in last })
    }

    /// The `capture` object as a profile file holds it.
    package var json: JSONValue {
        var out: [String: JSONValue] = ["version": .integer(Int64(Self.version))]
        if let ctaphid {
            var members: [String: JSONValue] = [
                "deviceVersion": .array(ctaphid.deviceVersion.map { .integer(Int64($0)) }),
                "capabilities": .integer(Int64(ctaphid.capabilities)),
            ]
            if let version = ctaphid.protocolVersion { members["protocolVersion"] = .integer(Int64(version)) }
            out["ctaphid"] = .object(members)
        }
        if let usb {
            var members: [String: JSONValue] = [
                "vendorId": .integer(Int64(usb.vendorID)), "productId": .integer(Int64(usb.productID)),
            ]
            if let manufacturer = usb.manufacturer { members["manufacturer"] = .string(manufacturer) }
            if let product = usb.product { members["product"] = .string(product) }
            if let serial = usb.serial {
                var shape: [String: JSONValue] = [:]
                if let length = serial.length { shape["length"] = .integer(Int64(length)) }
                if let alphabet = serial.alphabet { shape["alphabet"] = .string(alphabet) }
                members["serial"] = .object(shape)
            }
            out["usb"] = .object(members)
        }
        if let getInfo { out["getInfo"] = .string(Hex.string(getInfo)) }
        if !getInfoPerRequest.isEmpty {
            out["getInfoPerRequest"] = .array(getInfoPerRequest.map { .integer(Int64($0)) })
        }
        func probeList(_ list: [Probe]) -> JSONValue {
            .array(
                list.map {
                    [
                        "name": .string($0.name), "request": .string(Hex.string($0.request)),
                        "response": .string(Hex.string($0.response)), "replay": .boolean($0.replay),
                    ]
                }
            )
        }
        out["probes"] = probeList(probes)
        out["u2f"] = probeList(u2f)
        var times: [String: JSONValue] = [:]
        for (name, value) in [
            ("initMs", timing.initMs), ("getInfoMs", timing.getInfoMs), ("keepaliveMs", timing.keepaliveMs),
        ] {
            if let value { times[name] = .number(value) }
        }
        if timing.keepaliveMs == nil && timing.keepaliveUnmeasured { times["keepaliveMs"] = .null }
        out["timing"] = .object(times)
        if let destructive { out["destructive"] = destructive }
        return .object(out)
    }

    /// Reads a `capture` object; a member that is not as ``json`` writes it is refused with what it must be.
    package init(json: JSONValue) throws {
        guard case .object(let fields) = json else { throw KeySetupError("\"capture\" must be an object") }
        let known: Set<String> = [
            "version", "getInfo", "getInfoPerRequest", "ctaphid", "usb", "probes", "u2f", "timing", "destructive",
        ]
        for key in fields.keys.sorted() where !known.contains(key) {
            throw KeySetupError("unknown capture member \"\(key)\"")
        }
        guard fields["version"]?.integerValue == Int64(Self.version) else {
            throw KeySetupError("capture \"version\" must be 1 (a capture of another fidosim is not read)")
        }
        if let text = fields["getInfo"]?.stringValue {
            guard let bytes = Hex.bytes(text) else {
                throw KeySetupError("capture \"getInfo\" must be the hex of a successful answer (status 00, then CBOR)")
            }
            getInfo = bytes
            _ = try info()
        }
        for member in fields["getInfoPerRequest"]?.arrayValue ?? [] {
            guard let number = member.integerValue, Self.perRequestMembers.contains(Int(number)) else {
                throw KeySetupError(
                    "capture \"getInfoPerRequest\" may list 25 (encIdentifier) and 30 (encCredStoreState)"
                )
            }
            getInfoPerRequest.append(Int(number))
        }
        for member in ["probes", "u2f"] {
            guard let list = fields[member] else { continue }
            guard let entries = list.arrayValue else { throw KeySetupError("capture \"\(member)\" must be an array") }
            let read = try entries.map { probe in
                guard let request = probe["request"]?.stringValue.flatMap(Hex.bytes),
                    let response = probe["response"]?.stringValue.flatMap(Hex.bytes), !response.isEmpty,
                    let replay = probe["replay"]?.boolValue
                else {
                    throw KeySetupError("each capture probe needs \"request\" and \"response\" in hex and \"replay\"")
                }
                return Probe(
                    name: probe["name"]?.stringValue ?? "",
                    request: request,
                    response: response,
                    replay: replay
                )
            }
            if member == "u2f" { u2f = read } else { probes = read }
        }
        if let member = fields["ctaphid"] {
            let version = member["deviceVersion"]?.arrayValue?.compactMap(\.integerValue) ?? []
            guard version.count == 3, version.allSatisfy({ (0...255).contains($0) }),
                let capabilities = member["capabilities"]?.integerValue, (0...255).contains(capabilities)
            else {
                throw KeySetupError("capture \"ctaphid\" needs \"deviceVersion\" (three bytes) and \"capabilities\"")
            }
            let protocolVersion = member["protocolVersion"]?.integerValue.flatMap { UInt8(exactly: $0) }
            ctaphid = HIDIdentity(
                protocolVersion: protocolVersion,
                deviceVersion: version.map { UInt8($0) },
                capabilities: UInt8(capabilities)
            )
        }
        if let member = fields["usb"] {
            guard let vendor = member["vendorId"]?.integerValue, (0...0xFFFF).contains(vendor),
                let product = member["productId"]?.integerValue, (0...0xFFFF).contains(product)
            else { throw KeySetupError("capture \"usb\" needs \"vendorId\" and \"productId\" (16-bit)") }
            let serial = member["serial"].map {
                SerialShape(length: $0["length"]?.integerValue.map { Int($0) }, alphabet: $0["alphabet"]?.stringValue)
            }
            usb = USBIdentity(
                vendorID: UInt16(vendor),
                productID: UInt16(product),
                manufacturer: member["manufacturer"]?.stringValue,
                product: member["product"]?.stringValue,
                serial: serial
            )
        }
        if let member = fields["timing"] {
            timing.keepaliveUnmeasured = member["keepaliveMs"] == .null
            for name in ["initMs", "getInfoMs", "keepaliveMs"] {
                guard let value = member[name], value != .null else { continue }
                let number: Double? =
                    switch value {
                    case .number(let d): d
                    case .integer(let i): Double(i)
                    default: nil
                    }
                guard let number, number >= 0, number <= 10_000 else {
                    throw KeySetupError("capture timing \"\(name)\" must be a number of milliseconds, 0 to 10000")
                }
                switch name {
                case "initMs": timing.initMs = number
                case "getInfoMs": timing.getInfoMs = number
                default:
                    guard number >= 10, number <= 1000 else {
                        throw KeySetupError("capture timing \"keepaliveMs\" must be 10 to 1000 milliseconds")
                    }
                    timing.keepaliveMs = number
                }
            }
        }
        destructive = fields["destructive"]
    }
}
