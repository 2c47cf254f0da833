import CTAPCore
import FIDOClient
import Profiles
import Testing
import VirtualKey

@testable import Conformance

#if canImport(Glibc)
import Glibc
#endif

/// The key as `serve` builds it (its KeyRecipe, the built-in profile, memory), reached through an in-process report
/// channel instead of a transport: what the host sends goes to ``VirtualKey/receive(report:now:host:)``, and the
/// key's time is the wall clock, so its keepalives, timeouts and the simulated user's delays happen as over UDP.
final class InProcessKey: ReportChannel {
    var key: VirtualKey
    var outbox: [[UInt8]] = []
    let clock = ContinuousClock()
    let start: ContinuousClock.Instant
    var name: String { "in-process" }

    init(profile: String = "fidosim") throws {
        key = try KeyRecipe().makeKey(
            profile: try ProfileFile.builtIn(named: profile),
            storage: MemoryStorage(deviceSecret: Array(repeating: 7, count: 32)),
            entropy: EntropySource(SeededGenerator(seed: 99)),
            presence: .approve(after: .milliseconds(20))
        )
        start = clock.now
    }

    var now: Duration { clock.now - start }

    func take(_ outputs: [KeyOutput]) {
        for case .report(let report, _) in outputs { outbox.append(report) }
    }

    func send(_ report: [UInt8]) throws(ClientError) {
        take(key.receive(report: report, now: now))
    }

    /// The next report, letting the key's time pass (its timers fire) until one comes or `timeoutMs` is up.
    func receive(timeoutMs: Int) throws(ClientError) -> [UInt8]? {
        let end = now + .milliseconds(timeoutMs)
        while outbox.isEmpty {
            take(key.tick(now: now))
            guard outbox.isEmpty else { break }
            let wake = min(key.nextDeadline ?? end, end)
            if wake > now {
                let left = wake - now
                // Sleep until the key's next timer (or the end).
                sleep(for: left)
            }
            if now >= end {
                take(key.tick(now: now))
                break
            }
        }
        return outbox.isEmpty ? nil : outbox.removeFirst()
    }

    func sleep(for duration: Duration) {
        let micros = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        usleep(useconds_t(max(1, micros)))
    }
}

/// The person at the key, in process: presence modes and power cycles straight on the key, as the control socket's
/// operator sets them on a served key.
final class InProcessOperator: DeviceOperator {
    let key: InProcessKey
    var isAutomatic: Bool { true }

    init(_ key: InProcessKey) { self.key = key }

    func touchNeeded(_ what: String) throws {}
    func refuseNextTouch() throws { key.key.setPresence(.deny(after: .milliseconds(20))) }
    func holdTouch() throws { key.key.setPresence(.prompt) }
    func restore() throws { key.key.setPresence(.approve(after: .milliseconds(20))) }
    func powerCycle() throws {
        key.key.powerCycle(now: key.now)
        key.outbox.removeAll()
    }
}

@Suite(.serialized) struct InProcessConformanceTests {
    /// Every check of `fidosim conform --allow-destructive`, against the key in this process.
    @Test func everyCheckPassesAgainstTheKeyInProcess() throws {
        let key = try InProcessKey()
        let runner = ConformanceRunner(
            options: .init(allowDestructive: true),
            deviceOperator: InProcessOperator(key),
            open: { .hid(CTAPHIDClient(channel: key)) }
        )
        let report = try runner.run(device: "in-process")
        let failed = report.results.filter { $0.status == .failed }
        #expect(failed.isEmpty, "\(failed.map { "\($0.id): \($0.message ?? "")" })")
        let passed = report.results.filter { $0.status == .passed }.count
        // The HID, CTAP2, U2F and extension checks run; only the NFC group (a card's) and what needs hardware is left.
        #expect(passed >= 100, "\(passed) passed")
        print("conform in process: \(passed) passed, \(report.results.count - passed) skipped, 0 failed")
    }
}
