import CTAPCBOR
import Testing

@Suite("Encoder")
struct CBOREncoderTests {
    @Test("integer heads use the shortest form at every width boundary")
    func shortestIntegerHeads() {
        let cases: [(UInt64, String)] = [
            (0, "00"), (23, "17"), (24, "1818"), (0xff, "18ff"), (0x100, "190100"), (0xffff, "19ffff"),
            (0x1_0000, "1a00010000"), (0xffff_ffff, "1affffffff"), (0x1_0000_0000, "1b0000000100000000"),
        ]
        for (argument, expected) in cases {
            #expect(hexString(CBORValue.unsigned(argument).encoded()) == expected)
            // Major type 1 shares the head format, with the major type in the top three bits.
            var negativeHead = hex(expected)
            negativeHead[0] |= 0x20
            #expect(CBORValue.negative(argument).encoded() == negativeHead)
        }
    }

    @Test("string lengths use the shortest form")
    func shortestLengths() {
        let bytes24 = CBORValue(bytes: [UInt8](repeating: 0xaa, count: 24)).encoded()
        #expect(Array(bytes24.prefix(2)) == [0x58, 24])
        #expect(bytes24.count == 26)
        let text256 = CBORValue.textString(String(repeating: "x", count: 256)).encoded()
        #expect(Array(text256.prefix(3)) == [0x79, 0x01, 0x00])
        #expect(text256.count == 259)
    }

    @Test("map keys sort by major type, then encoded length, then bytes")
    func canonicalKeyOrder() {
        let map: CBORValue = [
            false: 0, [-1]: 0, [100]: 0, "aa": 0, "z": 0, -1: 0, 100: 0, 10: 0,
        ]
        // 10 (0a), 100 (1864), -1 (20), "z" (617a), "aa" (626161), [-1] (8120), [100] (811864), false (f4).
        let expected = "a8" + "0a00" + "186400" + "2000" + "617a00" + "62616100" + "812000" + "81186400" + "f400"
        #expect(hexString(map.encoded()) == expected)
    }

    @Test("integer-keyed maps sort as their encoded keys do, across every head width")
    func integerKeysSortAsEncodedKeys() {
        var generator = SystemRandomNumberGenerator()
        let edges: [UInt64] = [0, 23, 24, 255, 256, 65535, 65536, 0xFFFF_FFFF, 0x1_0000_0000, .max]
        for _ in 0..<200 {
            var entries: [CBORValue: CBORValue] = [:]
            for index in 0..<Int.random(in: 1...12, using: &generator) {
                let argument =
                    Bool.random(using: &generator)
                    ? edges.randomElement(using: &generator)! : UInt64.random(in: 0...UInt64.max, using: &generator)
                let key: CBORValue = Bool.random(using: &generator) ? .unsigned(argument) : .negative(argument)
                entries[key] = CBORValue(index)
            }
            // The order of the general path: each key encoded, then compared byte-wise by canonicalKeyPrecedes.
            let expected = entries.map { (key: CBOREncoder.encode($0.key), value: $0.value) }
                .sorted { CBOREncoder.canonicalKeyPrecedes($0.key, $1.key) }
                .flatMap { $0.key + CBOREncoder.encode($0.value) }
            #expect(Array(CBORValue.map(entries).encoded().dropFirst(entries.count < 24 ? 1 : 2)) == expected)
        }
    }

    @Test("major type sorts before length, and length before bytes")
    func sortPrecedence() {
        // 1000 takes three bytes and -1 one, but major type 0 sorts first.
        #expect(hexString(CBORValue.map([-1: 0, 1000: 0]).encoded()) == "a2" + "1903e800" + "2000")
        // "b" is shorter than "aa", so it sorts first although "aa" is lower byte-wise.
        #expect(hexString(CBORValue.map(["aa": 0, "b": 0]).encoded()) == "a2" + "616200" + "62616100")
        // Same length: byte-wise, so 23 (17) < 24 (1818) < 25 (1819) < 255 (18ff).
        let numbers: CBORValue = [255: 0, 25: 0, 24: 0, 23: 0]
        #expect(hexString(numbers.encoded()) == "a4" + "1700" + "181800" + "181900" + "18ff00")
        // Byte strings (major 2) sort before text strings (major 3) of the same content.
        #expect(hexString(CBORValue.map([.textString("a"): 0, .byteString([0x61]): 0]).encoded()) == "a2416100616100")
    }

