import ControlProtocol
import Testing

@testable import WebDriverFront

/// The WebDriver front's pure half: HTTP messages read and written, and which requests it answers itself.
@Suite struct WebDriverFrontTests {
    let add = Array(
        "POST /session/s1/webauthn/authenticator HTTP/1.1\r\nHost: x\r\nContent-Length: 27\r\n\r\n{\"hasResidentKey\": true}   "
            .utf8
    )

    @Test func aRequestIsReadOnceWholeAndWrittenWithItsLength() throws {
        #expect(try HTTPMessage.parse(Array(add.prefix(40))) == nil)
        #expect(try HTTPMessage.parse(Array(add.dropLast(3))) == nil)
        let parsed = try #require(try HTTPMessage.parse(add + Array("GET".utf8)))
        #expect(parsed.1 == add.count)
        let message = parsed.0
        #expect(message.startLine == ["POST", "/session/s1/webauthn/authenticator", "HTTP/1.1"])
        #expect(message.header("content-length") == "27" && message.header("HOST") == "x")
        #expect(message.body.count == 27)
        let written = String(decoding: message.bytes, as: UTF8.self)
        #expect(written.hasPrefix("POST /session/s1/webauthn/authenticator HTTP/1.1\r\nHost: x\r\n"))
        #expect(written.contains("Content-Length: 27\r\nConnection: close\r\n\r\n{"))
    }

    @Test(arguments: [
        ("Host: 127.0.0.1:4444", true), ("Host: localhost:4444", true), ("Host: [::1]:4444", true),
        ("Host: LOCALHOST:4444", true), ("Host: 127.0.0.1:4445", false), ("Host: evil.example:4444", false),
        ("Host: 127.0.0.1", false), ("X-Other: 1", false),
        ("Host: 127.0.0.1:4444\r\nOrigin: https://evil.example", false),
        ("Host: 127.0.0.1:4444\r\nOrigin: null", false),
    ])
    func aBrowserPagesRequestIsNoClients(headers: String, client: Bool) throws {
        let bytes = Array("POST /session HTTP/1.1\r\n\(headers)\r\nContent-Length: 0\r\n\r\n".utf8)
        let message = try #require(try HTTPMessage.parse(bytes)).0
        #expect((message.browserRefusal(port: 4444) == nil) == client, "\(headers)")
    }

