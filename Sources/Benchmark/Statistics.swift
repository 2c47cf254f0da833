package import FlashStore

/// Seconds in a duration, as a Double.
package func seconds(_ d: Duration) -> Double {
    Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

/// The value at percentile `p` (0 to 100) of `values`, nearest rank; 0 for none.
package func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    let index = min(sorted.count - 1, Int((p / 100 * Double(sorted.count - 1)).rounded()))
    return sorted[index]
}

package func format1(_ x: Double) -> String { format(x, decimals: 1) }
package func format2(_ x: Double) -> String { format(x, decimals: 2) }

/// `x` with `decimals` digits after the point.
package func format(_ x: Double, decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let scaled = Int((x * scale).rounded())
    let whole = scaled / Int(scale)
    let fraction = abs(scaled % Int(scale))
    let digits = String(fraction)
    return "\(whole)." + String(repeating: "0", count: max(0, decimals - digits.count)) + digits
}

/// A flash device that counts what is programmed and erased, for write amplification.
package struct CountingFlash<Inner: FlashDevice>: FlashDevice {
    package var inner: Inner
    package var programmedBytes = 0
    package var erases = 0

    package init(_ inner: Inner) { self.inner = inner }

    package var geometry: FlashGeometry { inner.geometry }
    package func read(offset: Int, count: Int) throws(FlashError) -> [UInt8] {
        try inner.read(offset: offset, count: count)
    }
    package mutating func program(offset: Int, bytes: [UInt8]) throws(FlashError) {
        try inner.program(offset: offset, bytes: bytes)
        programmedBytes += bytes.count
    }
    package mutating func erase(page: Int) throws(FlashError) {
        try inner.erase(page: page)
        erases += 1
    }
    package func eraseCount(page: Int) -> Int { inner.eraseCount(page: page) }
    package mutating func repower() { inner.repower() }
}
