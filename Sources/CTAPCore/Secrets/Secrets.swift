// Secrets in memory (security.md, "Secrets in memory"): compared without early exits, wiped when they are done with.

/// Compares two byte strings without an early exit on the first difference.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in a.indices { difference |= a[i] ^ b[i] }
    return difference == 0
}

extension Array where Element == UInt8 {
    /// Overwrites the bytes with zeros in place (secrets that leave a cache do not stay in freed memory).
    mutating func wipe() {
        withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
    }
}
