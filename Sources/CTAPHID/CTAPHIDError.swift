/// The one-byte payload of a `CTAPHID_ERROR` (0xBF) response (CTAP 2.1 §11.2.9.1.6).
///
/// Every error goes to the channel the offending packet came on (CID 0 and the broadcast CID included), as a
/// single report `CID | 0xBF | 0x00 | 0x01 | code`. ``CTAPHIDMachine`` answers these situations:
///
/// - `invalidCommand` (0x01): an init packet with an unknown command, or with `KEEPALIVE` or `ERROR` sent by the
///   host. Answered at the init packet; its continuation packets are then stray and ignored.
/// - `invalidParameter` (0x02): `LOCK` with a duration above 10 seconds.
/// - `invalidLength` (0x03): `INIT` whose length is not 8; `MSG` or `CBOR` of length 0; `LOCK` whose length is not 1;
///   `WINK` whose length is not 0; any message longer than the maximum message size (7609 bytes by default),
///   answered at its init packet.
/// - `invalidSequence` (0x04): a continuation packet with the wrong sequence number (the partial message is
///   discarded); an init packet other than `INIT` (`CANCEL` included) on a channel that is mid-message (the partial
///   message and the new packet are discarded).
/// - `messageTimeout` (0x05): an unfinished message got no packet for the message timeout (750 ms by default) after
///   its last packet; the partial message is discarded.
/// - `channelBusy` (0x06): a new message (an init packet other than `INIT` and `CANCEL`) while a request is in
///   flight on any channel (the busy one included), while another channel is mid-message, or while another channel
///   holds the lock.
/// - `lockRequired` (0x0A): never sent by this machine.
/// - `invalidChannel` (0x0B): any packet on CID 0; any packet on the broadcast CID 0xFFFFFFFF other than an `INIT`
///   init packet (continuation packets included).
/// - `other` (0x7F): a response from the authenticator too long to frame (more than 7609 bytes).
package enum CTAPHIDError: UInt8, Sendable {
    /// `ERR_INVALID_CMD`: the command is unknown or not accepted from the host.
    case invalidCommand = 0x01
    /// `ERR_INVALID_PAR`: a parameter of the command is out of range.
    case invalidParameter = 0x02
    /// `ERR_INVALID_LEN`: the message length is wrong for the command or too large.
    case invalidLength = 0x03
    /// `ERR_INVALID_SEQ`: a packet arrived out of sequence.
    case invalidSequence = 0x04
    /// `ERR_MSG_TIMEOUT`: a message was not completed in time.
    case messageTimeout = 0x05
    /// `ERR_CHANNEL_BUSY`: the device is busy with another channel or request.
    case channelBusy = 0x06
    /// `ERR_LOCK_REQUIRED`: the command needs a channel lock.
    case lockRequired = 0x0A
    /// `ERR_INVALID_CHANNEL`: the command is not allowed on this channel id.
    case invalidChannel = 0x0B
    /// `ERR_OTHER`: an unspecified error.
    case other = 0x7F
}
