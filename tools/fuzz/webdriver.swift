// libFuzzer target: what `fidosim webdriver` reads from a WebDriver client and from the driver. Compiled with the
// pure files of Sources/WebDriverFront (HTTPMessage, WebAuthnRoute, NewSession) over an instrumented ControlProtocol.
// The bytes go through the HTTP reader; a message that reads must write out and read back the same, its route
// (the WebAuthn extension commands, or the driver's) must be decided without trapping, and a New Session body the
// front adjusts must stay JSON.

package import ControlProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebDriver(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let parsed = try? HTTPMessage.parse(bytes) else { return 0 }
    let (message, used) = parsed
    precondition(used <= bytes.count, "the reader took more than it was given")
    guard let again = try? HTTPMessage.parse(message.bytes), again.1 == message.bytes.count else {
        fatalError("a message that read did not read back after writing")
    }
    precondition(again.0.startLine == message.startLine && again.0.body == message.body, "the round trip changed it")
    if let route = try? WebAuthnRoute.route(
        method: message.startLine[0],
        path: message.startLine[1],
        body: message.body
    ) {
        precondition(!route.session.isEmpty, "a route without its session")
    }
    if let adjusted = NewSession.adjusted(message.body) {
        precondition((try? JSONParser.parse(adjusted)) != nil, "an adjusted New Session body is not JSON")
    }
    _ = WebAuthnRoute.failure(
        WebAuthnRoute.refusal(code: "invalid-params", message: String(decoding: message.body, as: UTF8.self))
    )
    return 0
}
