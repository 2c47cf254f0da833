/// Why a request to a key failed before the key could answer it.
public enum ClientError: Error, Equatable, CustomStringConvertible {
    /// The transport could not be opened or used (the message says which call failed and why).
    case transport(String)
    /// No answer within the time allowed.
    case timeout(String)
    /// The key answered something that cannot be read.
    case malformed(String)
    /// A CTAPHID ERROR message, with its code.
    case hidError(UInt8)

    public var description: String {
        switch self {
        case .transport(let reason): "transport: \(reason)"
        case .timeout(let what): "timed out waiting for \(what)"
        case .malformed(let reason): "malformed answer: \(reason)"
        case .hidError(let code): "CTAPHID ERROR 0x\(hex(code))"
        }
    }
}

/// Two lowercase hexadecimal digits per byte.
public func hex(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
}

/// Lowercase hexadecimal of `bytes`, with no separator.
public func hex(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { hex($0) }.joined()
}
