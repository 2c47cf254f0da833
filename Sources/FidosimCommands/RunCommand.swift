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
            umockdev and libumockdev0. Standard output is PROGRAM's: fidosim's own lines (the start line, warnings; \
            each request's line with --log-level info) go to standard error. Programs it cannot reach: statically linked ones, those that make raw system \
            calls (Go), setuid programs, snap and flatpak apps, daemons started outside the tree.
            """
    )

    @OptionGroup var serve: ServeOptions

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
        try Self.runInTree(serve: serve, command: command)
    }

    /// fidosim run's steps, which `fidosim webdriver` shares: the keys in a private tree, PROGRAM started in it, the
    /// loop until PROGRAM ends. `started` runs on a thread of its own once PROGRAM has started, with what the ready
    /// file says; the ready file is written before PROGRAM starts unless `started` writes it (`readyLater`).
    static func runInTree(
        serve: ServeOptions,
        command: [String],
        readyExtra: [String: JSONValue] = [:],
        readyLater: Bool = false,
        started: (@Sendable (JSONValue) -> Void)? = nil
    ) throws {
        try PrivateKeySetup.runUnderPreload()
        // Standard output is PROGRAM's alone: fidosim's lines go to standard error, requests are not logged unless
        // --log-level asks for them.
        Console.leaveStandardOutputToProgram()
        DeviceRunner.installForwardingSignalHandlers()
        let session = try serve.start(forcing: .privateHID, quietLog: true)
        guard let testbed = session.testbed else {
            printError("fidosim run: no testbed")
            throw Exit.failed
        }
        PrivateKeySetup.exportEnvironment(testbed)
        var extra: [String: JSONValue] = readyExtra
        extra["umockdevDir"] = .string(testbed.root)
        if let path = serve.envFile {
            try PrivateKeySetup.writeEnvironment(testbed, to: path)
            extra["envFile"] = .string(path)
        }
        if !readyLater { try session.writeReadyFile(serve.readyFile, extra: extra) }
        guard !DeviceRunner.stopping else {
            testbed.close()
            throw ExitCode(130)
        }
        let child: pid_t
        switch DeviceRunner.spawnProgram(command) {
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
        if let started {
            let record = session.readyRecord(extra: extra)
            DispatchQueue(label: "fidosim.run.started").async { started(record) }
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
}
