import ControlProtocol
import Testing

/// What `fidosim ctl` prints for a person, from the JSON a key answers.
@Suite struct ControlTextTests {
    @Test func anEventIsOneEscapedLine() throws {
        let event = try JSONParser.parse(
            Array(
                #"{"event":"request","command":"getAssertion","rpId":"evil\u001b]0;x\u0007.example","status":"ok","injected":true}"#
                    .utf8
            )
        )
        #expect(ControlText.event(event) == "request getAssertion evil\\x1b]0;x\\x07.example ok (injected)")
    }

    @Test func credentialsAreATable() throws {
        #expect(
            ControlText.result(command: "getCredentials", try JSONParser.parse(Array(#"{"credentials":[]}"#.utf8)))
                == "no credentials"
        )
        let one = try JSONParser.parse(
            Array(
                #"{"credentials":[{"isResidentCredential":true,"algorithm":"ES256","signCount":3,"rpId":"example.com","userName":"alice","credentialId":"AbC"}]}"#
                    .utf8
            )
        )
        let lines = ControlText.result(command: "getCredentials", one).split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0].hasPrefix("RESIDENT  ALG"))
        #expect(
            lines[1].split(separator: " ", omittingEmptySubsequences: true) == [
                "yes", "ES256", "3", "example.com", "alice", "AbC",
            ]
        )
    }

    @Test func otherResultsAreNameValueLines() throws {
        let result = try JSONParser.parse(Array(#"{"b":2,"a":"x\u0007"}"#.utf8))
        #expect(ControlText.result(command: "presence", result) == "a: x\\x07\nb: 2")
        #expect(ControlText.result(command: "presence", try JSONParser.parse(Array("{}".utf8))) == "ok")
    }

    @Test func theStatusSaysWhatWaits() throws {
        let status = try JSONParser.parse(
            Array(
                #"{"transport":"udp 127.0.0.1:8111","presence":"prompt","pending":{"command":"makeCredential","rpId":"example.com","gesture":"touch"}}"#
                    .utf8
            )
        )
        let text = ControlText.result(command: "status", status)
        #expect(text.contains("transport:   udp 127.0.0.1:8111"))
        #expect(text.contains("pending:     makeCredential for example.com, waiting for a touch"))
    }
}
