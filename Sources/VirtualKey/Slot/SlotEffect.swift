package import CTAPCore
package import ControlProtocol

/// Something the I/O loop does for a ``KeySlot``: the slot decides, the loop carries it out, in order.
package enum SlotEffect: Equatable, Sendable {
    /// Send the reports of one answer together (one system call over UDP), to one host (the first unless the key is
    /// plugged into several).
    case send([[UInt8]], host: Int = 0)
    /// Send one response APDU to the reader (the card).
    case sendAPDU([UInt8])
    /// Take the key's device away until ``plug``.
    case unplug
    /// Plug the unplugged device back in.
    case plug
    /// Unplug the device and plug it back in (a power cycle).
    case replug
    /// Tell the control plane's subscribers (only made while someone listens: ``KeySlot/listening``).
    case event(String, [String: JSONValue])
    /// A line for the person at the terminal.
    case say(String)
    /// Ask the person to touch the key (prompt mode).
    case ask(PresencePrompt)
    /// A report for the trace (only made while tracing).
    case traceReport([UInt8], fromHost: Bool)
    /// A whole CTAP message for the trace.
    case traceMessage(TraceMessage)
}