    @Test("canonicalKeyPrecedes compares encoded keys")
    func keyComparator() {
        #expect(CBOREncoder.canonicalKeyPrecedes([0x0a], [0x18, 0x64]))
        #expect(CBOREncoder.canonicalKeyPrecedes([0x18, 0x64], [0x20]))
        #expect(CBOREncoder.canonicalKeyPrecedes([0x61, 0x7a], [0x62, 0x61, 0x61]))
        #expect(!CBOREncoder.canonicalKeyPrecedes([0x61, 0x7a], [0x61, 0x7a]))
        #expect(!CBOREncoder.canonicalKeyPrecedes([0xf4], [0x81, 0x20]))
    }

    @Test("nested maps are sorted at every level")
    func nestedMapsSorted() {
        let value: CBORValue = [2: ["name": "A", "id": "a.b"], 1: [[3: 0, 2: 0]]]
        #expect(hexString(value.encoded()) == "a2" + "0181a202000300" + "02a262696463612e62646e616d656141")
    }

    @Test("text strings are written as their own UTF-8, without normalization")
    func textBytesNotNormalized() {
        let decomposed = CBORValue.textString("e\u{0301}")
        let precomposed = CBORValue.textString("\u{00e9}")
        #expect(hexString(decomposed.encoded()) == "6365cc81")
        #expect(hexString(precomposed.encoded()) == "62c3a9")
    }

    @Test("a makeCredential-shaped request encodes canonically and round-trips")
    func ctapRoundTrip() throws {
        let request: CBORValue = [
            7: ["rk": true],
            4: [["type": "public-key", "alg": -7]],
            2: ["name": "A", "id": "a.b"],
            1: .byteString([0x01, 0x02]),
        ]
        let expected =
            "a4"
            + "01" + "420102"
            + "02" + "a2" + "626964" + "63612e62" + "646e616d65" + "6141"
            + "04" + "81" + "a2" + "63616c67" + "26" + "6474797065" + "6a7075626c69632d6b6579"
            + "07" + "a1" + "62726b" + "f5"
        let encoded = request.encoded()
        #expect(hexString(encoded) == expected)
        #expect(try CBORDecoder.decode(encoded) == request)
        #expect(CBORDecoder.isCanonical(encoded))
    }

    @Test("a full-size makeCredential request round-trips within the default depth")
    func fullMakeCredentialRoundTrip() throws {
        let clientDataHash = CBORValue(bytes: (0..<32).map { UInt8($0) })
        let request: CBORValue = [
            1: clientDataHash,
            2: ["id": "example.com", "name": "Example"],
            3: ["id": .byteString([0x30, 0x82, 0x01, 0x93]), "name": "alice", "displayName": "Alice"],
            4: [["alg": -7, "type": "public-key"], ["alg": -257, "type": "public-key"]],
            5: [["id": .byteString([UInt8](repeating: 0xee, count: 64)), "type": "public-key"]],
            6: ["credProtect": 2, "hmac-secret": true],
            7: ["rk": true, "uv": false],
            8: .byteString([UInt8](repeating: 0x5a, count: 16)),
            9: 2,
        ]
        let decoded = try CBORDecoder.decode(request.encoded())
        #expect(decoded == request)
        #expect(decoded[1]?.bytesValue?.count == 32)
        #expect(decoded[2]?["id"]?.textValue == "example.com")
        #expect(decoded[4]?.arrayValue?.last?["alg"]?.intValue == -257)
        #expect(decoded[7]?["rk"]?.boolValue == true)
        #expect(decoded[9]?.intValue == 2)
        #expect(decoded.encoded() == request.encoded())
    }
}

