import CTAPCBOR
import Testing

/// An input the decoder must reject, with the error it must report.
struct Rejection: Sendable, CustomTestStringConvertible {
    var hex: String
    var offset: Int
    var note: String

    init(_ hex: String, at offset: Int, _ note: String) {
        self.hex = hex
        self.offset = offset
        self.note = note
    }

    var testDescription: String {
        "\(self.note): \(self.hex)"
    }
}

/// Decodes `rejection.hex` and expects exactly `code` at the rejection's offset.
private func expectRejection(
    _ rejection: Rejection,
    _ code: CBORDecodingError.Code,
    maxDepth: Int = 4,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(
        throws: CBORDecodingError(code: code, offset: rejection.offset),
        sourceLocation: sourceLocation
    ) {
        try CBORDecoder.decode(hex(rejection.hex), maxDepth: maxDepth)
    }
}

@Suite("Decoder rejections")
struct CBORDecoderRejectionTests {
    @Test(
        "truncated",
        arguments: [
            Rejection("", at: 0, "empty input"),
            Rejection("18", at: 0, "one-byte argument missing"),
            Rejection("1901", at: 0, "two-byte argument cut"),
            Rejection("1a010203", at: 0, "four-byte argument cut"),
            Rejection("1b01020304050607", at: 0, "eight-byte argument cut"),
            Rejection("3a0102", at: 0, "negative argument cut"),
            Rejection("4201", at: 0, "byte string payload cut"),
            Rejection("636100", at: 0, "text string payload cut"),
            Rejection("8201", at: 0, "array missing an element"),
            Rejection("a101", at: 0, "map missing a value"),
            Rejection("a2010203", at: 0, "map missing a pair"),
            Rejection("82820102", at: 4, "outer array missing its last element"),
            Rejection("a1a10102", at: 4, "outer map missing its value"),
            Rejection("81f8", at: 1, "two-byte simple value cut"),
            Rejection("8158", at: 1, "nested length argument missing"),
        ]
    )
    func truncated(_ rejection: Rejection) {
        expectRejection(rejection, .truncated)
    }

    @Test(
        "huge claimed lengths are truncated, not allocated",
        arguments: [
            Rejection("5b1000000000000000" + "00010203040506070809", at: 0, "byte string of 2^60 bytes"),
            Rejection("7b1000000000000000" + "61616161616161616161", at: 0, "text string of 2^60 bytes"),
            Rejection("5bffffffffffffffff00", at: 0, "byte string of 2^64-1 bytes"),
            Rejection("5a7fffffff00", at: 0, "byte string of 2^31-1 bytes"),
            Rejection("9b0000000100000000" + "000000", at: 0, "array of 2^32 items"),
            Rejection("9affffffff01", at: 0, "array of 2^32-1 items"),
            Rejection("9bffffffffffffffff01", at: 0, "array of 2^64-1 items"),
            Rejection("bb0000000100000000" + "0000", at: 0, "map of 2^32 pairs"),
            Rejection("bb8000000000000000" + "0000", at: 0, "map of 2^63 pairs"),
            Rejection("bbffffffffffffffff" + "0000", at: 0, "map of 2^64-1 pairs"),
            Rejection("a30102030405", at: 0, "map of 3 pairs in 5 bytes"),
            Rejection("81818201" + "5b1000000000000000" + "0001", at: 4, "nested huge byte string"),
        ]
    )
    func hugeClaimedLength(_ rejection: Rejection) {
        expectRejection(rejection, .truncated)
    }

    @Test(
        "trailingBytes",
        arguments: [
            Rejection("0000", at: 1, "two integers"),
            Rejection("8000", at: 1, "byte after an array"),
            Rejection("a0a0", at: 1, "two maps"),
            Rejection("820102ff", at: 3, "break after a definite array"),
            Rejection("8101ff", at: 2, "break after a complete one-element array"),
            Rejection("4101020304", at: 2, "bytes after a byte string"),
        ]
    )
    func trailingBytes(_ rejection: Rejection) {
        expectRejection(rejection, .trailingBytes)
    }

