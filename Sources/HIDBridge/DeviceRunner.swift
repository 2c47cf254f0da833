#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CTAPCore
import Logging
import Synchronization

/// Set by SIGINT/SIGTERM; the run loop stops when it sees it.
let stopRequested = Atomic<Bool>(false)

/// The I/O loop of a virtual key on the UDP transport: moves reports, keeps time, asks the user.
///
/// It runs on the calling thread until SIGINT or SIGTERM; the ``VirtualKey`` it owns is touched by
/// nothing else.
public final class DeviceRunner {
    /// The exact datagram that power-cycles the key (solo1's simulation convention).
    public static let powerCycleDatagram: [UInt8] = Array(
        hex: "ac1052ca95e569de69e02ebff333485f13f9b2da34c5a8a340526697a9ab2e0b"
            + "394d8d04973c134005be1a0140bff6045bb26eb77a73eaa47813f6b49a7250dc")

    var key: VirtualKey
    let transport: UDPTransport
    let logger: Logger
    let clock = ContinuousClock()
    let start: ContinuousClock.Instant

    public init(key: VirtualKey, transport: UDPTransport, logger: Logger) {
        self.key = key
        self.transport = transport
        self.logger = logger
        self.start = clock.now
    }

    var now: Duration { clock.now - start }

    /// Installs the SIGINT/SIGTERM handlers that end ``run()``.
    public static func installSignalHandlers() {
        for sig in [SIGINT, SIGTERM] {
            signal(sig) { _ in stopRequested.store(true, ordering: .relaxed) }
        }
    }

    /// Serves until SIGINT or SIGTERM.
    public func run() {
        let watchStdin: Bool
        if case .prompt = key.presence { watchStdin = true } else { watchStdin = false }
        var stdinOpen = watchStdin
        while !stopRequested.load(ordering: .relaxed) {
            var timeoutMs: Int32 = 100
            if let deadline = key.nextDeadline {
                let wait = deadline - now
                let ms = wait <= .zero ? 0 : Int(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000) + 1
                timeoutMs = Int32(min(ms, 100))
            }
            var fds = [pollfd(fd: transport.descriptor, events: Int16(POLLIN), revents: 0)]
            if stdinOpen { fds.append(pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), timeoutMs)
            if ready < 0 && errno != EINTR {
                logger.error("poll failed: \(String(cString: strerror(errno)))")
                break
            }
            if fds[0].revents & Int16(POLLIN) != 0 {
                while let datagram = transport.receive() {
                    handle(datagram: datagram)
                }
            }
            if stdinOpen && fds[1].revents != 0 {
                stdinOpen = readTouchFromStdin()
            }
            emit(key.tick(now: now))
        }
        logger.info("stopping")
    }

    func handle(datagram: [UInt8]) {
        if datagram == Self.powerCycleDatagram {
            key.powerCycle(now: now)
            logger.notice("power cycle: volatile state cleared")
            return
        }
        logger.trace("report in: \(datagram.hexString)")
        emit(key.receive(report: datagram, now: now))
    }

    /// Reads a line from the terminal; any line is a touch. Returns false at end of input.
    func readTouchFromStdin() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = read(STDIN_FILENO, &buffer, buffer.count)
        if n <= 0 { return false }
        if buffer.prefix(n).contains(UInt8(ascii: "\n")) {
            emit(key.touch(now: now))
            printLine("fidosim: touched")
        }
        return true
    }

    func emit(_ outputs: [KeyOutput]) {
        for output in outputs {
            switch output {
            case .report(let report):
                logger.trace("report out: \(report.hexString)")
                transport.send(report)
            case .wink:
                logger.notice("wink")
            case .prompt(let prompt):
                var line = "fidosim: touch requested: \(prompt.command)"
                if let rp = prompt.rpId { line += " for \(rp)" }
                if let user = prompt.userName { line += " (user \(user))" }
                line += ". Press Enter to touch the key."
                printLine(line)
            }
        }
    }
}

extension Array where Element == UInt8 {
    /// Bytes from a hex string; invalid digits are skipped (only used for constants).
    init(hex: String) {
        var bytes: [UInt8] = []
        var high: UInt8?
        for c in hex.utf8 {
            let v: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v = c - UInt8(ascii: "A") + 10
            default: continue
            }
            if let h = high {
                bytes.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        self = bytes
    }

    /// Lower-case hex.
    var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * 2)
        for b in self {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Writes a line to standard output at once (no stdio buffering), for status lines scripts wait for.
public func printLine(_ line: String) {
    var bytes = Array(line.utf8)
    bytes.append(UInt8(ascii: "\n"))
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
        if n <= 0 { return }
        offset += n
    }
}
