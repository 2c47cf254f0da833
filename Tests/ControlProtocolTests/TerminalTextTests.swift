import ControlProtocol
import Testing

@Suite struct TerminalTextTests {
    @Test(arguments: [
        ("example.com", "example.com"),
        ("bücher.example", "bücher.example"),
        ("a\u{1B}]0;title\u{07}b", "a\\x1b]0;title\\x07b"),
        ("line\r\nnext\t", "line\\x0d\\x0anext\\x09"),
        ("del\u{7F} csi\u{9B}", "del\\x7f csi\\u{009b}"),
        ("\u{202E}fdp.exe", "\\u{202e}fdp.exe"),
        ("iso\u{2066}late\u{2069}", "iso\\u{2066}late\\u{2069}"),
        ("back\\slash", "back\\\\slash"),
    ])
    func escapes(input: String, printed: String) {
        #expect(TerminalText.escape(input) == printed)
    }
}

@Suite struct JSONTerminalSafetyTests {
    @Test func controlCharactersAndBidiOverridesAreEscapedInJSON() throws {
        let value = JSONValue.string("a\u{1B}[2Jb\u{9B}c\u{202E}d\u{85}é")
        #expect(value.encoded == #""a\u001b[2Jb\u009bc\u202ed\u0085é""#)
        #expect(try JSONParser.parse(Array(value.encoded.utf8)) == value)
    }
}
