package import CTAPCore
package import ControlProtocol

/// The faults armed on a key's transport side: statuses answered in the authenticator's place, and reports dropped.
package struct TransportFaults: Sendable, Equatable {
    /// A status fault still armed.
    package struct StatusFault: Sendable, Equatable {
        package var target: FaultTarget
        package var status: UInt16
        package var remaining: Int
    }

    package var status: [StatusFault] = []
    /// Reports from the host still to drop.
    package var dropInbound = 0
    /// Reports to the host still to drop.
    package var dropOutbound = 0

    package init() {}

    /// The injected response for a request, if a fault is armed for it; spends one of its count.
    /// `any` matches every CTAP2 command, `u2f` every U2F request.
    mutating func injectedStatus(u2f: Bool, commandByte: UInt8?) -> [UInt8]? {
        guard
            let index = status.firstIndex(where: { fault in
                switch fault.target {
                case .u2f: u2f
                case .any: !u2f
                default: !u2f && commandByte.map { fault.target.commandBytes.contains($0) } == true
                }
            })
        else { return nil }
        let fault = status[index]
        if fault.remaining <= 1 {
            status.remove(at: index)
        } else {
            status[index].remaining -= 1
        }
        return u2f ? [UInt8(fault.status >> 8), UInt8(fault.status & 0xFF)] : [UInt8(fault.status & 0xFF)]
    }
}

/// Every fault the control plane has armed on a key, as one value: `injectFault` arms one, `clearFaults` sets an
/// empty one, and both (and `status`) report it as ``json``. The key keeps each part where it acts: the transport's
/// in the key, the authenticator's in the authenticator, the flash write failures in the storage
/// (``VirtualKey/faults`` gathers and spreads them).
package struct ArmedFaults: Sendable, Equatable {
    package var transport = TransportFaults()
    package var authenticator = AuthenticatorFaults()
    /// Flash writes still to fail.
    package var flashWriteFailures = 0

    package init() {}

    /// Arms `fault`, replacing what was armed for the same target (a status fault's command, a direction of
    /// dropped reports, the store's limit, the override, the flash's failures).
    package mutating func arm(_ fault: Fault) {
        switch fault {
        case .status(let target, let status, let count):
            transport.status.removeAll { $0.target == target }
            transport.status.append(.init(target: target, status: status, remaining: count))
        case .keyStoreFull(let after): authenticator.keyStoreFullAfter = after
        case .flashWriteFailure(let count): flashWriteFailures = count
        case .dropReports(let inbound, let count):
            if inbound { transport.dropInbound = count } else { transport.dropOutbound = count }
        case .responseOverride(let bogus, let badUP, let badUV, let count):
            authenticator.responseOverride = ResponseOverride(
                bogusSignature: bogus,
                clearUserPresent: badUP,
                clearUserVerified: badUV,
                remaining: count
            )
        }
    }

    /// The faults as `injectFault`, `clearFaults` and `status` report them (firmware-spec/control.md).
    package var json: JSONValue {
        var out: [String: JSONValue] = [
            "status": .array(
                transport.status.map {
                    [
                        "command": .string($0.target.rawValue), "status": JSONValue($0.status),
                        "remaining": JSONValue($0.remaining),
                    ]
                }
            ),
            "dropInbound": JSONValue(transport.dropInbound),
            "dropOutbound": JSONValue(transport.dropOutbound),
            "flashWriteFailures": JSONValue(flashWriteFailures),
        ]
        out["keyStoreFullAfter"] = authenticator.keyStoreFullAfter.map { JSONValue($0) } ?? JSONValue.null
        if let override = authenticator.responseOverride {
            out["responseOverride"] = [
                "isBogusSignature": .boolean(override.bogusSignature), "isBadUP": .boolean(override.clearUserPresent),
                "isBadUV": .boolean(override.clearUserVerified),
                "remaining": override.remaining.map { JSONValue($0) } ?? JSONValue.null,
            ]
        } else {
            out["responseOverride"] = JSONValue.null
        }
        return .object(out)
    }
}
