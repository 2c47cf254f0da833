import ControlProtocol
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import HIDBridge

@Suite struct ControlServerTests {
    @Test func aPeerWhoseCredentialsCannotBeReadIsRefused() {
        #expect(ControlServer.refusal(peerUID: nil, serverUID: 1000)?.code == .permissionDenied)
        #expect(ControlServer.refusal(peerUID: 1001, serverUID: 1000)?.code == .permissionDenied)
        #expect(ControlServer.refusal(peerUID: 1000, serverUID: 1000) == nil)
    }

    @Test func peerCredentialsOfSomethingThatIsNotASocketCannotBeRead() {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { for end in ends { close(end) } }
        #expect(ControlServer.peerUID(ends[0]) == nil)
    }

    @Test func theClientLimitLeavesDescriptorsForTheKey() {
        #expect((1...64).contains(ControlServer.maxClients))
    }
}
