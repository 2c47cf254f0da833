import Synchronization
import Testing

@testable import HIDBridge

#if canImport(Glibc)
import Glibc
#endif

/// `fidosim run`'s signals: one that comes while the program is being started (after the run last looked, before its
/// pid was known) still reaches the program, and the key serves on until the program ends. (It used to stop the run
/// without reaching the program, which then held the run's end: a SIGTERM right after the ready file, in
/// test_private_key.py, waited for `sleep 60`.)
@Suite(.serialized) struct RunSignalTests {
    @Test func aSignalBeforeTheProgramsPidIsKnownReachesTheProgram() throws {
        DeviceRunner.signalForProgram(SIGUSR2)
        #expect(DeviceRunner.stopping, "before the program starts, a signal stops the run")
        // As fidosim run starts its program; SIGUSR2 at its default too (a test runner may ignore it).
        let pid = try DeviceRunner.spawnProgram(["sleep", "30"], defaultSignals: [SIGPIPE, SIGUSR2]).get()
        DeviceRunner.forwardSignals(to: pid)
        #expect(!DeviceRunner.stopping, "the program got the signal; its end stops the key")
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        #expect(status & 0x7F == SIGUSR2, "sleep ended by the signal that came before its pid was known")
        forwardedChild.store(0, ordering: .relaxed)
    }
}