    @Test func aClientNamesNoFile() {
        #expect(WebDriverFront.fileRefusal([:]) == nil)
        #expect(WebDriverFront.fileRefusal(["flash": "memory", "profile": "yubikey5"]) == nil)
        #expect(
            WebDriverFront.fileRefusal(["flash": "/root/.local/share/fidosim/default.img"])?.error == "invalid argument"
        )
        #expect(WebDriverFront.fileRefusal(["profile": "/tmp/fifo"])?.error == "invalid argument")
        #expect(WebDriverFront.fileRefusal(["profile": 3])?.error == "invalid argument")
    }

    @Test func badMessagesAreRefusedNotGuessed() {
        #expect(throws: HTTPMessage.ParseError.self) { try HTTPMessage.parse(Array("NOSPACES\r\n\r\n".utf8)) }
        #expect(throws: HTTPMessage.ParseError.self) {
            try HTTPMessage.parse(Array("GET / HTTP/1.1\r\nno colon\r\n\r\n".utf8))
        }
        #expect(throws: HTTPMessage.ParseError.self) {
            try HTTPMessage.parse(Array("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        }
        #expect(throws: HTTPMessage.ParseError.self) {
            try HTTPMessage.parse(Array("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n".utf8))
        }
        #expect(throws: HTTPMessage.ParseError.self) {
            try HTTPMessage.parse(Array("POST / HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n".utf8))
        }
        #expect(throws: HTTPMessage.ParseError.self) {
            try HTTPMessage.parse([UInt8](repeating: 65, count: HTTPMessage.maxHead + 1))
        }
    }

    func route(_ method: String, _ path: String, _ body: String = "") throws -> WebAuthnRoute? {
        try WebAuthnRoute.route(method: method, path: path, body: Array(body.utf8))
    }

    @Test func theWebAuthnCommandsAreTheFrontsAndTheRestTheDrivers() throws {
        #expect(
            try route("POST", "/session/s/webauthn/authenticator", #"{"protocol":"ctap2","transport":"usb"}"#)
                == .addAuthenticator(session: "s", options: ["protocol": "ctap2", "transport": "usb"])
        )
        #expect(
            try route("DELETE", "/session/s/webauthn/authenticator/a") == .removeAuthenticator(session: "s", id: "a")
        )
        // Selenium repeats the authenticator's id in the body; a credential's own id stays.
        #expect(
            try route(
                "POST",
                "/session/s/webauthn/authenticator/a/credential",
                #"{"authenticatorId":"a","credentialId":"AQ","isResidentCredential":false,"rpId":"r","privateKey":"k","signCount":0}"#
            )
                == .addCredential(
                    session: "s",
                    id: "a",
                    credential: [
                        "credentialId": "AQ", "isResidentCredential": false, "rpId": "r", "privateKey": "k",
                        "signCount": 0,
                    ]
                )
        )
        #expect(
            try route("GET", "/session/s/webauthn/authenticator/a/credentials")
                == .getCredentials(session: "s", id: "a")
        )
        #expect(
            try route("DELETE", "/session/s/webauthn/authenticator/a/credentials/AQ")
                == .removeCredential(session: "s", id: "a", credentialId: "AQ")
        )
        #expect(
            try route("DELETE", "/session/s/webauthn/authenticator/a/credentials")
                == .removeAllCredentials(session: "s", id: "a")
        )
        #expect(
            try route("POST", "/session/s/webauthn/authenticator/a/uv", #"{"isUserVerified":false}"#)
                == .setUserVerified(session: "s", id: "a", verified: false)
        )
        #expect(
            try route(
                "POST",
                "/session/s/webauthn/authenticator/a/credentials/AQ/props",
                #"{"backupState":true,"credentialId":"AQ"}"#
            )
                == .setCredentialProperties(
                    session: "s",
                    id: "a",
                    credentialId: "AQ",
                    properties: ["backupState": true]
                )
        )
        #expect(try route("DELETE", "/session/s") == .deleteSession(session: "s"))
        #expect(try route("POST", "/session") == nil)
        #expect(try route("POST", "/session/s/url", #"{"url":"x"}"#) == nil)
        #expect(try route("GET", "/status") == nil)
    }

    /// Add Virtual Authenticator's and Add Credential's parameters, checked as the specification's algorithms and
    /// chromedriver check them: each body is invalid argument (400).
    @Test(arguments: [
        ("authenticator", #"{}"#),
        ("authenticator", #"{"transport":"usb"}"#),
        ("authenticator", #"{"protocol":"ctap2"}"#),
        ("authenticator", #"{"protocol":null,"transport":"usb"}"#),
        ("authenticator", #"{"protocol":"ctap2","transport":null}"#),
        ("authenticator", #"{"protocol":"ctap3","transport":"usb"}"#),
        ("authenticator", #"{"protocol":"ctap2","transport":"ble"}"#),
        ("authenticator", #"{"protocol":"ctap2","transport":"hybrid"}"#),
        ("authenticator", #"{"protocol":"ctap2","transport":"smart-card"}"#),
        ("authenticator", #"{"protocol":"ctap2","transport":"usb","hasResidentKey":"yes"}"#),
        ("authenticator", #"{"protocol":"ctap2","transport":"usb","extensions":"prf"}"#),
        ("authenticator", #"{"protocol":"ctap2","transport":"usb","extensions":[1]}"#),
        ("authenticator/a/credential", #"{"isResidentCredential":false,"rpId":"r","privateKey":"k","signCount":0}"#),
        ("authenticator/a/credential", #"{"credentialId":"AQ","rpId":"r","privateKey":"k","signCount":0}"#),
        (
            "authenticator/a/credential",
            #"{"credentialId":"AQ","isResidentCredential":false,"rpId":"r","privateKey":"k"}"#
        ),
        (
            "authenticator/a/credential",
            #"{"credentialId":"AQ","isResidentCredential":false,"rpId":"r","privateKey":"k","signCount":"1"}"#
        ),
        (
            "authenticator/a/credential",
            #"{"credentialId":"AQ","isResidentCredential":true,"rpId":"r","privateKey":"k","signCount":0}"#
        ),
        ("authenticator/a/credential", #"{"credentialId":"AQ","isResidentCredential":false,"rpId":"r","signCount":0}"#),
    ])
    func argumentsAreCheckedAsTheSpecificationDoes(path: String, body: String) {
        do throws(WebAuthnRoute.Refusal) {
            _ = try WebAuthnRoute.route(method: "POST", path: "/session/s/webauthn/" + path, body: Array(body.utf8))
            Issue.record("\(body) was taken")
        } catch {
            #expect(error.error == "invalid argument" && WebAuthnRoute.failure(error).status == 400, "\(body)")
        }
    }

    @Test func aCredentialWithoutACounterIsTaken() throws {
        let body = #"{"credentialId":"AQ","isResidentCredential":false,"rpId":"r","privateKey":"k","signCount":null}"#
        #expect(
            try route("POST", "/session/s/webauthn/authenticator/a/credential", body)
                == .addCredential(
                    session: "s",
                    id: "a",
                    credential: [
                        "credentialId": "AQ", "isResidentCredential": false, "rpId": "r", "privateKey": "k",
                        "signCount": .null,
                    ]
                )
        )
    }

    @Test func aTransportAUSBKeyCannotBeIsRefusedForThatReason() {
        #expect(
            throws: WebAuthnRoute.Refusal(
                error: "invalid argument",
                message:
                    "a fidosim key is a USB security key, which cannot be ble (usb; nfc and internal are served as usb)"
            )
        ) {
            try route("POST", "/session/s/webauthn/authenticator", #"{"protocol":"ctap2","transport":"ble"}"#)
        }
    }

    @Test func badWebAuthnRequestsAreWebDriverErrors() {
        #expect(throws: WebAuthnRoute.Refusal.self) { try route("POST", "/session/s/webauthn/authenticator", "[1]") }
        #expect(throws: WebAuthnRoute.Refusal.self) { try route("POST", "/session/s/webauthn/authenticator", "{") }
        #expect(throws: WebAuthnRoute.Refusal.self) {
            try route("POST", "/session/s/webauthn/authenticator/a/uv", #"{"isUserVerified":"yes"}"#)
        }
        #expect(throws: WebAuthnRoute.Refusal.self) { try route("PUT", "/session/s/webauthn/authenticator/a/x/y/z") }
        let (status, body) = WebAuthnRoute.failure(WebAuthnRoute.refusal(code: "not-found", message: "no such"))
        #expect(status == 400 && body.contains(#""error":"invalid argument""#))
        #expect(WebAuthnRoute.refusal(code: "failed", message: "m").error == "unknown error")
    }
}

@Suite struct NewSessionTests {
    func args(_ body: [UInt8]?, _ path: [String]) throws -> [String] {
        var value = try JSONParser.parse(try #require(body))
        for key in path { value = try #require(value[key]) }
        return (value["args"]?.arrayValue ?? []).compactMap(\.stringValue)
    }

    @Test func chromiumGetsItsNetworkServiceInProcess() throws {
        let selenium = Array(
            #"{"capabilities":{"firstMatch":[{}],"alwaysMatch":{"browserName":"chrome","goog:chromeOptions":{"args":["--headless=new"],"binary":"/usr/bin/chromium"}}}}"#
                .utf8
        )
        let adjusted = NewSession.adjusted(selenium)
        #expect(
            try args(adjusted, ["capabilities", "alwaysMatch", "goog:chromeOptions"])
                == ["--headless=new", "--enable-features=NetworkServiceInProcess2"]
        )
        let value = try JSONParser.parse(try #require(adjusted))
        #expect(value["capabilities"]?["alwaysMatch"]?["goog:chromeOptions"]?["binary"] == "/usr/bin/chromium")
    }

    @Test func theTestsOwnFeaturesAreKept() throws {
        let body = Array(
            #"{"capabilities":{"alwaysMatch":{"goog:chromeOptions":{"args":["--enable-features=A,B"]}}}}"#.utf8
        )
        #expect(
            try args(NewSession.adjusted(body), ["capabilities", "alwaysMatch", "goog:chromeOptions"])
                == ["--enable-features=A,B,NetworkServiceInProcess2"]
        )
        let firstMatch = Array(
            #"{"capabilities":{"firstMatch":[{"goog:chromeOptions":{"args":[]}},{"browserName":"x"}]}}"#.utf8
        )
        let adjusted = try JSONParser.parse(try #require(NewSession.adjusted(firstMatch)))
        let first = try #require(adjusted["capabilities"]?["firstMatch"]?.arrayValue)
        #expect(first[0]["goog:chromeOptions"]?["args"] == .array(["--enable-features=NetworkServiceInProcess2"]))
        #expect(first[1] == ["browserName": "x"])
    }

    @Test func otherBodiesGoOnUnchanged() {
        #expect(NewSession.adjusted(Array("not json".utf8)) == nil)
        #expect(NewSession.adjusted(Array(#"{"desiredCapabilities":{}}"#.utf8)) == nil)
    }
}
