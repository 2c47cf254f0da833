import CTAPCBOR
import Testing

@Suite struct HexTests {
    @Test func encodesBothCases() {
        #expect(Hex.string([0x00, 0x0F, 0xA5, 0xFF]) == "000fa5ff")
        #expect(Hex.string([0x00, 0x0F, 0xA5, 0xFF], uppercase: true) == "000FA5FF")
        #expect(Hex.string([]) == "")
    }

    @Test(arguments: [
        ("000fa5ff", [0x00, 0x0F, 0xA5, 0xFF] as [UInt8]?),
        ("000FA5Ff", [0x00, 0x0F, 0xA5, 0xFF]),
        ("", []),
        ("abc", nil),
        ("+f", nil),
        ("0g", nil),
        ("-1", nil),
        ("é0", nil),
    ])
    func decodes(text: String, bytes: [UInt8]?) {
        #expect(Hex.bytes(text) == bytes)
    }

    @Test func roundTrips() {
        let all = (0...255).map { UInt8($0) }
        #expect(Hex.bytes(Hex.string(all)) == all)
        #expect(Hex.bytes(Hex.string(all, uppercase: true)) == all)
    }
}
