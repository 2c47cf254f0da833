/// The parameters of a ``CTAPHIDMachine``: timings, size limit and what `INIT` reports about the device.
package struct CTAPHIDConfiguration: Sendable, Equatable {
    /// `CAPABILITY_WINK` (0x01): the device implements `WINK`.
    package static let capabilityWink: UInt8 = 0x01
    /// `CAPABILITY_CBOR` (0x04): the device implements `CBOR`.
    package static let capabilityCBOR: UInt8 = 0x04
    /// `CAPABILITY_NMSG` (0x08): the device does not implement `MSG`.
    package static let capabilityNMSG: UInt8 = 0x08

    /// How long an unfinished message may go without a packet before `ERR_MSG_TIMEOUT`; 750 ms by default.
    ///
    /// The deadline is measured from the last packet of the message (init or continuation).
    package var messageTimeout: Duration
    /// The time between two `KEEPALIVE` reports while a request is in flight; 75 ms by default.
    ///
    /// The first is due one interval after the request is delivered. Zero or a negative value disables keepalives.
    package var keepaliveInterval: Duration
    /// The largest message accepted from the host, in bytes; 7609 by default (57 + 128 × 59, what framing allows).
    ///
    /// Values above 7609 act as 7609, since no longer message can be framed.
    package var maxMessageSize: Int
    /// The major device version number reported by `INIT`.
    package var deviceVersionMajor: UInt8
    /// The minor device version number reported by `INIT`.
    package var deviceVersionMinor: UInt8
    /// The build device version number reported by `INIT`.
    package var deviceVersionBuild: UInt8
    /// The capability flags reported by `INIT`; 0x05 (`WINK | CBOR`, `MSG` supported) by default.
    package var capabilities: UInt8

    /// Creates a configuration; every parameter has the default of the CTAPHID specification or of fidosim.
    package init(
        messageTimeout: Duration = .milliseconds(750),
        keepaliveInterval: Duration = .milliseconds(75),
        maxMessageSize: Int = 7609,
        deviceVersionMajor: UInt8 = 1,
        deviceVersionMinor: UInt8 = 0,
        deviceVersionBuild: UInt8 = 0,
        capabilities: UInt8 = CTAPHIDConfiguration.capabilityWink | CTAPHIDConfiguration.capabilityCBOR
    ) {
        self.messageTimeout = messageTimeout
        self.keepaliveInterval = keepaliveInterval
        self.maxMessageSize = maxMessageSize
        self.deviceVersionMajor = deviceVersionMajor
        self.deviceVersionMinor = deviceVersionMinor
        self.deviceVersionBuild = deviceVersionBuild
        self.capabilities = capabilities
    }
}
