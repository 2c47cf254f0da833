import Crypto

/// The volatile part of PIN/UV auth: what a power cycle forgets.
///
/// A key-agreement key pair per protocol, the pinUvAuthToken, and the count of consecutive wrong PINs since
/// power-up (three block PIN entry until the next power cycle).
struct PinUvState: Sendable {
    /// Consecutive wrong PINs that block PIN entry until a power cycle (CTAP2_ERR_PIN_AUTH_BLOCKED).
    static let mismatchesBeforePowerCycle = 3

    private var keyAgreementKeys: [P256.KeyAgreement.PrivateKey]
    var token: PinUvAuthToken
    var consecutiveMismatches = 0

    /// initialize() of every protocol and of the token: fresh keys from `entropy`.
    init(entropy: inout EntropySource) {
        keyAgreementKeys = PinUvAuthProtocol.allCases.map { _ in Self.newKeyAgreementKey(&entropy) }
        token = PinUvAuthToken(value: entropy.bytes(32))
    }

    /// Whether PIN entry is blocked until the next power cycle.
    var isBlockedUntilPowerCycle: Bool { consecutiveMismatches >= Self.mismatchesBeforePowerCycle }

    func keyAgreementKey(_ proto: PinUvAuthProtocol) -> P256.KeyAgreement.PrivateKey {
        keyAgreementKeys[proto.rawValue - 1]
    }

    /// regenerate() of every protocol: new key-agreement keys, so a platform must fetch a new one.
    mutating func regenerateKeyAgreementKeys(_ entropy: inout EntropySource) {
        keyAgreementKeys = PinUvAuthProtocol.allCases.map { _ in Self.newKeyAgreementKey(&entropy) }
    }

    /// resetPinUvAuthToken(): a new token value that no platform knows yet, not in use.
    mutating func resetToken(_ entropy: inout EntropySource) {
        token.reset(value: entropy.bytes(32))
    }

    /// The shared secret with the platform's key for `proto` (decapsulate()).
    func sharedSecret(_ proto: PinUvAuthProtocol, peer: P256.KeyAgreement.PublicKey) throws(CTAPError) -> [UInt8] {
        try proto.sharedSecret(privateKey: keyAgreementKey(proto), peer: peer)
    }

    private static func newKeyAgreementKey(_ entropy: inout EntropySource) -> P256.KeyAgreement.PrivateKey {
        while true {
            var raw = entropy.bytes(32)
            defer { raw.wipe() }
            if let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: raw) { return key }
        }
    }
}
