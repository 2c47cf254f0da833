import ArgumentParser
import Console
import ControlProtocol
import Dispatch
import HIDBridge
import Synchronization
import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run a program with a private security key: no root, no uhid.",
        discussion: """
            The key is a hidraw device (/dev/hidraw0, and one more for each --keys) in a umockdev testbed that only \
            PROGRAM and what it starts see; fidosim stops the key and exits with PROGRAM's status when PROGRAM ends. \
            SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR2 go to PROGRAM; SIGUSR1 power-cycles the key. Every option \
            of `serve` applies (presence defaults to approve: the key is seen only inside the tree). Needs Debian's \
            umockdev and libumockdev0. Programs it cannot reach: statically linked ones, those that make raw system \
            calls (Go), setuid programs, snap and flatpak apps, daemons started outside the tree.
            """
    )

    @OptionGroup var serve: Serve

    @Argument(
        parsing: .postTerminator,
        help: ArgumentHelp("The program and its arguments, after --.", valueName: "program")
    )
    var command: [String] = []

    func validate() throws {
        guard !command.isEmpty else {
            throw ValidationError("name the program after --: fidosim run -- PROGRAM [ARGS...]")
        }
        guard serve.transport.allSatisfy({ $0 == .privateHID }) else {
            throw ValidationError("fidosim run serves the private hidraw key: --transport is not for run")
        }
    }

    func run() throws {
        try PrivateKeySetup.runUnderPreload()
        DeviceRunner.installForwardingSignalHandlers()
        let session = try serve.start(forcing: .privateHID)
        guard let testbed = session.testbed else {
            printError("fidosim run: no testbed")
            throw Exit.failed
        }
        PrivateKeySetup.exportEnvironment(testbed)
        var extra: [String: JSONValue] = ["umockdevDir": .string(testbed.root)]
        if let path = serve.envFile {
            try PrivateKeySetup.writeEnvironment(testbed, to: path)
            extra["envFile"] = .string(path)
        }
        try session.writeReadyFile(serve.readyFile, extra: extra)
        guard !DeviceRunner.stopping else {
            testbed.close()
            throw ExitCode(130)
        }
        let child: pid_t
        switch Self.spawn(command) {
        case .success(let pid): child = pid
        case .failure(let error):
            let code = error.code
            printError("fidosim run: \(command[0]): \(String(cString: strerror(code)))")
            testbed.close()
            throw ExitCode(code == ENOENT ? 127 : 126)
        }
        DeviceRunner.forwardSignals(to: child)
        let status = Atomic<Int32>(-1)
        // The run loop owns this thread; another waits for the program and stops the loop when it ends.
        let waiter = DispatchQueue(label: "fidosim.run.wait")
        waiter.async {
            var raw: Int32 = 0
            while waitpid(child, &raw, 0) < 0 && errno == EINTR {}
            status.store(raw, ordering: .relaxed)
            DeviceRunner.requestStop()
        }
        // The terminal is PROGRAM's: prompts are answered through the control socket or a notification.
        session.runner(terminal: false).run()
        // A stop that did not come from the program's end (it cannot, with the handlers above) waits for it.
        while status.load(ordering: .relaxed) == -1 { usleep(10_000) }
        testbed.close()
        let raw = status.load(ordering: .relaxed)
        let code = raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
        if code != 0 { throw ExitCode(code) }
    }

    /// Starts `command` (searched in PATH) with this process's environment, its signal mask cleared.
    static func spawn(_ command: [String]) -> Result<pid_t, SpawnError> {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, command[0], nil, &attributes, &argv, environ)
        return result == 0 ? .success(pid) : .failure(SpawnError(code: result))
    }
}

/// Why a program did not start: posix_spawn's error number.
struct SpawnError: Error {
    var code: Int32
}
