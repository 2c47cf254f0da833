/// An error that ``CBORDecoder`` throws for input it does not accept.
///
/// Match on ``code`` to handle a kind of error; ``offset`` says where in the input the problem was found.
/// The mapping to a CTAP status byte lives in the CTAP layer, not here.
package struct CBORDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of problem the decoder found.
    package enum Code: Hashable, Sendable, CustomStringConvertible {
        /// The input ends before the item, or a string or container, is complete.
        case truncated
        /// Bytes follow the single top-level item.
        case trailingBytes
        /// A container is nested deeper than the decoder's `maxDepth`.
        case depthExceeded
        /// A string, array or map has an indefinite length (additional information 31).
        case indefiniteLength
        /// A map holds the same key twice.
        case duplicateMapKey
        /// An integer, length, count or simple value is not in its shortest encoding.
        case nonMinimalEncoding
        /// A text string is not well-formed UTF-8.
        case invalidUTF8
        /// A tag (major type 6) appears; CTAP2 uses none.
        case unsupportedTag
        /// A half, single or double precision float (0xf9, 0xfa, 0xfb) appears.
        case unsupportedFloat
        /// A simple value other than `false`, `true`, `null` or `undefined` appears.
        case unsupportedSimpleValue
        /// The additional information is one of the reserved values 28, 29 or 30.
        case reservedAdditionalInfo
        /// A "break" stop code (0xff) appears outside an indefinite-length item.
        case unexpectedBreak

        package var description: String {
            switch self {
            case .truncated: "truncated"
            case .trailingBytes: "trailingBytes"
            case .depthExceeded: "depthExceeded"
            case .indefiniteLength: "indefiniteLength"
            case .duplicateMapKey: "duplicateMapKey"
            case .nonMinimalEncoding: "nonMinimalEncoding"
            case .invalidUTF8: "invalidUTF8"
            case .unsupportedTag: "unsupportedTag"
            case .unsupportedFloat: "unsupportedFloat"
            case .unsupportedSimpleValue: "unsupportedSimpleValue"
            case .reservedAdditionalInfo: "reservedAdditionalInfo"
            case .unexpectedBreak: "unexpectedBreak"
            }
        }
    }

    /// The kind of problem.
    package var code: Code

    /// The byte offset, counted from the start of the input, where the problem was found.
    ///
    /// This is the offset of the initial byte of the offending item: the item whose head, string or element
    /// count runs past the end, the duplicate key, the over-deep container. For ``Code/truncated`` between
    /// items it is the input's length, and for ``Code/trailingBytes`` the first byte after the item.
    package var offset: Int

    /// Creates an error with a code and the offset where the problem was found.
    package init(code: Code, offset: Int) {
        self.code = code
        self.offset = offset
    }

    package var description: String {
        "CBORDecodingError.\(self.code) at offset \(self.offset)"
    }
}
