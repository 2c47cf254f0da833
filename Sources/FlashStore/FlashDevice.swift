/// A NOR flash: read anything, program words (clearing bits only), erase whole pages.
///
/// Offsets are absolute byte offsets from the start of the flash. A program must be word-aligned, a whole
/// number of words, and within one page. Implementations enforce the NOR rules of their ``geometry``.
package protocol FlashDevice: Sendable {
    /// The shape and limits of the part.
    var geometry: FlashGeometry { get }

    /// Reads `count` bytes at `offset`.
    func read(offset: Int, count: Int) throws(FlashError) -> [UInt8]

    /// Programs `bytes` at `offset`: every bit that is 0 in `bytes` is cleared in flash.
    mutating func program(offset: Int, bytes: [UInt8]) throws(FlashError)

    /// Sets every byte of `page` to 0xFF.
    mutating func erase(page: Int) throws(FlashError)

    /// How many times `page` has been erased (the device's ground truth, for tests and inspection).
    func eraseCount(page: Int) -> Int

    /// Restores power after a cut. Devices without fault injection do nothing.
    mutating func repower()
}

extension FlashDevice {
    package mutating func repower() {}
}
