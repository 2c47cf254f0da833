package import ControlProtocol

/// A key that commands reach: a running one through its control socket, or one that is not running through its
/// flash image (the same control commands, carried out in this process).
package protocol KeyAccess {
    /// Runs a control command; throws with the protocol's error code and message when it fails.
    func request(_ command: String, _ params: JSONValue) throws -> JSONValue
}

extension KeyAccess {
    /// WebDriver credential objects.
    package func list() throws -> [JSONValue] { try request("getCredentials", [:])["credentials"]?.arrayValue ?? [] }

    /// Adds one WebDriver credential object.
    package func add(_ credential: JSONValue) throws { _ = try request("addCredential", credential) }
}

/// A running key, through its control socket.
package struct SocketKeyAccess: KeyAccess {
    package let connection: ControlConnection
    /// Seconds to wait for the response.
    package var timeout: Double = 30

    package init(connection: ControlConnection, timeout: Double = 30) {
        self.connection = connection
        self.timeout = timeout
    }

    package func request(_ command: String, _ params: JSONValue) throws -> JSONValue {
        try connection.request(command, params, timeout: timeout)
    }
}
