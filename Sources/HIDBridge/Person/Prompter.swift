import CTAPCore
import Console
import SystemPackage
import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// The person who answers touch requests in prompt mode: at the terminal (`y`/Enter touches, `n` refuses) and, in a
/// graphical session, on a desktop notification with Touch and Deny. With several keys the answer goes to the key
/// that asked (the oldest request waiting), and every question names its key.
final class Prompter {
    /// The keys' names, in the loop's order (the hub adds and removes keys).
    var names: [String]
    var queue = PromptQueue()
    let notifier: DesktopNotifier?
    /// False once standard input has ended (a daemon, `< /dev/null`): the terminal is not watched any more.
    var terminalOpen = true
    var pendingLine: [UInt8] = []

    init(names: [String], notifier: DesktopNotifier?) {
        self.names = names
        self.notifier = notifier
    }

    /// The terminal (while some key is in prompt mode and input has not ended), then the notifications' pipes.
    func pollDescriptors(terminal: Bool) -> [pollfd] {
        var fds: [pollfd] = []
        if terminal && terminalOpen { fds.append(pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)) }
        return fds + (notifier?.pollDescriptors() ?? [])
    }

    /// Milliseconds until a U2F request's entry may go stale.
    func timeout(cap: Int32) -> Int32 { queue.first == nil ? cap : min(cap, 1000) }

    /// An answer of the person, for the loop to give to a key.
    struct Answer: Equatable {
        var slot: Int
        /// `.touch` or `.refuse`.
        var answer: TerminalAnswer
        /// The line that tells the person the answer went through.
        var line: String
    }

    /// A key asks the person for a touch; a request already asked about is not asked again.
    func ask(slot: Int, prompt: PresencePrompt, now: Duration) {
        guard let entry = queue.ask(slot: slot, prompt: prompt, now: now) else { return }
        printLine(prompt.terminalQuestion(key: names[slot]))
        notifier?.show(
            serial: entry.serial,
            summary:
                "Security key \(names[slot]): \(prompt.gesture.name) requested",
            body: prompt.personText
        )
    }

    /// Reads answers and forgets requests answered some other way (`waits` says whether a key's CTAP2 request still
    /// waits). `prompting` are the keys in prompt mode: with one, a touch while nothing waits counts for its next U2F
    /// request. Returns the answers for the loop to give.
    func service(_ fds: ArraySlice<pollfd>, now: Duration, waits: (Int) -> Bool, prompting: [Int]) -> [Answer] {
        var answers: [Answer] = []
        var index = fds.startIndex
        if index < fds.endIndex && fds[index].fd == STDIN_FILENO {
            if fds[index].revents != 0 { answers += readTerminal(prompting: prompting) }
            index += 1
        }
        if let notifier {
            for (serial, answer) in notifier.service(fds[index...]) {
                guard let entry = queue.remove(serial: serial) else { continue }
                answers += self.answer(answer, to: entry.slot, from: "desktop")
            }
        }
        for gone in queue.sweep(now: now, waits: waits) {
            notifier?.close(serial: gone.serial)
        }
        return answers
    }

    func readTerminal(prompting: [Int]) -> [Answer] {
        var buffer = [UInt8](repeating: 0, count: 512)
        let n: Int
        do {
            n = try buffer.withUnsafeMutableBytes { try FileDescriptor.standardInput.read(into: $0) }
        } catch Errno.resourceTemporarilyUnavailable {
            return []
        } catch {
            n = 0
        }
        if n == 0 {
            terminalOpen = false
            return []
        }
        pendingLine += buffer[0..<n]
        var answers: [Answer] = []
        while let end = pendingLine.firstIndex(of: UInt8(ascii: "\n")) {
            let line = pendingLine[..<end]
            pendingLine.removeSubrange(...end)
            answers += answerFromTerminal(TerminalAnswer(line: line), prompting: prompting)
        }
        if pendingLine.count > 4096 { pendingLine.removeAll() }
        return answers
    }

    func answerFromTerminal(_ answer: TerminalAnswer, prompting: [Int]) -> [Answer] {
        guard answer != .unclear else {
            printLine("fidosim: answer y (or Enter) to touch the key, n to refuse")
            return []
        }
        if let entry = queue.first {
            queue.remove(serial: entry.serial)
            notifier?.close(serial: entry.serial)
            return self.answer(answer, to: entry.slot, from: "terminal")
        }
        // Nothing waits: with one key, a touch now counts for its next U2F request (as a finger already on a key).
        if answer == .touch && prompting.count == 1 {
            return [Answer(slot: prompting[0], answer: .touch, line: "fidosim: key \(names[prompting[0]]): touched")]
        }
        printLine("fidosim: no key is waiting for a touch")
        return []
    }

    func answer(_ answer: TerminalAnswer, to slot: Int, from: String) -> [Answer] {
        switch answer {
        case .touch:
            [Answer(slot: slot, answer: .touch, line: "fidosim: key \(names[slot]): touched (\(from))")]
        case .refuse:
            [Answer(slot: slot, answer: .refuse, line: "fidosim: key \(names[slot]): refused (\(from))")]
        case .unclear:
            []
        }
    }

    /// The hub removed the key at `slot`: its requests go (with their notifications), the later keys move up.
    func keyRemoved(slot: Int) {
        for entry in queue.forget(slot: slot) { notifier?.close(serial: entry.serial) }
    }

    func closeAll() { notifier?.closeAll() }
}
