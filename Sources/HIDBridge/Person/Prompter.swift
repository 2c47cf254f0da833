import CTAPCore

#if canImport(Glibc)
import Glibc
#endif

/// The person who answers touch requests in prompt mode: at the terminal (`y`/Enter touches, `n` refuses) and, in a
/// graphical session, on a desktop notification with Touch and Deny. With several keys the answer goes to the key
/// that asked (the oldest request waiting), and every question names its key.
final class Prompter {
    let names: [String]
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

    /// Asks about new requests, reads answers, and forgets requests answered some other way.
    func service(_ fds: ArraySlice<pollfd>, slots: [KeySlot]) {
        var index = fds.startIndex
        if index < fds.endIndex && fds[index].fd == STDIN_FILENO {
            if fds[index].revents != 0 { readTerminal(slots: slots) }
            index += 1
        }
        if let notifier {
            for (serial, answer) in notifier.service(fds[index...]) {
                guard let entry = queue.remove(serial: serial) else { continue }
                apply(answer, to: entry, slots: slots, from: "desktop")
            }
        }
        for (slot, key) in slots.enumerated() {
            let now = key.now
            for prompt in key.asks {
                guard let entry = queue.ask(slot: slot, prompt: prompt, now: now) else { continue }
                printLine(prompt.terminalQuestion(key: names[slot]))
                notifier?.show(
                    serial: entry.serial,
                    summary:
                        "Security key \(names[slot]): \(prompt.gesture == .fingerprint ? "fingerprint" : "touch") requested",
                    body: prompt.personText
                )
            }
            key.asks.removeAll()
        }
        let now = slots.first?.now ?? .zero
        for gone in queue.sweep(now: now, waits: { slots[$0].waitsForPerson }) {
            notifier?.close(serial: gone.serial)
        }
    }

    func readTerminal(slots: [KeySlot]) {
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = read(STDIN_FILENO, &buffer, buffer.count)
        if n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN) {
            terminalOpen = false
            return
        }
        guard n > 0 else { return }
        pendingLine += buffer[0..<n]
        while let end = pendingLine.firstIndex(of: UInt8(ascii: "\n")) {
            let line = pendingLine[..<end]
            pendingLine.removeSubrange(...end)
            answerFromTerminal(TerminalAnswer(line: line), slots: slots)
        }
        if pendingLine.count > 4096 { pendingLine.removeAll() }
    }

    func answerFromTerminal(_ answer: TerminalAnswer, slots: [KeySlot]) {
        guard answer != .unclear else {
            printLine("fidosim: answer y (or Enter) to touch the key, n to refuse")
            return
        }
        if let entry = queue.first {
            queue.remove(serial: entry.serial)
            notifier?.close(serial: entry.serial)
            apply(answer, to: entry, slots: slots, from: "terminal")
            return
        }
        // Nothing waits: with one key, a touch now counts for its next U2F request (as a finger already on a key).
        let prompting = slots.indices.filter { if case .prompt = slots[$0].key.presence { true } else { false } }
        if answer == .touch && prompting.count == 1 {
            let slot = slots[prompting[0]]
            slot.emit(slot.key.touch(now: slot.now))
            printLine("fidosim: key \(names[prompting[0]]): touched")
        } else {
            printLine("fidosim: no key is waiting for a touch")
        }
    }

    func apply(_ answer: TerminalAnswer, to entry: PromptQueue.Entry, slots: [KeySlot], from: String) {
        let slot = slots[entry.slot]
        switch answer {
        case .touch:
            slot.emit(slot.key.touch(now: slot.now))
            printLine("fidosim: key \(names[entry.slot]): touched (\(from))")
        case .refuse:
            slot.emit(slot.key.refuse(now: slot.now))
            printLine("fidosim: key \(names[entry.slot]): refused (\(from))")
        case .unclear:
            break
        }
    }

    func closeAll() { notifier?.closeAll() }
}
