extension CBORValue: ExpressibleByIntegerLiteral {
    /// Creates an integer value from a literal anywhere in CBOR's range, `-2^64 ... 2^64 - 1`.
    ///
    /// The literal type is `StaticBigInt`, so `18446744073709551615` and `-18446744073709551616` can be written
    /// directly. A literal outside CBOR's integer range is a programmer error and stops the program.
    package init(integerLiteral value: StaticBigInt) {
        // bitWidth counts the sign bit: 2^64 - 1 needs 65 bits, and so does -2^64.
        precondition(value.bitWidth <= 65, "integer literal is outside the CBOR range -2^64 ... 2^64 - 1")
        var low: UInt64 = 0
        for wordIndex in 0..<(64 / UInt.bitWidth) {
            low |= UInt64(truncatingIfNeeded: value[wordIndex]) << (wordIndex * UInt.bitWidth)
        }
        // For a negative literal v, the two's complement of v has low 64 bits equal to ~(-1 - v).
        self = value.signum() < 0 ? .negative(~low) : .unsigned(low)
    }
}

extension CBORValue: ExpressibleByStringLiteral {
    /// Creates a text string value from a literal.
    package init(stringLiteral value: String) {
        self = .textString(value)
    }
}

extension CBORValue: ExpressibleByBooleanLiteral {
    /// Creates a Boolean value from a literal.
    package init(booleanLiteral value: Bool) {
        self = .boolean(value)
    }
}

extension CBORValue: ExpressibleByArrayLiteral {
    /// Creates an array value from a literal.
    package init(arrayLiteral elements: CBORValue...) {
        self = .array(elements)
    }
}

extension CBORValue: ExpressibleByDictionaryLiteral {
    /// Creates a map value from a literal; repeating a key is a programmer error and stops the program.
    package init(dictionaryLiteral elements: (CBORValue, CBORValue)...) {
        self = .map(Dictionary(uniqueKeysWithValues: elements))
    }
}
