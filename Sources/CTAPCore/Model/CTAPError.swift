/// An error that ends a CTAP request: the status byte it maps to and a diagnostic for logs.
///
/// Every failure inside the authenticator is one of these values; ``Authenticator`` turns it into the
/// one-byte CTAP response in a single place.
package struct CTAPError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The CTAP status byte sent to the host.
    package var status: CTAPStatus
    /// A human-readable reason, never sent to the host.
    package var diagnostic: String

    package init(_ status: CTAPStatus, _ diagnostic: String = "") {
        self.status = status
        self.diagnostic = diagnostic
    }

    package var description: String {
        diagnostic.isEmpty ? "\(status)" : "\(status): \(diagnostic)"
    }

    package static func == (lhs: CTAPError, rhs: CTAPError) -> Bool { lhs.status == rhs.status }
}
