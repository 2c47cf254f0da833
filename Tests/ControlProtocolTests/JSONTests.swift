import Testing

@testable import ControlProtocol

@Suite struct JSONParserTests {
    @Test(
        arguments: [
            ("null", JSONValue.null),
            ("true", true),
            (" false ", false),
            ("0", 0),
            ("-12", -12),
            ("9223372036854775807", .integer(Int64.max)),
            ("1.5", .number(1.5)),
            ("-2e3", .number(-2000)),
            ("1E+2", .number(100)),
            ("18446744073709551616", .number(18_446_744_073_709_551_616)),
            ("\"\"", ""),
            ("\"a\\\"b\\\\c\\/d\\n\\t\\r\\b\\f\"", "a\"b\\c/d\n\t\r\u{8}\u{C}"),
            ("\"\\u00e9\\u20AC\"", "é€"),
            ("\"\\ud83d\\ude00\"", "😀"),
            ("\"h\u{E9}llo \u{1F600}\"", "héllo 😀"),
            ("[]", []),
            ("[1, [2, []], {}]", [1, [2, []], [:]]),
            ("{\"a\": 1, \"b\": [true, null]}", ["a": 1, "b": [true, nil]]),
        ] as [(String, JSONValue)]
    )
    func accepts(text: String, expected: JSONValue) throws {
        #expect(try JSONParser.parse(text) == expected)
    }

    @Test(arguments: [
        "", " ", "nul", "tru", "True", "01", "-", "1.", ".5", "1e", "+1", "0x10", "NaN", "Infinity", "1e400",
        "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83d\\u0041\"",
        "\"a\nb\"", "\"tab\there\"", "[1,]", "[1 2]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{\"a\":1,\"a\":2}",
        "{\"a\":1}}", "[1]x", "1 2", "{\"a\"}", "[", "{",
    ])
    func rejects(text: String) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
    }

    @Test(
        arguments: [
            [0x22, 0xFF, 0x22],  // not UTF-8
            [0x22, 0xC0, 0xAF, 0x22],  // overlong
            [0x22, 0xED, 0xA0, 0x80, 0x22],  // an encoded surrogate
            [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],  // above U+10FFFF
            [0x22, 0xE2, 0x82, 0x22],  // truncated
            [0x22, 0x00, 0x22],  // NUL in a string
        ] as [[UInt8]]
    )
    func rejectsInvalidUTF8(bytes: [UInt8]) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(bytes) }
    }

    @Test func depthIsLimited() throws {
        let ok = String(repeating: "[", count: JSONParser.maxDepth) + String(repeating: "]", count: JSONParser.maxDepth)
        #expect(throws: Never.self) { try JSONParser.parse(ok) }
        let deep =
            String(repeating: "[", count: JSONParser.maxDepth + 1)
            + String(repeating: "]", count: JSONParser.maxDepth + 1)
        let error = #expect(throws: JSONParseError.self) { try JSONParser.parse(deep) }
        #expect(error?.message.contains("nested") == true)
        // A million opening brackets end with an error, not a stack overflow.
        #expect(throws: JSONParseError.self) { try JSONParser.parse(String(repeating: "[", count: 1_000_000)) }
    }

    @Test func encodesCompactlyWithSortedKeys() {
        let value: JSONValue = ["b": [1, "x\"\n\u{1}"], "a": nil, "c": .number(0.5), "d": true]
        #expect(value.encoded == "{\"a\":null,\"b\":[1,\"x\\\"\\n\\u0001\"],\"c\":0.5,\"d\":true}")
    }

    @Test(arguments: [
        JSONValue.object(["id": 7, "name": "é😀\u{7F}", "list": [nil, false, .number(-1.25), .integer(Int64.min)]]),
        "\\/\u{0}",
        [[[["deep": [:]]]]],
    ])
    func roundTrips(value: JSONValue) throws {
        #expect(try JSONParser.parse(value.encoded) == value)
    }
}

@Suite struct Base64URLTests {
    @Test(
        arguments: [
            ([], ""), ([0x66], "Zg"), ([0x66, 0x6F], "Zm8"), ([0x66, 0x6F, 0x6F], "Zm9v"),
            ([0xFB, 0xFF, 0xBF], "-_-_"), ([0x00, 0x10, 0x83, 0x10, 0x51, 0x87], "ABCDEFGH"),
        ] as [([UInt8], String)]
    )
    func knownAnswers(bytes: [UInt8], text: String) {
        #expect(Base64URL.encode(bytes) == text)
        #expect(Base64URL.decode(text) == bytes)
    }

    @Test func acceptsPaddingAndRejectsGarbage() {
        #expect(Base64URL.decode("Zg==") == [0x66])
        #expect(Base64URL.decode("Zm8=") == [0x66, 0x6F])
        #expect(Base64URL.decode("Zg=") == [0x66])
        #expect(Base64URL.decode("Z") == nil)  // a length no encoding has
        #expect(Base64URL.decode("Zh") == nil)  // non-zero unused bits
        #expect(Base64URL.decode("Zm+v") == nil)  // standard alphabet
        #expect(Base64URL.decode("Zm9v===") == nil)
        #expect(Base64URL.decode("Zm 9v") == nil)
    }

    @Test func roundTripsEveryLength() {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }
}

@Suite struct ControlLineBufferTests {
    @Test func splitsLinesAcrossReads() {
        var buffer = ControlLineBuffer()
        #expect(buffer.append(Array("{\"a\"".utf8)) == [])
        #expect(
            buffer.append(Array(":1}\n\n{\"b\":2}\r\n{".utf8)) == [
                .line(Array("{\"a\":1}".utf8)), .line(Array("{\"b\":2}".utf8)),
            ]
        )
        #expect(buffer.append(Array("}\n".utf8)) == [.line(Array("{}".utf8))])
    }

    @Test func anOverlongLineIsReportedOnceAndSkipped() {
        var buffer = ControlLineBuffer(maxLineLength: 8)
        #expect(buffer.append(Array("123456789".utf8)) == [.tooLarge])
        #expect(buffer.append(Array("abcdefghijkl".utf8)) == [])
        #expect(buffer.append(Array("xyz\nok\n".utf8)) == [.line(Array("ok".utf8))])
        #expect(buffer.append(Array("12345678\n".utf8)) == [.line(Array("12345678".utf8))])
    }
}
