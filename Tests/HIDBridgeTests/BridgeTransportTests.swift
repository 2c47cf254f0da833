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

    /// 32 reports go at once; each one after them waits about a millisecond (a USB full-speed endpoint's pace).
    @Test func thePacerLetsABurstThroughThenOnePerMillisecond() {
        var pacer = ReportPacer(burst: 32, intervalNs: 1_000_000)
        let start = ReportPacer.nowNs()
        for _ in 0..<42 { pacer.wait() }
        #expect(ReportPacer.nowNs() - start >= 9_000_000)
    }
}
