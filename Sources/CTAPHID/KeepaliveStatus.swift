/// The one-byte status of a `CTAPHID_KEEPALIVE` (0xBB) report.
package enum KeepaliveStatus: UInt8, Sendable {
    /// `STATUS_PROCESSING`: the authenticator is still processing the request.
    case processing = 1
    /// `STATUS_UPNEEDED`: the authenticator waits for user presence.
    case upNeeded = 2
}