    @Test(
        "indefiniteLength",
        arguments: [
            Rejection("5f42010243030405ff", at: 0, "indefinite byte string"),
            Rejection("7f657374726561646d696e67ff", at: 0, "indefinite text string"),
            Rejection("9fff", at: 0, "indefinite array"),
            Rejection("bf61610161629f0203ffff", at: 0, "indefinite map"),
            Rejection("819f", at: 1, "nested indefinite array"),
            Rejection("1f", at: 0, "additional info 31 on major 0"),
            Rejection("3f", at: 0, "additional info 31 on major 1"),
            Rejection("df", at: 0, "additional info 31 on major 6"),
        ]
    )
    func indefiniteLength(_ rejection: Rejection) {
        expectRejection(rejection, .indefiniteLength)
    }

    @Test(
        "unexpectedBreak",
        arguments: [
            Rejection("ff", at: 0, "lone break"),
            Rejection("8201ff", at: 2, "break inside a definite array"),
            Rejection("a101ff", at: 2, "break as a map value"),
        ]
    )
    func unexpectedBreak(_ rejection: Rejection) {
        expectRejection(rejection, .unexpectedBreak)
    }

    @Test(
        "duplicateMapKey",
        arguments: [
            Rejection("a201020103", at: 3, "integer key twice"),
            Rejection("a2616101616102", at: 4, "text key twice"),
            Rejection("a3010102020101", at: 5, "repeated key after another"),
            Rejection("a2410001410002", at: 4, "byte string key twice"),
            Rejection("a28101008101f6", at: 4, "array key twice"),
            Rejection("a2f400f401", at: 3, "false key twice"),
            Rejection("81a2200120f6", at: 4, "nested map"),
            Rejection("a26365cc810062c3a900", at: 6, "canonically equivalent text keys"),
        ]
    )
    func duplicateMapKey(_ rejection: Rejection) {
        expectRejection(rejection, .duplicateMapKey)
    }

    @Test(
        "nonMinimalEncoding",
        arguments: [
            Rejection("1817", at: 0, "23 in one-byte argument"),
            Rejection("1800", at: 0, "0 in one-byte argument"),
            Rejection("190001", at: 0, "1 in two-byte argument"),
            Rejection("1900ff", at: 0, "255 in two-byte argument"),
            Rejection("1a0000ffff", at: 0, "65535 in four-byte argument"),
            Rejection("1b00000000ffffffff", at: 0, "2^32-1 in eight-byte argument"),
            Rejection("3817", at: 0, "-24 in one-byte argument"),
            Rejection("5800", at: 0, "byte string length in one-byte argument"),
            Rejection("780161", at: 0, "text string length in one-byte argument"),
            Rejection("980101", at: 0, "array count in one-byte argument"),
            Rejection("b9000101f6", at: 0, "map count in two-byte argument"),
            Rejection("a1011900ff", at: 2, "nested map value"),
            Rejection("f814", at: 0, "false as a two-byte simple value"),
            Rejection("f800", at: 0, "simple(0) in two bytes"),
            Rejection("f81f", at: 0, "simple(31) in two bytes"),
        ]
    )
    func nonMinimalEncoding(_ rejection: Rejection) {
        expectRejection(rejection, .nonMinimalEncoding)
    }

    @Test(
        "invalidUTF8",
        arguments: [
            Rejection("61ff", at: 0, "0xff byte"),
            Rejection("6180", at: 0, "lone continuation byte"),
            Rejection("62c080", at: 0, "overlong NUL"),
            Rejection("62c1bf", at: 0, "overlong two-byte"),
            Rejection("63e08080", at: 0, "overlong three-byte"),
            Rejection("64f0808080", at: 0, "overlong four-byte"),
            Rejection("63eda080", at: 0, "high surrogate U+D800"),
            Rejection("63edbfbf", at: 0, "low surrogate U+DFFF"),
            Rejection("66eda0bdedb2a9", at: 0, "surrogate pair in CESU-8"),
            Rejection("64f4908080", at: 0, "above U+10FFFF"),
            Rejection("64f8888080", at: 0, "five-byte form"),
            Rejection("62e6b0", at: 0, "sequence cut by the string length"),
            Rejection("6261e6", at: 0, "lead byte at the end"),
            Rejection("a1616161c3", at: 3, "map value"),
        ]
    )
    func invalidUTF8(_ rejection: Rejection) {
        expectRejection(rejection, .invalidUTF8)
    }

