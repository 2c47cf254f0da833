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
        var pid: pid_t = 0
        let words: [String] = ["sleep", "30"]
        var argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        // As fidosim run starts its program: no signal blocked (a test runner may block some).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var usr2 = sigset_t()
        sigemptyset(&usr2)
        sigaddset(&usr2, SIGUSR2)
        posix_spawnattr_setsigdefault(&attributes, &usr2)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        try #require(posix_spawnp(&pid, "sleep", nil, &attributes, &argv, environ) == 0)
        DeviceRunner.forwardSignals(to: pid)
        #expect(!DeviceRunner.stopping, "the program got the signal; its end stops the key")
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        #expect(status & 0x7F == SIGUSR2, "sleep ended by the signal that came before its pid was known")
        forwardedChild.store(0, ordering: .relaxed)
    }
}
