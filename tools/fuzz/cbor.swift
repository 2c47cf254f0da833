// libFuzzer target: the strict CBOR decoder on arbitrary bytes. Compiled together with Sources/CTAPCBOR.
// A decoded value must re-encode canonically and decode back to itself; decodeMapEntries must agree with decode.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCBOR(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    // Reading a request's map as entries must agree with decoding it whole: the same error, or the same members.
    let whole = Result { () throws(CBORDecodingError) in try CBORDecoder.decode(bytes) }
    let entries = Result { () throws(CBORDecodingError) in try CBORDecoder.decodeMapEntries(bytes[...]) }
    switch (whole, entries) {
    case (.failure(let a), .failure(let b)):
        precondition(a == b, "decodeMapEntries failed with \(b), decode with \(a)")
    case (.success(let value), .success(let members)):
        if let members {
            precondition(value == .map(Dictionary(uniqueKeysWithValues: members)), "decodeMapEntries differs")
        } else {
            precondition(value.mapValue == nil, "decodeMapEntries missed a map")
        }
    default:
        fatalError("decodeMapEntries and decode disagree on whether the input is well-formed")
    }
    guard case .success(let value) = whole else { return 0 }
    let encoded = value.encoded()
    guard let again = try? CBORDecoder.decode(encoded, maxDepth: 64) else {
        fatalError("a decoded value did not decode after re-encoding")
    }
    precondition(again == value, "round trip changed the value")
    return 0
}