    @Test(
        "unsupportedTag",
        arguments: [
            Rejection("c074323031332d30332d32315432303a30343a30305a", at: 0, "tag 0 date string"),
            Rejection("c11a514b67b0", at: 0, "tag 1 epoch"),
            Rejection("c249010000000000000000", at: 0, "tag 2 bignum"),
            Rejection("d74401020304", at: 0, "tag 23"),
            Rejection("d818456449455446", at: 0, "tag 24"),
            Rejection("d9d9f7", at: 0, "self-described CBOR tag"),
            Rejection("c0", at: 0, "tag with no content"),
            Rejection("8201c000", at: 2, "tag inside an array"),
        ]
    )
    func unsupportedTag(_ rejection: Rejection) {
        expectRejection(rejection, .unsupportedTag)
    }

    @Test(
        "unsupportedFloat",
        arguments: [
            Rejection("f90000", at: 0, "half 0.0"),
            Rejection("f93c00", at: 0, "half 1.0"),
            Rejection("fa47c35000", at: 0, "single 100000.0"),
            Rejection("fb3ff199999999999a", at: 0, "double 1.1"),
            Rejection("f9", at: 0, "half with no payload"),
            Rejection("a101fb7ff8000000000000", at: 2, "NaN as a map value"),
        ]
    )
    func unsupportedFloat(_ rejection: Rejection) {
        expectRejection(rejection, .unsupportedFloat)
    }

    @Test(
        "unsupportedSimpleValue",
        arguments: [
            Rejection("e0", at: 0, "simple(0)"),
            Rejection("f0", at: 0, "simple(16)"),
            Rejection("f3", at: 0, "simple(19)"),
            Rejection("f820", at: 0, "simple(32)"),
            Rejection("f8ff", at: 0, "simple(255)"),
            Rejection("8201f0", at: 2, "simple value inside an array"),
        ]
    )
    func unsupportedSimpleValue(_ rejection: Rejection) {
        expectRejection(rejection, .unsupportedSimpleValue)
    }

    @Test(
        "reservedAdditionalInfo",
        arguments: [
            Rejection("1c", at: 0, "major 0, 28"),
            Rejection("1d", at: 0, "major 0, 29"),
            Rejection("1e", at: 0, "major 0, 30"),
            Rejection("3c", at: 0, "major 1"),
            Rejection("5c", at: 0, "major 2"),
            Rejection("7d", at: 0, "major 3"),
            Rejection("9e", at: 0, "major 4"),
            Rejection("bc", at: 0, "major 5"),
            Rejection("dc", at: 0, "major 6"),
            Rejection("fc", at: 0, "major 7, 28"),
            Rejection("fd", at: 0, "major 7, 29"),
            Rejection("fe", at: 0, "major 7, 30"),
            Rejection("82011c", at: 2, "inside an array"),
        ]
    )
    func reservedAdditionalInfo(_ rejection: Rejection) {
        expectRejection(rejection, .reservedAdditionalInfo)
    }
}

@Suite("Decoder depth limit")
struct CBORDecoderDepthTests {
    /// `depth` containers of `open` nested inside each other, closed by `leaf`.
    private func nested(_ depth: Int, open: String, leaf: String) -> String {
        String(repeating: open, count: depth) + leaf
    }

    @Test("four nested arrays are accepted and a fifth is rejected")
    func arrays() throws {
        #expect(try CBORDecoder.decode(hex(self.nested(4, open: "81", leaf: "00"))) == [[[[0]]]])
        #expect(try CBORDecoder.decode(hex(self.nested(3, open: "81", leaf: "80"))) == [[[[]]]])
        expectRejection(Rejection(self.nested(4, open: "81", leaf: "80"), at: 4, "empty fifth array"), .depthExceeded)
        expectRejection(Rejection(self.nested(5, open: "81", leaf: "00"), at: 4, "fifth array"), .depthExceeded)
    }

    @Test("four nested maps are accepted and a fifth is rejected")
    func maps() throws {
        let fourDeep = try CBORDecoder.decode(hex(self.nested(4, open: "a101", leaf: "f6")))
        #expect(fourDeep == [1: [1: [1: [1: .null]]]])
        #expect(fourDeep[1]?[1]?[1]?[1] == .null)
        expectRejection(Rejection(self.nested(4, open: "a101", leaf: "a0"), at: 8, "fifth map"), .depthExceeded)
    }

