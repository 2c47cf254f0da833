import CTAPCore
import CTAPHID
package import ControlProtocol
import VirtualKey

/// A key that is not running, opened from its flash image: the control commands of a running key (control.md),
/// carried out in this process on the image (`fidosim credentials` when no key serves the image).
package final class ImageKey {
    var key: VirtualKey

    /// Opens the image at `path` (created when it does not exist).
    package init(path: String) throws {
        var entropy = EntropySource.system
        let persistent = try PersistentKey.open(flash: path, geometry: nil, entropy: &entropy)
        let authenticator = try Authenticator(storage: persistent.storage, entropy: entropy, now: .zero)
        key = VirtualKey(hid: CTAPHIDMachine(channelSeed: 1), authenticator: authenticator, presence: .prompt)
    }

    /// Runs one control command; its result, or the protocol's error.
    package func request(_ command: String, _ params: JSONValue) throws(ControlError) -> JSONValue {
        let line = JSONValue.object(["id": 1, "command": .string(command), "params": params]).encoded
        switch ControlRequest.parse(Array(line.utf8)) {
        case .failure(let failure): throw failure.error
        case .success(let request):
            switch key.execute(request.command, now: .zero).result {
            case .success(let result): return result
            case .failure(let error): throw error
            }
        }
    }
}
