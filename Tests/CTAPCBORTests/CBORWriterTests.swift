import CTAPCBOR
import Testing

@Suite("Writer")
struct CBORWriterTests {
    @Test("members written in canonical order give the encoder's bytes, after the prefix")
    func sameBytesAsTheEncoder() {
        for length in [0, 23, 24, 255, 256, 65_535, 65_536] {
            let blob = [UInt8](repeating: 0x5a, count: length)
            let text = String(repeating: "t", count: length)
            var writer = CBORWriter(prefix: [0x00])
            writer.mapHead(count: 4)
            writer.unsigned(1)
            writer.mapHead(count: 2)
            writer.textString("id")
            writer.byteString(blob)
            writer.textString("type")
            writer.textString(text)
            writer.unsigned(2)
            writer.unsigned(UInt64(length))
            writer.unsigned(24)
            writer.value(["name": "x", "id": .byteString([1]), "displayName": "y"])
            writer.unsigned(0x1_0000_0000)
            writer.byteString(blob[...].dropFirst(length / 2))
            let expected: CBORValue = [
                1: ["id": .byteString(blob), "type": .textString(text)],
                2: .unsigned(UInt64(length)),
                24: ["name": "x", "id": .byteString([1]), "displayName": "y"],
                0x1_0000_0000: .byteString(Array(blob.dropFirst(length / 2))),
            ]
            #expect(writer.bytes == [0x00] + expected.encoded(), "length \(length)")
            #expect(CBORDecoder.isCanonical(writer.bytes[1...]))
        }
    }
}