    @Test("map keys count toward the depth")
    func keys() throws {
        // {1: {[[0]]: 1}} has an array at depth 4 inside a key.
        #expect(try CBORDecoder.decode(hex("a101a1818100" + "01")) == [1: [[[0]]: 1]])
        expectRejection(Rejection("a101a181818100" + "01", at: 5, "fifth level in a key"), .depthExceeded)
    }

    @Test("depth resets between siblings")
    func siblings() throws {
        let twoDeepBranches = "82" + "818181" + "00" + "818181" + "00"
        #expect(try CBORDecoder.decode(hex(twoDeepBranches)) == [[[[0]]], [[[0]]]])
    }

    @Test("maxDepth is adjustable", arguments: 0...6)
    func customDepth(_ maxDepth: Int) throws {
        for depth in 0...7 {
            let input = hex(self.nested(depth, open: "81", leaf: "01"))
            if depth <= maxDepth {
                #expect(throws: Never.self) { try CBORDecoder.decode(input, maxDepth: maxDepth) }
            } else {
                #expect(throws: CBORDecodingError(code: .depthExceeded, offset: maxDepth)) {
                    try CBORDecoder.decode(input, maxDepth: maxDepth)
                }
            }
        }
    }

    @Test("a very deep input fails fast without recursion")
    func veryDeep() {
        let input = [UInt8](repeating: 0x81, count: 100_000) + [0x00]
        #expect(throws: CBORDecodingError(code: .depthExceeded, offset: 4)) { try CBORDecoder.decode(input) }
        // Even with no practical limit the decoder keeps its own stack rather than the thread's.
        var current = try? CBORDecoder.decode(input, maxDepth: .max)
        var levels = 0
        // Walk and release one level at a time: the value's own deinit would recurse 100,000 levels deep.
        while case .array(let elements)? = current {
            levels += 1
            current = elements.first
        }
        #expect(levels == 100_000)
        #expect(current == 0)
    }
}

@Suite("Decoder acceptance")
struct CBORDecoderAcceptanceTests {
    @Test("unsorted map keys are accepted but not canonical")
    func unsortedKeys() throws {
        let unsorted = hex("a2" + "0302" + "0101")
        #expect(try CBORDecoder.decode(unsorted) == [1: 1, 3: 2])
        #expect(!CBORDecoder.isCanonical(unsorted))
        #expect(CBORDecoder.isCanonical(hex("a2" + "0101" + "0302")))
        #expect(!CBORDecoder.isCanonical(hex("1817")))
    }

    @Test("slices decode with offsets counted from the slice start")
    func slices() throws {
        let message = hex("01" + "a1" + "0102")
        #expect(try CBORDecoder.decode(message[1...]) == [1: 2])
        #expect(CBORDecoder.isCanonical(message[1...]))
        let bad = hex("04" + "a2" + "0102" + "0103")
        #expect(throws: CBORDecodingError(code: .duplicateMapKey, offset: 3)) {
            try CBORDecoder.decode(bad[1...])
        }
        #expect(throws: CBORDecodingError(code: .truncated, offset: 0)) {
            try CBORDecoder.decode(bad[1..<4])
        }
    }

    @Test("text strings keep their exact UTF-8 bytes")
    func textBytesPreserved() throws {
        let decomposed = hex("6365cc81")
        let value = try CBORDecoder.decode(decomposed)
        #expect(value.encoded() == decomposed)
        #expect(value.textValue.map { Array($0.utf8) } == [0x65, 0xcc, 0x81])
    }

    @Test("the largest valid scalars decode")
    func scalars() throws {
        #expect(try CBORDecoder.decode(hex("f4")).boolValue == false)
        #expect(try CBORDecoder.decode(hex("3bffffffffffffffff")).intValue == nil)
        #expect(try CBORDecoder.decode(hex("3b7fffffffffffffff")).intValue == Int.min)
        #expect(try CBORDecoder.decode(hex("64f48fbfbf")) == .textString("\u{10ffff}"))
        #expect(try CBORDecoder.decode(hex("63efbbbf")) == .textString("\u{feff}"))
    }

    @Test("errors describe their code and offset")
    func errorDescription() {
        let error = CBORDecodingError(code: .duplicateMapKey, offset: 12)
        #expect(error.description == "CBORDecodingError.duplicateMapKey at offset 12")
        #expect(error != CBORDecodingError(code: .duplicateMapKey, offset: 13))
    }
}

