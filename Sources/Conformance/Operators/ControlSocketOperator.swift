import ControlClient
package import ControlProtocol

/// A fidosim key: touches approved, refused or held through its control socket, power cycles by command.
package final class ControlSocketOperator: DeviceOperator {
    let connection: ControlConnection
    package let status: JSONValue?
    let originalPresence: String?
    package var isAutomatic: Bool { true }

    package init(path: String) throws {
        connection = try ControlConnection(path: path)
        status = try? connection.request("status", .object([:]), timeout: 10)
        originalPresence = status?["presence"]?.stringValue
        try approve()
    }

    package func approve() throws {
        _ = try request("presence", .object(["mode": "approve", "delayMs": 20]))
    }

    package func touchNeeded(_ what: String) throws {}

    package func refuseNextTouch() throws {
        _ = try request("presence", .object(["mode": "deny", "delayMs": 20]))
    }

    package func holdTouch() throws {
        _ = try request("presence", .object(["mode": "prompt"]))
    }

    package func restore() throws { try approve() }

    package func powerCycle() throws {
        _ = try request("powerCycle", .object([:]))
    }

    /// Back to the presence mode the key had before the run (the `presence` words of `status` start with it).
    package func finish() {
        guard let original = originalPresence?.split(separator: " ").first.map(String.init),
            ["approve", "deny", "prompt"].contains(original)
        else { return }
        _ = try? request("presence", .object(["mode": .string(original)]))
    }

    /// A control command, answered within 10 s.
    func request(_ command: String, _ params: JSONValue) throws -> JSONValue {
        try connection.request(command, params, timeout: 10)
    }
}