@Suite("Value")
struct CBORValueTests {
    @Test("Int initializer picks unsigned or negative")
    func intInitializer() {
        #expect(CBORValue(0) == .unsigned(0))
        #expect(CBORValue(Int.max) == .unsigned(UInt64(Int.max)))
        #expect(CBORValue(-1) == .negative(0))
        #expect(CBORValue(Int.min) == .negative(UInt64(Int.max)))
    }

    @Test("integer literals cover the whole CBOR range")
    func integerLiterals() {
        let largest: CBORValue = 18_446_744_073_709_551_615
        let smallest: CBORValue = -18_446_744_073_709_551_616
        let minusOne: CBORValue = -1
        let intMin: CBORValue = -9_223_372_036_854_775_808
        #expect(largest == .unsigned(.max))
        #expect(smallest == .negative(.max))
        #expect(minusOne == .negative(0))
        #expect(intMin == .negative(UInt64(Int.max)))
    }

    @Test("an integer literal outside the CBOR range stops the program")
    func integerLiteralOutOfRange() async {
        await #expect(processExitsWith: .failure) {
            let tooLarge: CBORValue = 18_446_744_073_709_551_616
            _ = tooLarge
        }
    }

    @Test("intValue is nil outside Int's range")
    func intValueRange() {
        #expect(CBORValue.unsigned(UInt64(Int.max)).intValue == Int.max)
        #expect(CBORValue.unsigned(UInt64(Int.max) + 1).intValue == nil)
        #expect(CBORValue.negative(UInt64(Int.max)).intValue == Int.min)
        #expect(CBORValue.negative(UInt64(Int.max) + 1).intValue == nil)
        #expect(CBORValue.textString("1").intValue == nil)
    }

    @Test("typed accessors return nil for other kinds")
    func accessors() {
        let bytes = CBORValue(bytes: [1, 2, 3].lazy.map { UInt8($0) })
        #expect(bytes.bytesValue == [1, 2, 3])
        #expect(bytes.textValue == nil)
        #expect(CBORValue.textString("x").textValue == "x")
        #expect(CBORValue.array([1, 2]).arrayValue == [1, 2])
        #expect(CBORValue.map([1: 2]).mapValue == [1: 2])
        #expect(CBORValue(true).boolValue == true)
        #expect(CBORValue.null.boolValue == nil)
        #expect(CBORValue.null.isNull)
        #expect(!CBORValue.undefined.isNull)
        #expect(CBORValue.unsigned(1).mapValue == nil)
    }

    @Test("subscripts look up integer and text keys in maps only")
    func subscripts() {
        let map: CBORValue = [1: "one", -2: "minus two", "k": true]
        #expect(map[1] == "one")
        #expect(map[-2] == "minus two")
        #expect(map["k"] == true)
        #expect(map[3] == nil)
        #expect(map["one"] == nil)
        #expect(CBORValue.array([1, 2])[0] == nil)
        #expect(CBORValue("k")["k"] == nil)
    }

    @Test("majorType matches the initial byte of the encoding")
    func majorTypes() {
        let values: [CBORValue] = [1, -1, .byteString([]), "", [], [:], true, .null, .undefined]
        for value in values {
            #expect(value.majorType == value.encoded()[0] >> 5)
        }
        #expect(values.map(\.majorType) == [0, 1, 2, 3, 4, 5, 7, 7, 7])
    }

    @Test("description uses diagnostic notation with canonical key order")
    func diagnosticNotation() {
        let value: CBORValue = [
            "rk": true, 3: [-7, -18_446_744_073_709_551_616], 1: .byteString([0x01, 0xab]),
            "s": "q\"\\\n\u{1}", 2: [.null, .undefined, false],
        ]
        let expected =
            #"{1: h'01ab', 2: [null, undefined, false], 3: [-7, -18446744073709551616], "s": "q\"\\\n\u0001", "#
            + #""rk": true}"#
        #expect(value.description == expected)
    }
}
