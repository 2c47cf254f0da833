/// Why a key cannot be set up: a profile, a `--config` file or a file that is not right. The message says it whole.
package struct KeySetupError: Error, Equatable, CustomStringConvertible {
    package var message: String

    package init(_ message: String) {
        self.message = message
    }

    package var description: String { message }
}
