package import ControlProtocol

/// The switches and armed faults of a ``VirtualKey`` that the control plane sets.
package struct KeyControls: Sendable, Equatable {
    /// What a finger on the simulated sensor does: true matches, false does not; nil lets the presence mode decide.
    package var userVerified: Bool?
    /// The presence mode to return to after an "approve the next request only".
    package var presenceAfterNext: PresenceMode?
    /// Reports from the host still to drop.
    package var dropInbound = 0
    /// Reports to the host still to drop.
    package var dropOutbound = 0

    /// A status fault still armed.
    package struct StatusFault: Sendable, Equatable {
        package var target: FaultTarget
        package var status: UInt16
        package var remaining: Int
    }

    package var statusFaults: [StatusFault] = []

    package init() {}

    /// Arms a status fault, replacing one armed for the same target.
    package mutating func add(target: FaultTarget, status: UInt16, count: Int) {
        statusFaults.removeAll { $0.target == target }
        statusFaults.append(StatusFault(target: target, status: status, remaining: count))
    }

    /// The injected response for a request, if a fault is armed for it; spends one of its count.
    /// `any` matches every CTAP2 command, `u2f` every U2F request.
    mutating func injectedStatus(u2f: Bool, commandByte: UInt8?) -> [UInt8]? {
        guard
            let index = statusFaults.firstIndex(where: { fault in
                switch fault.target {
                case .u2f: u2f
                case .any: !u2f
                default: !u2f && commandByte.map { fault.target.commandBytes.contains($0) } == true
                }
            })
        else { return nil }
        let fault = statusFaults[index]
        if fault.remaining <= 1 {
            statusFaults.remove(at: index)
        } else {
            statusFaults[index].remaining -= 1
        }
        return u2f ? [UInt8(fault.status >> 8), UInt8(fault.status & 0xFF)] : [UInt8(fault.status & 0xFF)]
    }
}