@Suite("Decoding a map as its entries")
struct CBORDecoderMapEntriesTests {
    /// decodeMapEntries against decode: the same error, or the same members (nil for a value that is not a map).
    private func expectAgreement(
        _ bytes: ArraySlice<UInt8>,
        maxDepth: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let whole = Result { () throws(CBORDecodingError) in try CBORDecoder.decode(bytes, maxDepth: maxDepth) }
        let entries = Result { () throws(CBORDecodingError) in
            try CBORDecoder.decodeMapEntries(bytes, maxDepth: maxDepth)
        }
        switch (whole, entries) {
        case (.failure(let a), .failure(let b)):
            #expect(a == b, "\(hexString(bytes)) at depth \(maxDepth)", sourceLocation: sourceLocation)
        case (.success(let value), .success(let members)):
            if let members {
                #expect(Set(members.map(\.key)).count == members.count, sourceLocation: sourceLocation)
                #expect(
                    value == .map(Dictionary(members, uniquingKeysWith: { a, _ in a })),
                    sourceLocation: sourceLocation
                )
            } else {
                #expect(value.mapValue == nil, "\(hexString(bytes))", sourceLocation: sourceLocation)
            }
        default:
            Issue.record(
                "disagree on \(hexString(bytes)) at depth \(maxDepth): \(whole) / \(entries)",
                sourceLocation: sourceLocation
            )
        }
    }

    @Test("a request's members come in wire order")
    func wireOrder() throws {
        let request = hex("a3" + "03" + "a1" + "627570" + "f4" + "01" + "63612e62" + "02" + "4104")
        let members = try #require(try CBORDecoder.decodeMapEntries(request[...]))
        #expect(members.map(\.key) == [3, 1, 2])
        #expect(members.map(\.value) == [["up": false], "a.b", .byteString([4])])
        #expect(try CBORDecoder.decodeMapEntries(hex("a0")[...])?.isEmpty == true)
        #expect(try CBORDecoder.decodeMapEntries(hex("8101")[...]) == nil)
    }

    @Test("duplicates, depth, truncation and trailing bytes are reported as decode reports them")
    func sameErrors() {
        var inputs = [
            "a2" + "0101" + "0102",  // duplicate integer key
            "a2" + "0101" + "01" + "18",  // duplicate key whose value is cut: the cut is reported, as by decode
            "a2" + "63" + "65cc81" + "00" + "62" + "c3a9" + "01",  // canonically equivalent text keys
            "a1" + "01" + "a1" + "a1" + "a1" + "0101",  // too deep for 4 but not for 5
            "a1" + "a1" + "0101" + "02",  // a map as a key
            "a1" + "0101" + "00",  // trailing byte
            "a3" + "0101",  // fewer entries than the head says
            "a1" + "01", "a1", "", "01", "81" + "a1" + "0101", "f6", "bf", "a1" + "ff",
        ]
        // More than 16 keys go through a set; a duplicate at the end and one at the start.
        let many = (0..<20).map { hexString([UInt8($0)]) + "00" }
        inputs.append("b4" + many.joined())
        inputs.append("b5" + many.joined() + "0500")
        inputs.append("b5" + "0000" + many.joined())
        for input in inputs {
            for depth in 0...5 { expectAgreement(hex(input)[...], maxDepth: depth) }
        }
    }

    @Test("mutations of a getAssertion request agree with decode")
    func mutations() {
        let request = hex(
            "a4" + "01" + "6b" + "6578616d706c652e636f6d" + "02" + "5820" + String(repeating: "11", count: 32)
                + "03" + "81" + "a2" + "626964" + "4401020304" + "6474797065" + "6a7075626c69632d6b6579"
                + "05" + "a1" + "627570" + "f4"
        )
        expectAgreement(request[...], maxDepth: 4)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            var bytes = request
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[index] = UInt8.random(in: 0...255, using: &generator)
                case 1: bytes.removeSubrange(index...)
                default: bytes.insert(bytes[index], at: index)
                }
                if bytes.isEmpty { break }
            }
            expectAgreement(bytes[...], maxDepth: Int.random(in: 1...4, using: &generator))
        }
    }
}
