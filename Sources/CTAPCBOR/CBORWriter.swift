/// Writes CBOR item by item into a byte buffer, for a response whose map keys the code knows in advance: no
/// ``CBORValue`` tree is built, and no map is hashed or sorted.
///
/// The writer does not reorder anything: the caller writes each map's keys in CTAP2 canonical order (integers
/// ascending; text keys by UTF-8 length, then bytes) and as many members as the head announced. Every value is
/// written in its canonical form, as ``CBOREncoder`` writes it.
package struct CBORWriter {
    /// What has been written so far (after any prefix, such as a status byte, that the writer started with).
    package private(set) var bytes: [UInt8]

    /// A writer that appends to `prefix`, with room for `capacity` bytes in all.
    package init(prefix: [UInt8] = [], capacity: Int = 128) {
        bytes = prefix
        bytes.reserveCapacity(capacity)
    }

    /// The head of a map of `count` members; the members follow, key then value.
    package mutating func mapHead(count: Int) {
        CBOREncoder.appendHead(majorType: 5, argument: UInt64(count), to: &bytes)
    }

    /// An unsigned integer.
    package mutating func unsigned(_ value: UInt64) {
        CBOREncoder.appendHead(majorType: 0, argument: value, to: &bytes)
    }

    /// A byte string. (Concrete overloads, not one generic over collections: a generic function of another module
    /// runs unspecialized, and copied byte by byte.)
    package mutating func byteString(_ value: [UInt8]) {
        CBOREncoder.appendHead(majorType: 2, argument: UInt64(value.count), to: &bytes)
        bytes.append(contentsOf: value)
    }

    /// A byte string from part of an array.
    package mutating func byteString(_ value: ArraySlice<UInt8>) {
        CBOREncoder.appendHead(majorType: 2, argument: UInt64(value.count), to: &bytes)
        bytes.append(contentsOf: value)
    }

    /// A text string.
    package mutating func textString(_ value: String) {
        let utf8 = value.utf8
        CBOREncoder.appendHead(majorType: 3, argument: UInt64(utf8.count), to: &bytes)
        bytes.append(contentsOf: utf8)
    }

    /// Any value, in canonical form (a map's members sorted as ``CBOREncoder`` sorts them).
    package mutating func value(_ value: CBORValue) {
        CBOREncoder.append(value, to: &bytes)
    }
}
