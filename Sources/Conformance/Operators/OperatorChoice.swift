import CTAPCBOR
import Console
import ControlProtocol
package import FIDOClient
package import HIDAPIDevice

#if canImport(Glibc)
import Glibc
#endif

/// Who touches, refuses and replugs the key during a run: a fidosim key's control socket, or a person.
package enum OperatorChoice {
    /// The socket given (`--control`, or `--name`'s default socket) if any; else the default socket `defaultPath`
    /// when the key behind it is the one at `address` (the same AAGUID and, over UDP, the same port); else a person.
    /// `fidosimAAGUID` says whether a key is a fidosim key, whose socket was then not found.
    package static func choose(
        noControl: Bool,
        socket: String?,
        defaultPath: String,
        address: DeviceAddress,
        fidosimAAGUID: [UInt8],
        open: () throws -> KeyLink
    ) throws -> any DeviceOperator {
        let card: Bool
        if case .pcsc = address { card = true } else { card = false }
        if noControl { return TerminalOperator(card: card) }
        if let socket { return try ControlSocketOperator(path: socket) }
        guard let candidate = try? ControlSocketOperator(path: defaultPath), let status = candidate.status,
            let aaguid = status["aaguid"]?.stringValue, let transport = status["transport"]?.stringValue
        else { return try terminalOperator(address, open, defaultPath, fidosimAAGUID) }
        let link = try open()
        try link.initialize()
        let info = try CTAP2Client(link: link).getInfo()
        let sameKey = aaguid.filter { $0 != "-" }.lowercased() == Hex.string(info.aaguid)
        var samePort = true
        if case .udp(_, let port, _) = address { samePort = transport.hasSuffix(":\(port)") }
        // A card's reader does not say its vpcd port: the default key must at least be a card.
        if card { samePort = transport.contains("pcsc") }
        guard sameKey && samePort else { return try terminalOperator(address, open, defaultPath, fidosimAAGUID) }
        printError("fidosim: using the control socket \(defaultPath) for touches and power cycles")
        return candidate
    }

    /// A person answers touches and replugs. A key that says it is a fidosim key (its AAGUID) has a control socket
    /// the runner did not find: say which one it looked for, and without a terminal stop instead of reporting
    /// failures that a person was meant to prevent.
    static func terminalOperator(
        _ address: DeviceAddress,
        _ open: () throws -> KeyLink,
        _ path: String,
        _ fidosimAAGUID: [UInt8]
    ) throws(OperatorChoiceError) -> TerminalOperator {
        var card = false
        if case .pcsc = address { card = true }
        guard let link = try? open(), (try? link.initialize()) != nil,
            let info = try? CTAP2Client(link: link).getInfo(), info.aaguid == fidosimAAGUID
        else { return TerminalOperator(card: card) }
        let hint =
            "the key at \(address) is a fidosim key (its AAGUID), but its control socket is not \(path): give "
            + "--name NAME or --control PATH (fidosim serve prints its socket), or --no-control to answer its touches "
            + "and replugs yourself"
        guard isatty(STDIN_FILENO) != 0 else { throw OperatorChoiceError(description: hint) }
        printError("fidosim conform: \(hint)")
        return TerminalOperator(card: card)
    }
}

/// No operator can be chosen without a person at a terminal; the description says what to give instead.
package struct OperatorChoiceError: Error, CustomStringConvertible {
    package var description: String
}
