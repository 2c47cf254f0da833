/// A failure reported by a ``FlashDevice``: a power cut, a worn-out page, or a bad image file.
///
/// Strict-mode violations (programming a 1 over a 0, misaligned programs…) are programmer errors and trap;
/// they are never reported through this type.
package struct FlashError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as an extensible code.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Base: Hashable, Sendable {
            case powerCut, wornOut, notAnImage, unsupportedVersion, geometryMismatch, truncatedImage, io, insecureImage
        }

        let base: Base

        /// The power was cut: every operation fails until the device is re-powered.
        package static let powerCut = Code(base: .powerCut)
        /// The page has reached its erase endurance: the erase did not happen.
        package static let wornOut = Code(base: .wornOut)
        /// The file is not a fidosim flash image (bad magic).
        package static let notAnImage = Code(base: .notAnImage)
        /// The image was written by an unknown format version.
        package static let unsupportedVersion = Code(base: .unsupportedVersion)
        /// The image describes a different flash geometry than the one requested.
        package static let geometryMismatch = Code(base: .geometryMismatch)
        /// The image file is shorter than its header says.
        package static let truncatedImage = Code(base: .truncatedImage)
        /// A system call on the image file failed.
        package static let io = Code(base: .io)
        /// The image belongs to another user, or others may write it.
        package static let insecureImage = Code(base: .insecureImage)

        package var description: String {
            switch base {
            case .powerCut: "power cut"
            case .wornOut: "page worn out"
            case .notAnImage: "not a flash image"
            case .unsupportedVersion: "unsupported image version"
            case .geometryMismatch: "geometry mismatch"
            case .truncatedImage: "truncated image"
            case .io: "I/O error"
            case .insecureImage: "image not private"
            }
        }
    }

    /// What went wrong.
    package var code: Code
    /// The page concerned, when there is one.
    package var page: Int?
    /// A human-readable explanation.
    package var detail: String

    /// Creates an error.
    package init(_ code: Code, page: Int? = nil, detail: String = "") {
        self.code = code
        self.page = page
        self.detail = detail
    }

    /// The error every operation throws between a power cut and ``FlashDevice/repower()``.
    package static let powerCut = FlashError(.powerCut, detail: "the device lost power; re-power and remount")

    package var description: String {
        var text = "flash: \(code)"
        if let page { text += " (page \(page))" }
        if !detail.isEmpty { text += ": \(detail)" }
        return text
    }
}
