import CTAPCBOR

/// Why a request to a key failed before the key could answer it.
package enum ClientError: Error, Equatable, CustomStringConvertible {
    /// The transport could not be opened or used (the message says which call failed and why).
    case transport(String)
    /// No answer within the time allowed.
    case timeout(String)
    /// The key answered something that cannot be read.
    case malformed(String)
    /// A CTAPHID ERROR message, with its code.
    case hidError(UInt8)

    package var description: String {
        switch self {
        case .transport(let reason): "transport: \(reason)"
        case .timeout(let what): "timed out waiting for \(what)"
        case .malformed(let reason): "malformed answer: \(reason)"
        case .hidError(let code): "CTAPHID ERROR 0x\(Hex.string(code))"
        }
    }
}
