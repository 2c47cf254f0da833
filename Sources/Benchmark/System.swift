#if canImport(FoundationEssentials)
import FoundationEssentials  // not Foundation: it would load ICU (about 7 MiB resident) into every fidosim process
#else
import Foundation
#endif

#if canImport(Glibc)
import CProcessControl
import Glibc
#endif

/// The machine's CPU time counters (the first line of /proc/stat, in clock ticks).
struct CPUTimes {
    var total: Int
    var steal: Int

    static func now() -> CPUTimes? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return nil }
        let fields = line.split(separator: " ").dropFirst().compactMap { Int($0) }
        // user nice system idle iowait irq softirq steal (guest time is already counted in user and nice).
        guard fields.count >= 8 else { return nil }
        return CPUTimes(total: fields.prefix(8).reduce(0, +), steal: fields[7])
    }

    /// The share of all CPU time since `start` that was stolen: a busy host running other virtual machines
    /// on this one's CPUs, which makes wake-ups and the UDP rows slow and uneven.
    func stolenShare(since start: CPUTimes) -> Double? {
        let total = total - start.total
        return total > 0 ? Double(steal - start.steal) / Double(total) : nil
    }
}

/// CPU affinity of processes (Linux).
enum CPUAffinity {
    /// The CPUs the calling process may run on now; nil when the kernel does not say.
    static func current() -> fidosim_cpu_mask? {
        var mask = fidosim_cpu_mask()
        return fidosim_get_affinity(0, &mask) == 0 ? mask : nil
    }

    /// The CPU numbers in `mask`, ascending.
    static func cpus(_ mask: fidosim_cpu_mask) -> [Int] {
        withUnsafeBytes(of: mask.bits) { raw in
            let words = raw.bindMemory(to: UInt.self)
            return words.indices.flatMap { w in
                (0..<UInt.bitWidth).filter { words[w] & (1 << $0) != 0 }.map { w * UInt.bitWidth + $0 }
            }
        }
    }

    /// Lets process `pid` (0: this one) run on `cpu` only.
    static func pin(_ pid: Int32, to cpu: Int) -> Bool {
        var mask = fidosim_cpu_mask()
        withUnsafeMutableBytes(of: &mask.bits) { raw in
            raw.bindMemory(to: UInt.self)[cpu / UInt.bitWidth] |= 1 << (cpu % UInt.bitWidth)
        }
        return fidosim_set_affinity(pid, &mask) == 0
    }
}

/// This executable run again as a child (`fidosim serve`), its standard output to /dev/null.
struct ChildProcess {
    let pid: pid_t

    init(arguments: [String]) throws {
        let path = Self.executablePath()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for arg in argv { free(arg) } }
        var child = pid_t()
        let status = posix_spawn(&child, path, &actions, nil, argv, environ)
        guard status == 0 else {
            throw BenchError(description: "cannot start \(path): \(String(cString: strerror(status)))")
        }
        pid = child
    }

    /// The running executable, through /proc (argv[0] may be a bare name found on PATH).
    static func executablePath() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        return n > 0
            ? String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
    }

    /// Runs this executable with `arguments` to its end: its exit status and what it wrote to standard output
    /// (standard error goes where this process's goes).
    static func output(arguments: [String]) throws -> (status: Int32, output: String) {
        var pipe: [Int32] = [0, 0]
        guard Glibc.pipe(&pipe) == 0 else { throw BenchError(description: "cannot make a pipe") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipe[1], STDOUT_FILENO)
        posix_spawn_file_actions_addclose(&actions, pipe[0])
        let path = executablePath()
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for arg in argv { free(arg) } }
        var child = pid_t()
        let started = posix_spawn(&child, path, &actions, nil, argv, environ)
        close(pipe[1])
        defer { close(pipe[0]) }
        guard started == 0 else {
            throw BenchError(description: "cannot start \(path): \(String(cString: strerror(started)))")
        }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(pipe[0], $0.baseAddress, $0.count) }
            if n > 0 {
                bytes += buffer.prefix(n)
            } else if n == 0 || errno != EINTR {
                break
            }
        }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        let code = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return (code, String(decoding: bytes, as: UTF8.self))
    }

    /// SIGTERM, then waits for the child to end.
    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
}
