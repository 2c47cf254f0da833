import ArgumentParser
import CTAPCore
import FlashStore
import HIDBridge

#if canImport(Glibc)
import Glibc
#endif

/// The flash geometries a new image can have.
/// What an acknowledged write survives (storage.md, "What survives what").
enum Durability: String, ExpressibleByArgument, CaseIterable {
    /// Written to the file (`pwrite`) before the answer: survives the process being killed, not a host crash.
    case process
    /// Also flushed to the disk (`fdatasync`) before the answer: survives a host crash or power loss too.
    case host
}

enum GeometryChoice: String, ExpressibleByArgument, CaseIterable {
    case nrf52840, stm32l4, large

    var geometry: FlashGeometry {
        switch self {
        case .nrf52840: .nrf52840
        case .stm32l4: .stm32l4
        case .large: .large
        }
    }
}

/// Where a key's files live.
enum KeyFiles {
    /// `$XDG_DATA_HOME/fidosim`, else `~/.local/share/fidosim`.
    static var dataDirectory: String {
        if let xdg = getenv("XDG_DATA_HOME").map({ String(cString: $0) }), xdg.hasPrefix("/") {
            return xdg + "/fidosim"
        }
        let home = getenv("HOME").map { String(cString: $0) } ?? "/tmp"
        return home + "/.local/share/fidosim"
    }

    static func defaultImagePath(name: String) -> String { dataDirectory + "/" + name + ".img" }

    /// `$XDG_RUNTIME_DIR/fidosim/NAME.sock`, else `~/.local/share/fidosim/NAME.sock`.
    static func defaultControlPath(name: String) -> String {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") {
            return runtime + "/fidosim/" + name + ".sock"
        }
        return dataDirectory + "/" + name + ".sock"
    }

    /// Creates `path` (absolute, or relative to the current directory) and its parents with mode 0700 where missing.
    static func makeDirectories(_ path: String) throws(StorageError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0 && errno != EEXIST {
                throw StorageError("cannot create \(current): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Takes an exclusive lock on `path + ".lock"` for the life of the process, so two simulators never
    /// share one image.
    static func lock(imagePath: String) throws(StorageError) {
        let fd = open(imagePath + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StorageError("cannot create \(imagePath).lock: \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw StorageError("\(imagePath) is in use by another fidosim (locked through \(imagePath).lock)")
        }
        // The descriptor stays open (and locked) until the process ends.
    }
}

/// The persistent state a `serve` starts from: a flash image, or memory.
struct PersistentKey {
    var storage: any AuthenticatorStorage
    var serial: String
    var summary: String

    static func open(
        flash: String, geometry: GeometryChoice?, durability: Durability = .process, entropy: inout EntropySource
    ) throws(StorageError) -> PersistentKey {
        if flash == "memory" {
            let serial = entropy.bytes(8)
            return PersistentKey(
                storage: MemoryStorage(deviceSecret: entropy.bytes(32)), serial: hex(serial), summary: "memory")
        }
        let directory = String(flash.split(separator: "/", omittingEmptySubsequences: false).dropLast()
            .joined(separator: "/"))
        if !directory.isEmpty { try KeyFiles.makeDirectories(directory) }
        try KeyFiles.lock(imagePath: flash)
        let device: FileFlash
        do {
            if access(flash, F_OK) == 0 {
                device = try FileFlash.open(path: flash, sync: durability == .host)
                if let geometry, device.geometry != geometry.geometry {
                    throw StorageError(
                        "\(flash) is an image of \(device.geometry), not \(geometry.rawValue): "
                            + "omit --flash-geometry or use another image")
                }
            } else {
                device = try FileFlash.open(
                    path: flash, geometry: (geometry ?? .nrf52840).geometry, create: true, sync: durability == .host)
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
            storage: storage, serial: hex(storage.serial),
            summary: "\(flash), \(credentials) discoverable credential\(credentials == 1 ? "" : "s"), "
                + "durability \(durability.rawValue)")
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0 >> 4, radix: 16) + String($0 & 0xF, radix: 16) }.joined().uppercased()
    }
}
