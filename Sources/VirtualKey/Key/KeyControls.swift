/// The switches and transport faults of a ``VirtualKey`` that the control plane sets.
package struct KeyControls: Sendable, Equatable {
    /// What a finger on the simulated sensor does: true matches, false does not; nil lets the presence mode decide.
    package var userVerified: Bool?
    /// The presence mode to return to after an "approve the next request only".
    package var presenceAfterNext: PresenceMode?
    /// The faults armed on the transport side (``ArmedFaults`` holds them with the rest).
    package var faults = TransportFaults()

    package init() {}
}
