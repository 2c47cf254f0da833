import CTAPCBOR
import FIDOClient

/// authenticatorGetInfo checks (CTAP 2.1 §6.4) and the message encoding (§8).
enum InfoChecks {
    static let all: [ConformanceCheck] = [
        ConformanceCheck("info.fields", .info, "CTAP 2.1 §6.4", "getInfo's members have the types the spec gives them")
        { ctx in
            let raw = ctx.info.raw
            try ctx.require(!ctx.info.versions.isEmpty, "versions (0x01) lists at least one version")
            try ctx.require(raw[1]?.arrayValue?.allSatisfy { $0.textValue != nil } == true, "versions are text strings")
            try ctx.require(
                ctx.info.aaguid.count == 16,
                "aaguid (0x03) has 16 bytes",
                actual: "\(ctx.info.aaguid.count)"
            )
            if let extensions = raw[2] {
                try ctx.require(
                    extensions.arrayValue?.allSatisfy { $0.textValue != nil } == true,
                    "extensions (0x02) are text strings"
                )
            }
            if let options = raw[4] {
                try ctx.require(
                    options.mapValue?.allSatisfy { $0.key.textValue != nil && $0.value.boolValue != nil } == true,
                    "options (0x04) map text to booleans"
                )
            }
            if let force = raw[0x0C] {
                try ctx.require(force.boolValue != nil, "forcePINChange (0x0C) is a boolean", actual: "\(force)")
            }
            for key in [5, 7, 8, 0x0B, 0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12, 0x14] {
                if let value = raw[key] {
                    try ctx.require(
                        value.intValue.map { $0 >= 0 } == true,
                        "member 0x\(Hex.string(UInt8(key))) is an unsigned integer",
                        actual: "\(value)"
                    )
                }
            }
            if let protocols = raw[6] {
                try ctx.require(
                    protocols.arrayValue?.allSatisfy { $0.intValue != nil } == true,
                    "pinUvAuthProtocols (0x06) are integers"
                )
            }
            if let transports = raw[9] {
                try ctx.require(
                    transports.arrayValue?.allSatisfy { $0.textValue != nil } == true,
                    "transports (0x09) are text strings"
                )
            }
            if let algorithms = raw[0x0A] {
                try ctx.require(
                    algorithms.arrayValue?.allSatisfy {
                        $0.mapValue?[.textString("type")]?.textValue != nil
                            && $0.mapValue?[.textString("alg")]?.intValue != nil
                    } == true,
                    "algorithms (0x0A) are {type, alg} maps"
                )
            }
        },
        ConformanceCheck("info.canonical", .info, "CTAP 2.1 §8", "getInfo's answer is in CTAP2 canonical CBOR") { ctx in
            let response = try ctx.client.send(CTAPCommand.getInfo)
            try ctx.expectOK(response, "getInfo")
            try ctx.require(
                CBORDecoder.isCanonical(response.body, maxDepth: 8),
                "canonical encoding (shortest forms, sorted keys)",
                actual: Hex.string(response.body.prefix(32))
            )
        },
        ConformanceCheck(
            "info.ctap23-members",
            .info,
            "CTAP 2.3 §6.4",
            "a FIDO_2_3 key's getInfo members 0x18-0x1F have their types, and no FIDO_2_2 is listed",
            requires: [.version("FIDO_2_3")]
        ) { ctx in
            let raw = ctx.info.raw
            try ctx.require(!ctx.info.versions.contains("FIDO_2_2"), "no FIDO_2_2 (CTAP defines none)")
            try ctx.require(ctx.info.versions.contains("FIDO_2_1"), "FIDO_2_3 comes with FIDO_2_1")
            if let value = raw[0x18] {
                try ctx.require(value.boolValue != nil, "longTouchForReset (0x18) is a boolean")
            }
            if let value = raw[0x1A] {
                let transports = value.arrayValue?.compactMap(\.textValue) ?? []
                try ctx.require(
                    !transports.isEmpty && transports.count == value.arrayValue?.count
                        && Set(transports).count == transports.count,
                    "transportsForReset (0x1A) is a non-empty list of distinct text strings",
                    actual: "\(value)"
                )
            }
            if let value = raw[0x1C] {
                try ctx.require(value.bytesValue != nil, "pinComplexityPolicyURL (0x1C) is a byte string")
            }
            for key in [0x19, 0x1E] {
                if let value = raw[key] {
                    try ctx.require(
                        value.bytesValue?.count == 32,
                        "member 0x\(Hex.string(UInt8(key))) is IV and one AES block (32 bytes)",
                        actual: "\(value)"
                    )
                }
            }
            if let value = raw[0x1F] {
                let commands = value.arrayValue?.compactMap(\.intValue) ?? []
                try ctx.require(
                    commands.count == value.arrayValue?.count && commands.allSatisfy { $0 >= 0 },
                    "authenticatorConfigCommands (0x1F) are unsigned integers",
                    actual: "\(value)"
                )
                if raw[0x15] != nil {
                    try ctx.require(commands.contains(0xFF), "with vendorPrototypeConfigCommands, 0x1F lists 0xFF")
                }
            }
        },
        ConformanceCheck("info.versions", .info, "CTAP 2.1 §6.4", "a key that speaks CTAP2 lists FIDO_2_0 or FIDO_2_1")
        { ctx in
            try ctx.require(
                ctx.info.versions.contains("FIDO_2_0") || ctx.info.versions.contains("FIDO_2_1"),
                "FIDO_2_0 or FIDO_2_1 in versions",
                actual: "\(ctx.info.versions)"
            )
        },
        ConformanceCheck(
            "info.pin-protocols",
            .info,
            "CTAP 2.1 §6.4",
            "a key with clientPin lists PIN/UV auth protocols 1 or 2",
            requires: [.option("clientPin")]
        ) { ctx in
            try ctx.require(
                !ctx.info.pinUvAuthProtocols.isEmpty && ctx.info.pinUvAuthProtocols.allSatisfy { $0 == 1 || $0 == 2 },
                "pinUvAuthProtocols lists only 1 and 2, at least one",
                actual: "\(ctx.info.pinUvAuthProtocols)"
            )
            if ctx.info.versions.contains("FIDO_2_1") {
                try ctx.require(
                    ctx.info.options["pinUvAuthToken"] == true,
                    "a CTAP 2.1 key with clientPin has pinUvAuthToken true"
                )
            }
        },
        ConformanceCheck("info.max-msg-size", .info, "CTAP 2.1 §6.4", "maxMsgSize, when given, is at least 1024 bytes")
        { ctx in
            guard let size = ctx.info.maxMsgSize else { throw CheckSkip("getInfo has no maxMsgSize (1024 is implied)") }
            try ctx.require(size >= 1024, "maxMsgSize >= 1024", actual: "\(size)")
        },
        ConformanceCheck(
            "info.large-blobs",
            .info,
            "CTAP 2.1 §6.4",
            "maxSerializedLargeBlobArray is given exactly when largeBlobs is true, at least 1024"
        ) { ctx in
            let largeBlobs = ctx.info.options["largeBlobs"] == true
            try ctx.require(
                largeBlobs == (ctx.info.maxSerializedLargeBlobArray != nil),
                "largeBlobs and maxSerializedLargeBlobArray agree",
                actual:
                    "largeBlobs \(largeBlobs), maxSerializedLargeBlobArray \(ctx.info.maxSerializedLargeBlobArray.map(String.init) ?? "absent")"
            )
            if let size = ctx.info.maxSerializedLargeBlobArray {
                try ctx.require(size >= 1024, "at least 1024", actual: "\(size)")
            }
        },
        ConformanceCheck(
            "info.cred-blob",
            .info,
            "CTAP 2.1 §6.4",
            "maxCredBlobLength is given with credBlob, at least 32",
            requires: [.extension("credBlob")]
        ) { ctx in
            guard let length = ctx.info.maxCredBlobLength else {
                throw CheckFailure("credBlob without maxCredBlobLength (0x0F)")
            }
            try ctx.require(length >= 32, "maxCredBlobLength >= 32", actual: "\(length)")
        },
        ConformanceCheck("info.algorithms", .info, "CTAP 2.1 §6.4", "algorithms, when given, include ES256 (-7)") {
            ctx in
            guard let algorithms = ctx.info.algorithms else { throw CheckSkip("getInfo has no algorithms") }
            try ctx.require(algorithms.contains(-7), "ES256 among the algorithms", actual: "\(algorithms)")
        },
        ConformanceCheck(
            "info.unknown-command",
            .info,
            "CTAP 2.1 §8.2",
            "an unknown CTAP2 command gets CTAP1_ERR_INVALID_COMMAND"
        ) { ctx in
            try ctx.expect(try ctx.client.sendRaw([0x55]), CTAPStatusCode.invalidCommand, "command 0x55")
        },
        ConformanceCheck(
            "info.invalid-cbor",
            .info,
            "CTAP 2.1 §8",
            "parameters that are not CBOR get an error, and the key keeps working"
        ) { ctx in
            let response = try ctx.client.sendRaw([CTAPCommand.makeCredential, 0xA1, 0x01])
            try ctx.require(!response.ok, "truncated CBOR is refused", actual: CTAPStatusCode.describe(response.status))
            _ = try ctx.client.getInfo()
        },
    ]
}
