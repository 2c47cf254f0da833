// libFuzzer target: the strict CBOR decoder on arbitrary bytes. Compiled together with Sources/CTAPCBOR.
// A decoded value must re-encode canonically and decode back to itself.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCBOR(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let value = try? CBORDecoder.decode(bytes) else { return 0 }
    let encoded = value.encoded()
    guard let again = try? CBORDecoder.decode(encoded, maxDepth: 64) else {
        fatalError("a decoded value did not decode after re-encoding")
    }
    precondition(again == value, "round trip changed the value")
    return 0
}
