/// An error that ends a CTAP request: the status byte it maps to and a diagnostic for logs.
///
/// Every failure inside the authenticator is one of these values; ``Authenticator`` turns it into the
/// one-byte CTAP response in a single place.
public struct CTAPError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The CTAP status byte sent to the host.
    public var status: CTAPStatus
    /// A human-readable reason, never sent to the host.
    public var diagnostic: String

    public init(_ status: CTAPStatus, _ diagnostic: String = "") {
        self.status = status
        self.diagnostic = diagnostic
    }

    public var description: String {
        diagnostic.isEmpty ? "\(status)" : "\(status): \(diagnostic)"
    }

    public static func == (lhs: CTAPError, rhs: CTAPError) -> Bool { lhs.status == rhs.status }
}
