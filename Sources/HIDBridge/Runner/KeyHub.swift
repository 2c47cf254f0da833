import CProcessControl
import CTAPCore
package import Console
package import ControlProtocol
package import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// The process's hub socket (`serve --hub`, `fidosim run --hub`): keys added and removed while the process runs,
/// with WebDriver's Add and Remove Virtual Authenticator and their options. Each added key is a key of its own on the
/// process's HID transport (its own hidraw node, uhid device or UDP port), with its own image (memory unless the
/// options name one) and its own control socket beside the hub's. The hub answers only its three commands: a key's
/// commands go to the key's socket, which `addVirtualAuthenticator` and `listVirtualAuthenticators` name.
///
/// The socket has the control plane's rules (0600, the server's uid or root, firmware-spec/security.md).
package final class KeyHub {
    let server: ControlServer
    /// Opens an added key from its spec; the loop's transport and shared options are in it.
    let open: (KeySpec, Int) throws -> (SlotIO, [ConsoleLine])
    /// Where added keys' control sockets go: the hub's own directory.
    let directory: String
    /// How many keys were added: numbers the unnamed ones and the devices of all.
    var added = 0
    /// The device number of the first added key (the private key's hidraw index): after the keys `serve` started.
    let firstDevice: Int

    /// `open` makes a key from its spec and its device number (the private key's hidraw index).
    package init(
        path: String,
        firstDevice: Int,
        open: @escaping (KeySpec, Int) throws -> (SlotIO, [ConsoleLine])
    ) throws(ControlSocketError) {
        server = try ControlServer(path: path)
        self.open = open
        self.firstDevice = firstDevice
        directory = String(
            path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropLast()
                .map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
        )
    }

    package var path: String { server.path }

    /// The spec of a key added with `options`, named `name`, its control socket in `directory` (the hub's).
    package static func spec(for options: VirtualAuthenticatorOptions, name: String, directory: String) -> KeySpec {
        var spec = KeySpec(
            name: name,
            flash: options.flash ?? "memory",
            port: 0,
            serial: options.serial,
            control: (directory.isEmpty ? "" : directory + "/") + name + ".sock",
            presence: options.isUserConsenting ? "approve" : "deny",
            uv: options.hasUserVerification ? "fingerprint" : "none",
            enrolledFingers: options.hasUserVerification ? 1 : 0,
            profile: options.profile ?? options.protocolProfile
        )
        spec.withoutExtensions = VirtualAuthenticatorOptions.switchedExtensions.subtracting(options.optionalExtensions)
        spec.residentKeys = options.hasResidentKey
        spec.backupEligible = options.defaultBackupEligibility
        spec.backupState = options.defaultBackupState
        return spec
    }

    /// What the hub says of a key: its id (its name), its control socket and where it is served.
    static func describe(_ slot: SlotIO) -> JSONValue {
        var members: [String: JSONValue] = [
            "authenticatorId": .string(slot.slot.name),
            "transport": slot.slot.transportDetail,
        ]
        if let control = slot.control { members["control"] = .string(control.path) }
        return .object(members)
    }

    /// Carries out one hub command against the loop's keys; an added key is appended to `slots`, a removed one
    /// taken out (its device unplugged first, so that hosts see it go). `removed` gets the index of a removed key.
    func handle(
        _ command: ControlCommand,
        slots: inout [SlotIO],
        removed: inout [Int]
    ) -> Result<JSONValue, ControlError> {
        switch command {
        case .addVirtualAuthenticator(let options):
            let name = options.name ?? nextName(among: slots)
            guard !slots.contains(where: { $0.slot.name == name }) else {
                return .failure(ControlError(.invalidParams, "a key named \(name) is served already"))
            }
            added += 1
            let slot: SlotIO
            let lines: [ConsoleLine]
            do {
                (slot, lines) = try open(
                    Self.spec(for: options, name: name, directory: directory),
                    firstDevice + added - 1
                )
            } catch {
                return .failure(ControlError(.failed, "\(name): \(error)"))
            }
            for line in lines { line.print() }
            if options.hasUserVerification {
                var subscribed = false
                _ = slot.update { key, now in
                    key.control(.setUserVerified(options.isUserVerified), subscribed: &subscribed, now: now).effects
                }
            }
            slots.append(slot)
            guard case .object(var members) = Self.describe(slot) else { return .success([:]) }
            if options.transport != "usb" {
                members["note"] = .string(
                    "transport \(options.transport) asked for: the key is a roaming USB key on this process's transport"
                )
            }
            return .success(.object(members))
        case .removeVirtualAuthenticator(let id):
            guard let index = slots.firstIndex(where: { $0.slot.name == id }) else {
                return .failure(ControlError(.notFound, "no key \(id) in this process"))
            }
            slots.remove(at: index).retire()
            // The key's image and authenticator are gone: hand the freed heap pages back.
            fidosim_trim_heap()
            removed.append(index)
            printLine("fidosim: key \(id) removed")
            return .success([:])
        case .listVirtualAuthenticators:
            return .success(["authenticators": .array(slots.map(Self.describe))])
        default:
            return .failure(
                ControlError(
                    .unknownCommand,
                    "the hub adds, removes and lists keys; a key's commands go to its own control socket "
                        + "(listVirtualAuthenticators names them)"
                )
            )
        }
    }

    /// `authenticator-N`, the first N not taken.
    func nextName(among slots: [SlotIO]) -> String {
        var number = added + 1
        while slots.contains(where: { $0.slot.name == "authenticator-\(number)" }) { number += 1 }
        return "authenticator-\(number)"
    }
}
