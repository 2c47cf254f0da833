/// A CTAPHID command byte, without the 0x80 bit that marks an initialization packet (CTAP 2.1 §11.2.9).
///
/// - `ping` (0x01, 0x81 on the wire): echoed by the machine.
/// - `msg` (0x03, 0x83): a U2F (CTAP1) APDU for the authenticator, see
///   ``CTAPHIDAction/deliver(channel:command:payload:)``.
/// - `lock` (0x04, 0x84): an exclusive channel lock of 0–10 s, handled by the machine.
/// - `initialize` (0x06, 0x86): channel allocation and resynchronisation, handled by the machine.
/// - `wink` (0x08, 0x88): answered by the machine, with ``CTAPHIDAction/wink`` for the bridge.
/// - `cbor` (0x10, 0x90): a CTAP2 request for the authenticator, see
///   ``CTAPHIDAction/deliver(channel:command:payload:)``.
/// - `cancel` (0x11, 0x91): never answered; ``CTAPHIDAction/cancel(channel:)`` for the authenticator.
/// - `keepalive` (0x3B, 0xBB) and `error` (0x3F, 0xBF): device to host only; from the host they are `INVALID_CMD`.
package enum CTAPHIDCommand: UInt8, Sendable {
    /// Echo the payload back (`CTAPHID_PING`).
    case ping = 0x01
    /// A U2F (CTAP1) request or response APDU (`CTAPHID_MSG`).
    case msg = 0x03
    /// Lock the device to one channel for up to 10 seconds (`CTAPHID_LOCK`).
    case lock = 0x04
    /// Allocate a channel or resynchronise one (`CTAPHID_INIT`).
    case initialize = 0x06
    /// Ask the device to show that it is there (`CTAPHID_WINK`).
    case wink = 0x08
    /// A CTAP2 request or response: command byte then CBOR (`CTAPHID_CBOR`).
    case cbor = 0x10
    /// Cancel the request in flight on this channel (`CTAPHID_CANCEL`).
    case cancel = 0x11
    /// The device is still working on the request (`CTAPHID_KEEPALIVE`, device to host only).
    case keepalive = 0x3B
    /// A one-byte ``CTAPHIDError`` (`CTAPHID_ERROR`, device to host only).
    case error = 0x3F

    /// The command byte as sent in an initialization packet, with bit 7 set.
    package var wireValue: UInt8 { self.rawValue | 0x80 }
}
