import CTAPCBOR
package import CTAPCore
import Console
import FlashImage
package import FlashStore
package import Profiles
import SystemPackage
import VirtualKey

#if canImport(Glibc)
import Glibc
#endif

/// The flash geometries a new image can have.
/// What an acknowledged write survives (storage.md, "What survives what").
package enum Durability: String, CaseIterable, Sendable {
    /// Written to the file (`pwrite`) before the answer: survives the process being killed, not a host crash.
    case process
    /// Also flushed to the disk (`fdatasync`) before the answer: survives a host crash or power loss too.
    case host
}

package enum GeometryChoice: String, CaseIterable, Sendable {
    case nrf52840, stm32l4, large

    package var geometry: FlashGeometry {
        switch self {
        case .nrf52840: .nrf52840
        case .stm32l4: .stm32l4
        case .large: .large
        }
    }
}

/// Where a key's files live.
package enum KeyFiles {
    /// Where a key's files are by default (``KeyPaths``, shared with the commands that reach a running key).
    package static var dataDirectory: String { KeyPaths.dataDirectory }
    package static func defaultImagePath(name: String) -> String { KeyPaths.defaultImagePath(name: name) }
    package static func defaultControlPath(name: String) -> String { KeyPaths.defaultControlPath(name: name) }
    package static func defaultEnvironmentPath(name: String) -> String { KeyPaths.defaultEnvironmentPath(name: name) }

    /// Creates `path` (absolute, or relative to the current directory) and its parents with mode 0700 where missing.
    package static func makeDirectories(_ path: String) throws(StorageError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0 && errno != EEXIST {
                throw StorageError("cannot create \(current): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// The bytes of a small file (a profile, a `--config` file): ``WholeFile/read(_:)``, as a reason the key cannot
    /// be set up.
    package static func read(_ path: String) throws(KeySetupError) -> [UInt8] {
        do {
            return try WholeFile.read(path, regularOnly: true)
        } catch {
            throw KeySetupError(error.description)
        }
    }

    /// Takes an exclusive lock on `path + ".lock"` for the life of the process, so two simulators never
    /// share one image.
    package static func lock(imagePath: String) throws(StorageError) {
        // Never through a link, and only a regular file of this user's (another user's could be held locked by them).
        let fd = open(imagePath + ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw StorageError("cannot create \(imagePath).lock: \(String(cString: strerror(errno)))")
        }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_uid == geteuid() else {
            close(fd)
            throw StorageError("\(imagePath).lock is not a regular file of this user's: remove it")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw StorageError("\(imagePath) is in use by another fidosim (locked through \(imagePath).lock)")
        }
        // The descriptor stays open (and locked) until the process ends.
    }
}

/// The persistent state a `serve` starts from: a flash image, or memory.
package struct PersistentKey {
    package var storage: any AuthenticatorStorage
    package var serial: String
    package var summary: String

    package static func open(
        flash: String,
        geometry: GeometryChoice?,
        durability: Durability = .process,
        entropy: inout EntropySource
    ) throws(StorageError) -> PersistentKey {
        if flash == "memory" {
            let serial = entropy.bytes(8)
            return PersistentKey(
                storage: MemoryStorage(deviceSecret: entropy.bytes(32)),
                serial: Hex.string(serial, uppercase: true),
                summary: "memory"
            )
        }
        let directory = String(
            flash.split(separator: "/", omittingEmptySubsequences: false).dropLast()
                .joined(separator: "/")
        )
        if !directory.isEmpty { try KeyFiles.makeDirectories(directory) }
        try KeyFiles.lock(imagePath: flash)
        let device: FileFlash
        do {
            if access(flash, F_OK) == 0 {
                device = try FileFlash.open(path: flash, sync: durability == .host)
                if let geometry, device.geometry != geometry.geometry {
                    throw StorageError(
                        "\(flash) is an image of \(device.geometry), not \(geometry.rawValue): "
                            + "omit --flash-geometry or use another image"
                    )
                }
            } else {
                device = try FileFlash.open(
                    path: flash,
                    geometry: (geometry ?? .nrf52840).geometry,
                    create: true,
                    sync: durability == .host
                )
            }
        } catch let error as StorageError {
            throw error
        } catch {
            throw StorageError("cannot open the flash image \(flash): \(error)")
        }
        let storage = try FlashStorage(device: device, entropy: &entropy)
        for line in storage.damage { printError("fidosim: \(flash): damage: \(line)") }
        let credentials = storage.residentCount
        return PersistentKey(
            storage: storage,
            serial: Hex.string(storage.serial, uppercase: true),
            summary: "\(flash), \(credentials) discoverable credential\(credentials == 1 ? "" : "s"), "
                + "durability \(durability.rawValue)"
        )
    }
}
