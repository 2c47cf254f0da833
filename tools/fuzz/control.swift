// libFuzzer target: the control socket's input path. Compiled together with Sources/ControlProtocol.
// The bytes go through the line splitter (with a small limit so over-long lines happen), each line through the
// request parser; a line that is JSON must re-encode and parse back to the same value, and the credential-file
// readers must accept or refuse any JSON without trapping.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControl(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var buffer = ControlLineBuffer(maxLineLength: 4096)
    // Feed in two pieces so that lines cross reads.
    let cut = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
    let items = buffer.append(bytes[..<cut]) + buffer.append(bytes[cut...])
    for item in items {
        guard case .line(let line) = item else { continue }
        precondition(line.count <= 4096, "a line over the limit came through")
        switch ControlRequest.parse(line) {
        case .success(let request):
            precondition(request.id.stringValue != nil || request.id.integerValue != nil, "a request without an id")
        case .failure(let failure):
            precondition(!failure.error.message.isEmpty, "an error without a message")
            _ = ControlMessage.failure(id: failure.id, error: failure.error)
        }
        guard let value = try? JSONParser.parse(line) else { continue }
        guard let again = try? JSONParser.parse(value.encoded) else {
            fatalError("a parsed value did not parse after encoding: \(value.encoded)")
        }
        precondition(again == value, "the round trip changed the value")
        precondition((try? JSONParser.parse(value.prettyEncoded)) == value, "the pretty form differs")
        _ = try? CredentialExchange.webDriverCredentials(fromCXF: value)
        _ = try? CredentialExchange.webDriverCredentials(fromFile: value)
        _ = CredentialExchange.cxf(from: value.arrayValue ?? [value], accountId: [1, 2, 3], timestamp: 0)
    }
    return 0
}
