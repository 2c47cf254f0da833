import ControlProtocol
import Testing

@testable import HIDBridge

#if canImport(Glibc)
import Glibc
#endif

@Suite struct ControlServerTests {
    @Test func aPeerWhoseCredentialsCannotBeReadIsRefused() {
        #expect(ControlServer.refusal(peerUID: nil, serverUID: 1000)?.code == .permissionDenied)
        #expect(ControlServer.refusal(peerUID: 1001, serverUID: 1000)?.code == .permissionDenied)
        #expect(ControlServer.refusal(peerUID: 1000, serverUID: 1000) == nil)
        #expect(ControlServer.refusal(peerUID: 0, serverUID: 1000) == nil)  // root reads the key's memory anyway
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

@Suite struct ControlServerAdmissionTests {
    func connect(_ path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        let connected = ControlServer.withAddress(path) { Glibc.connect(fd, $0, $1) }
        #expect(connected == 0)
        return fd
    }

    func read(_ fd: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : ""
    }

    @Test func aFullServerRefusesNewcomersUntilAClientHasBeenIdleAMinute() throws {
        var template = Array("/tmp/fidosim-control-XXXXXX".utf8CString)
        let directory = try #require(mkdtemp(&template).map { String(cString: $0) })
        let server = try ControlServer(path: directory + "/key.sock")
        // Accepted as they come: the listen backlog is shorter than the limit.
        var clients: [Int32] = []
        defer { for fd in clients { close(fd) } }
        for _ in 0..<ControlServer.maxClients {
            clients.append(connect(server.path))
            server.acceptClients()
        }
        #expect(server.clients.filter { !$0.closeAfterWrite }.count == ControlServer.maxClients)

        clients.append(connect(server.path))
        server.acceptClients()
        #expect(server.clients.last?.closeAfterWrite == true)
        #expect(read(clients.last!).contains("too many control connections"))

        // A minute later the client idle longest (the first) makes room for the next one.
        server.skipped = ControlServer.idleLimit
        clients.append(connect(server.path))
        server.acceptClients()
        #expect(server.clients.last?.closeAfterWrite == false)
        #expect(server.clients.first?.closeAfterWrite == true)
        #expect(read(clients[0]).contains("closed: idle while another client needed the place"))
    }
}
