import Testing

@testable import HIDBridge

#if canImport(Glibc)
import Glibc
#endif

@Suite struct BridgeTransportTests {
    @Test func boardIDsAreHexVIDPID() {
        #expect(HIDAPITransport.parseVIDPID("1209:0001")! == (0x1209, 0x0001))
        #expect(HIDAPITransport.parseVIDPID("ffff:F1D0")! == (0xFFFF, 0xF1D0))
        for bad in ["", "1209", "1209:", ":0001", "12345:1", "1209:0001:2", "g209:0001", "/dev/hidraw0"] {
            #expect(HIDAPITransport.parseVIDPID(bad) == nil, "\(bad)")
        }
    }

    @Test func aMissingBoardIsAClearError() {
        #expect {
            _ = try HIDAPITransport(device: "1209:fffd")
        } throws: { error in
            (error as? TransportError)?.description.contains("no HID device 1209:fffd") == true
        }
    }
}
