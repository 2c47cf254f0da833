import SystemPackage
import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// Desktop notifications (freedesktop.org Notifications over the session's D-Bus) for touch requests, with a Touch
/// and a Deny action, through libnotify's `notify-send` (0.8: `--print-id --wait --action`): one child per request,
/// which prints the notification's id and then the key of the action the person chose, or only the id when the
/// notification was dismissed. A request answered another way closes its notification: SIGINT makes notify-send
/// close it and exit (SIGTERM would leave it on the screen, answering nobody).
package final class DesktopNotifier {
    struct Shown {
        var serial: Int
        var pid: pid_t
        var fd: Int32
        var output: [UInt8] = []
        var id: UInt32?
    }

    let notifySend: String
    /// coreutils' `stdbuf`: notify-send writes to a pipe only when it exits, unless its output is line-buffered.
    let stdbuf: String?
    var shown: [Shown] = []
    /// Children that were told to end, reaped when they have, killed when they have not by the deadline (a
    /// notify-send whose notification server went away waits for ever).
    var ending: [(pid: pid_t, deadline: Duration)] = []
    let clock = ContinuousClock()
    let start: ContinuousClock.Instant

    /// Nil when there is no `notify-send` or no session bus to show notifications on.
    init?(environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }) {
        guard Self.sessionBusReachable(environment: environment),
            let notifySend = Self.find("notify-send", path: environment("PATH"))
        else { return nil }
        self.notifySend = notifySend
        stdbuf = Self.find("stdbuf", path: environment("PATH"))
        start = clock.now
    }

    var now: Duration { clock.now - start }

    /// Whether notifications can be shown here (a session bus and notify-send).
    package static func isAvailable() -> Bool { DesktopNotifier() != nil }

    /// A session bus is named by DBUS_SESSION_BUS_ADDRESS, or is the user bus at $XDG_RUNTIME_DIR/bus.
    static func sessionBusReachable(environment: (String) -> String?) -> Bool {
        if let address = environment("DBUS_SESSION_BUS_ADDRESS"), !address.isEmpty { return true }
        guard let runtime = environment("XDG_RUNTIME_DIR"), !runtime.isEmpty else { return false }
        var info = stat()
        return stat(runtime + "/bus", &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK
    }

    static func find(_ program: String, path: String?) -> String? {
        for directory in (path ?? "/usr/bin:/bin").split(separator: ":") where !directory.isEmpty {
            let candidate = directory + "/" + program
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Shows a notification for request `serial`. The body is markup to notification servers: what a relying party
    /// sent (its id, the user's name) is escaped so that it shows as written, never as a link or a picture.
    func show(serial: Int, summary: String, body: String) {
        let arguments =
            (stdbuf.map { [$0, "-oL"] } ?? []) + [
                notifySend, "--app-name=fidosim", "--urgency=critical", "--icon=security-high", "--print-id", "--wait",
                "--action=touch=Touch", "--action=deny=Deny", "--", summary, Self.markupEscaped(body),
            ]
        guard let (pid, fd) = Self.spawn(arguments, captureOutput: true) else { return }
        shown.append(Shown(serial: serial, pid: pid, fd: fd))
    }

    /// Text shown as written by a notification server that reads its body as markup (the Desktop Notifications
    /// specification's subset of XML: `&`, `<` and `>` are entities).
    static func markupEscaped(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.append(character)
            }
        }
        return out
    }

    /// Closes the notification of request `serial` (answered elsewhere, timed out, or gone).
    func close(serial: Int) {
        guard let index = shown.firstIndex(where: { $0.serial == serial }) else { return }
        let entry = shown.remove(at: index)
        end(entry)
    }

    func closeAll() {
        for entry in shown { end(entry) }
        shown.removeAll()
        reap()
    }

    func end(_ entry: Shown) {
        kill(entry.pid, SIGINT)
        Glibc.close(entry.fd)
        ending.append((entry.pid, now + .seconds(5)))
    }

    func pollDescriptors() -> [pollfd] {
        reap()
        return shown.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
    }

    /// Reads what the children printed; returns the answers chosen on the desktop, by request serial.
    func service(_ fds: ArraySlice<pollfd>) -> [(Int, TerminalAnswer)] {
        var answers: [(Int, TerminalAnswer)] = []
        for event in fds where event.revents != 0 {
            guard let index = shown.firstIndex(where: { $0.fd == event.fd }) else { continue }
            var buffer = [UInt8](repeating: 0, count: 256)
            var closed = false
            do {
                let n = try buffer.withUnsafeMutableBytes { try FileDescriptor(rawValue: event.fd).read(into: $0) }
                closed = n == 0
                shown[index].output += buffer[0..<n]
                if shown[index].output.count > 4096 { shown[index].output.removeAll() }
            } catch {
                closed = (error as? Errno) != .resourceTemporarilyUnavailable
            }
            // The first line is the notification's id; the next is the action chosen.
            while let end = shown[index].output.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: shown[index].output[..<end], as: UTF8.self)
                shown[index].output.removeSubrange(...end)
                if shown[index].id == nil, let id = UInt32(line) {
                    shown[index].id = id
                } else if line == "touch" || line == "deny" {
                    answers.append((shown[index].serial, line == "touch" ? .touch : .refuse))
                    closed = true
                }
            }
            if closed {
                // Dismissed without an answer, or answered: the terminal's question still stands in the first case.
                let entry = shown.remove(at: index)
                Glibc.close(entry.fd)
                ending.append((entry.pid, now + .seconds(5)))
            }
        }
        reap()
        return answers
    }

    func reap() {
        let time = now
        ending.removeAll { child in
            var status: Int32 = 0
            if waitpid(child.pid, &status, WNOHANG) != 0 { return true }
            if time >= child.deadline { kill(child.pid, SIGKILL) }
            return false
        }
    }

    /// Starts `arguments[0]` with standard input from /dev/null and, when asked, standard output into a pipe whose
    /// read end (non-blocking) is returned.
    static func spawn(_ arguments: [String], captureOutput: Bool) -> (pid_t, Int32)? {
        var pipeEnds: [Int32] = [-1, -1]
        if captureOutput {
            guard pipe(&pipeEnds) == 0 else { return nil }
            for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            _ = fcntl(pipeEnds[0], F_SETFL, O_NONBLOCK)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        if captureOutput {
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], STDOUT_FILENO)
        } else {
            posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0)
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, arguments[0], &actions, nil, argv, environ)
        if captureOutput { Glibc.close(pipeEnds[1]) }
        guard result == 0 else {
            if captureOutput { Glibc.close(pipeEnds[0]) }
            return nil
        }
        return (pid, captureOutput ? pipeEnds[0] : -1)
    }
}
