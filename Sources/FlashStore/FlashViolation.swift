/// A breach of the NOR rules: a bug in the code driving the flash, never a runtime condition.
package struct FlashViolation: Hashable, Sendable, CustomStringConvertible {
    /// Which rule was broken.
    package enum Kind: Hashable, Sendable {
        /// The operation reaches outside the flash, or the page index does not exist.
        case outOfRange
        /// The program does not start on a word boundary or is not a whole number of words.
        case misaligned
        /// The program spans two pages.
        case crossesPage
        /// The program would set a bit that is 0 (only an erase can do that).
        case setsBit
        /// The word has already been programmed `maxProgramsPerWord` times since its page was erased.
        case tooManyPrograms
    }

    /// Which rule was broken.
    package var kind: Kind
    /// The offending operation.
    package var operation: String
    /// The byte offset concerned.
    package var offset: Int

    package var description: String { "NOR violation (\(kind)) at offset \(offset): \(operation)" }
}

/// What a ``SimulatedFlash`` does when asked to break a NOR rule.
package enum ViolationPolicy: Hashable, Sendable {
    /// `precondition` failure: the process stops (the default; tested with exit tests).
    case trap
    /// The operation is refused, counted as a mutation, and recorded in ``SimulatedFlash/violations``
    /// (for harnesses that must report rather than stop).
    case record
}
