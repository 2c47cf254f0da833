/// Something the bridge or the authenticator must do as the result of an event given to ``CTAPHIDMachine``.
///
/// Actions are returned in the order they must be performed.
package enum CTAPHIDAction: Equatable, Sendable {
    /// Send one 64-byte report to the host.
    case send([UInt8])
    /// Hand a whole `MSG` or `CBOR` request to the authenticator.
    ///
    /// The machine is busy with it until ``CTAPHIDMachine/complete(channel:payload:now:)`` for `channel` (or an
    /// ``abort(channel:)`` or a power cycle).
    case deliver(channel: UInt32, command: CTAPHIDCommand, payload: [UInt8])
    /// The host sent `CANCEL` for the request in flight on `channel`.
    ///
    /// The authenticator should end the request with `CTAP2_ERR_KEEPALIVE_CANCEL` and still answer through
    /// ``CTAPHIDMachine/complete(channel:payload:now:)``.
    case cancel(channel: UInt32)
    /// An `INIT` resynchronised the busy `channel`: drop the request in flight silently.
    ///
    /// The machine is no longer busy; a later ``CTAPHIDMachine/complete(channel:payload:now:)`` for the dropped request
    /// is ignored while no new request is in flight on that channel.
    case abort(channel: UInt32)
    /// Show the user that the device is there (blink, beep, log line).
    case wink
}
