/// Why a store operation failed. Every failure leaves the store as it was, except ``Code/powerCut`` and
/// ``Code/flashFailure``, after which the store must be mounted again.
package struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as an extensible code.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Base: Hashable, Sendable {
            case full, valueTooLarge, transactionTooLarge, wornOut, unrecognizedImage, unsupportedGeometry
            case powerCut, flashFailure, needsRemount, damaged
        }

        let base: Base

        /// Not enough room, even after compaction. Nothing was written.
        package static let full = Code(base: .full)
        /// A value is longer than ``FlashKVStore/maxValueLength``.
        package static let valueTooLarge = Code(base: .valueTooLarge)
        /// The transaction does not fit in one record (``FlashKVStore/maxTransactionSize``).
        package static let transactionTooLarge = Code(base: .transactionTooLarge)
        /// Making room would erase a page past its endurance: the store is at its end of life. Reads and
        /// writes that fit in the remaining free space still work.
        package static let wornOut = Code(base: .wornOut)
        /// The flash holds something that is not a store (no valid page header anywhere). Nothing was
        /// written; ``FlashKVStore/format(_:)`` makes it a store, losing its contents.
        package static let unrecognizedImage = Code(base: .unrecognizedImage)
        /// The store cannot run on this flash geometry.
        package static let unsupportedGeometry = Code(base: .unsupportedGeometry)
        /// The power was cut during the operation: mount again after re-powering.
        package static let powerCut = Code(base: .powerCut)
        /// The device failed (I/O error, unexpected worn-out page): mount again.
        package static let flashFailure = Code(base: .flashFailure)
        /// An earlier operation was interrupted: this store value is stale, mount again.
        package static let needsRemount = Code(base: .needsRemount)
        /// The value fails its integrity check (more than one flipped bit): it is not returned.
        package static let damaged = Code(base: .damaged)

        package var description: String {
            switch base {
            case .full: "store full"
            case .valueTooLarge: "value too large"
            case .transactionTooLarge: "transaction too large"
            case .wornOut: "flash worn out"
            case .unrecognizedImage: "unrecognized image"
            case .unsupportedGeometry: "unsupported geometry"
            case .powerCut: "power cut"
            case .flashFailure: "flash failure"
            case .needsRemount: "needs remount"
            case .damaged: "damaged value"
            }
        }
    }

    /// What went wrong.
    package var code: Code
    /// A human-readable explanation.
    package var detail: String

    /// Creates an error.
    package init(_ code: Code, _ detail: String = "") {
        self.code = code
        self.detail = detail
    }

    init(flash error: FlashError) {
        self.init(error.code == .powerCut ? .powerCut : .flashFailure, error.description)
    }

    package var description: String { detail.isEmpty ? "store: \(code)" : "store: \(code): \(detail)" }
}
