#if canImport(Glibc)
import Glibc
#endif

/// A command a rig gives for acting on a key (`--touch-command`, `--replug-command`, `--uhubctl`), run in a process
/// group of its own, so that stopping it stops whatever it started. Its standard input is /dev/null and its output
/// goes to standard error: standard output stays the runner's. Its environment is the runner's without the owner's
/// PIN (`FIDOSIM_PIN`): a rig's command has no use for it.
struct ShellCommand {
    let pid: pid_t
    let describe: String

    /// `sh -c TEXT`, with `{what}` replaced by `what` quoted for the shell, and `what` also in FIDOSIM_WHAT.
    static func shell(_ text: String, what: String) throws(CheckFailure) -> ShellCommand {
        let quoted = "'" + what.replacing("'", with: "'\\''") + "'"
        return try start(["/bin/sh", "-c", text.replacing("{what}", with: quoted)], what: what, describe: text)
    }

    /// `arguments[0]` found on PATH, without a shell.
    static func start(_ arguments: [String], what: String, describe: String) throws(CheckFailure) -> ShellCommand {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        var environment: [String] = []
        var entry = environ
        while let pointer = entry.pointee {
            let line = String(cString: pointer)
            if !line.hasPrefix("FIDOSIM_WHAT=") && !line.hasPrefix("FIDOSIM_PIN=") { environment.append(line) }
            entry += 1
        }
        environment.append("FIDOSIM_WHAT=\(what)")
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) }
        envp.append(nil)
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw CheckFailure("cannot run \(describe): \(String(cString: strerror(result)))")
        }
        return ShellCommand(pid: pid, describe: describe)
    }

    /// Waits up to `seconds` for the command to end; its exit status, or nil (and it is stopped) when it did not.
    func wait(seconds: Int) -> Int32? {
        for _ in 0..<(seconds * 20) {
            if let status = exitStatus(blocking: false) { return status }
            sleepMs(50)
        }
        stop()
        return nil
    }

    /// The exit status once the command has ended (128 + the signal for one killed by a signal).
    func exitStatus(blocking: Bool) -> Int32? {
        var status: Int32 = 0
        let result = waitpid(pid, &status, blocking ? 0 : WNOHANG)
        guard result == pid else { return result < 0 ? -1 : nil }
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }

    /// Stops the command and what it started (SIGTERM to its process group), and collects it.
    func stop() {
        guard exitStatus(blocking: false) == nil else { return }
        kill(-pid, SIGTERM)
        for _ in 0..<40 {
            if exitStatus(blocking: false) != nil { return }
            sleepMs(25)
        }
        kill(-pid, SIGKILL)
        _ = exitStatus(blocking: true)
    }
}
