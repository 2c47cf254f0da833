#if canImport(Glibc)
import Glibc
#endif

/// Where a key's files are by default: its image, its control socket, its environment file. Shared by `serve` (which
/// makes them) and the commands that reach a running key (`ctl`, `credentials`, `conform`), so that those need no
/// device module.
package enum KeyPaths {
    /// `$XDG_DATA_HOME/fidosim`, else `~/.local/share/fidosim`.
    package static var dataDirectory: String {
        if let xdg = getenv("XDG_DATA_HOME").map({ String(cString: $0) }), xdg.hasPrefix("/") {
            return xdg + "/fidosim"
        }
        return home + "/.local/share/fidosim"
    }

    /// `$HOME`, else the user's home in the password database: never a shared folder such as `/tmp`, where another
    /// user could have made the folders first.
    package static var home: String {
        if let home = getenv("HOME").map({ String(cString: $0) }), home.hasPrefix("/") { return home }
        if let entry = getpwuid(geteuid()), let directory = entry.pointee.pw_dir {
            let home = String(cString: directory)
            if home.hasPrefix("/") && home != "/" { return home }
        }
        return "/nonexistent"
    }

    package static func defaultImagePath(name: String) -> String { dataDirectory + "/" + name + ".img" }

    /// `$XDG_RUNTIME_DIR/fidosim/NAME.sock`, else `~/.local/share/fidosim/NAME.sock`.
    package static func defaultControlPath(name: String) -> String {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") {
            return runtime + "/fidosim/" + name + ".sock"
        }
        return dataDirectory + "/" + name + ".sock"
    }

    /// `$XDG_RUNTIME_DIR/fidosim/NAME.env`, else `~/.local/share/fidosim/NAME.env`: the private key's environment.
    package static func defaultEnvironmentPath(name: String) -> String {
        let socket = defaultControlPath(name: name)
        return String(socket.dropLast(".sock".count)) + ".env"
    }
}
