import CUMockdev
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// umockdev's testbed library, loaded once (libumockdev.so.0 of Debian's `libumockdev0`).
enum UMockdevLibrary {
    /// The packages that bring the testbed library and the preload library its clients run with.
    static let packages = "umockdev and libumockdev0 (Debian, Ubuntu: sudo apt-get install umockdev libumockdev0)"

    /// The function table, or why it could not be loaded. Written once, by the lazy initialiser, and only read after.
    static let loaded: Result<fidosim_umockdev, TransportError> = {
        var api = fidosim_umockdev()
        var why = [CChar](repeating: 0, count: 512)
        guard fidosim_umockdev_load(&api, &why, why.count) == 0 else {
            let reason = String(decoding: why.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return .failure(
                TransportError("the private hidraw key needs umockdev's library (\(reason)): install \(packages)")
            )
        }
        return .success(api)
    }()

    static func api() throws(TransportError) -> fidosim_umockdev { try loaded.get() }

    /// The table, once a node exists (which needed it loaded).
    static var ready: fidosim_umockdev { (try? loaded.get()) ?? fidosim_umockdev() }
}

/// The umockdev testbed of this process: a private `/sys` and `/dev` that programs started with ``environment`` see
/// instead of the real ones. fidosim is the testbed process: it adds the keys' devices and answers their nodes.
///
/// One per process (umockdev keeps its directory in the process's `UMOCKDEV_DIR`). The directory is made 0700 by
/// umockdev and removed by ``close()``; one left by a killed run is removed by the next start (``removeStale()``).
package final class PrivateTestbed: Sendable {
    /// The preload library the tree's programs run with (Debian's `umockdev` package).
    package static let preloadLibrary = "libumockdev-preload.so.0"
    /// Set while fidosim re-executes itself under the preload, so that it does so once.
    static let reexecMarker = "FIDOSIM_UMOCKDEV_REEXEC"
    /// The file in a testbed directory that names the fidosim process that owns it.
    static let ownerFile = "fidosim.pid"

    let testbed: UInt
    package let root: String
    /// The hidraw minors and HID sequence numbers handed out so far.
    let numbers = Mutex<(minors: Set<Int>, sequence: Int)>(([], 0))

    private static let shared = Mutex<PrivateTestbed?>(nil)

    /// The process's testbed, made on first use.
    package static func open() throws(TransportError) -> PrivateTestbed {
        let result: Result<PrivateTestbed, TransportError> = shared.withLock { current in
            if let current { return .success(current) }
            let made = Result { () throws(TransportError) in try PrivateTestbed() }
            if case .success(let testbed) = made { current = testbed }
            return made
        }
        return try result.get()
    }

    private init() throws(TransportError) {
        let api = try UMockdevLibrary.api()
        guard fidosim_umockdev_preloaded() != 0 else {
            throw TransportError(
                "the private hidraw key runs under umockdev's preload library, which did not load: install "
                    + UMockdevLibrary.packages
            )
        }
        Self.removeStale()
        guard let made = api.testbed_new!() else { throw TransportError("umockdev could not make a testbed") }
        testbed = UInt(bitPattern: made)
        guard let dir = api.testbed_get_root_dir!(made) else {
            throw TransportError("umockdev gave no testbed directory")
        }
        root = String(cString: dir)
        api.free!(dir)
        // The owner's pid, for the next start to tell a live testbed from one a killed run left.
        let owner = root + "/" + Self.ownerFile
        let fd = Glibc.open(owner, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        if fd >= 0 {
            let text = Array("\(getpid())\n".utf8)
            _ = text.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            Glibc.close(fd)
        }
    }

    /// Makes sure this process runs under umockdev's preload library, which the testbed process needs (its uevents
    /// reach the tree's programs through it): if it does not, re-executes the program with it. Returns when it does.
    package static func runUnderPreload() throws(TransportError) {
        _ = try UMockdevLibrary.api()
        if fidosim_umockdev_preloaded() != 0 {
            unsetenv(reexecMarker)
            return
        }
        guard getenv(reexecMarker) == nil else {
            throw TransportError(
                "umockdev's preload library \(preloadLibrary) did not load: install " + UMockdevLibrary.packages
            )
        }
        setenv("LD_PRELOAD", preloadValue(existing: getenv("LD_PRELOAD").map { String(cString: $0) }), 1)
        setenv(reexecMarker, "1", 1)
        let arguments = CommandLine.arguments
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        execv("/proc/self/exe", &argv)
        throw TransportError("cannot re-execute fidosim under umockdev's preload: \(String(cString: strerror(errno)))")
    }

    var pointer: UnsafeMutableRawPointer { UnsafeMutableRawPointer(bitPattern: testbed)! }

    /// The environment that makes a program part of the tree: it sees this testbed's devices, and only them.
    package var environment: [(String, String)] {
        [
            ("LD_PRELOAD", Self.preloadValue(existing: getenv("LD_PRELOAD").map { String(cString: $0) })),
            ("UMOCKDEV_DIR", root),
        ]
    }

    /// `LD_PRELOAD` with umockdev's preload library first (once).
    static func preloadValue(existing: String?) -> String {
        let others = (existing ?? "").split(whereSeparator: { $0 == ":" || $0 == " " }).map(String.init)
            .filter { !$0.contains("libumockdev-preload") }
        return ([preloadLibrary] + others).joined(separator: ":")
    }

    /// A plug-in's numbers, as the kernel hands them out: the lowest hidraw minor no node has (umockdev keeps a
    /// removed node's terminal, so a minor is never given twice here), and the next HID sequence number.
    func plugNumbers(preferred: Int) -> (minor: Int, sequence: Int) {
        numbers.withLock { numbers in
            var minor = preferred
            while numbers.minors.contains(minor) { minor += 1 }
            numbers.minors.insert(minor)
            numbers.sequence += 1
            return (minor, numbers.sequence)
        }
    }

    /// Adds one device in umockdev-record's format; umockdev announces it with an `add` uevent.
    func add(record: String) throws(TransportError) {
        let api = try UMockdevLibrary.api()
        var error: UnsafeMutablePointer<fidosim_gerror>?
        guard api.testbed_add_from_string!(pointer, record, &error) != 0 else {
            let message = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "unknown error"
            if let error { api.error_free!(error) }
            throw TransportError("umockdev refused a device: \(message)")
        }
    }

    /// Announces the removal of a device and removes it (its node too, for a class device with one).
    func remove(syspath: String) {
        guard let api = try? UMockdevLibrary.api() else { return }
        api.testbed_uevent!(pointer, syspath, "remove")
        api.testbed_remove_device!(pointer, syspath)
    }

    /// Sends every connection to `devnode` through `handler` (an ioctl base with fidosim's signal handlers).
    func attach(devnode: String, handler: UnsafeMutableRawPointer) throws(TransportError) {
        let api = try UMockdevLibrary.api()
        var error: UnsafeMutablePointer<fidosim_gerror>?
        guard api.testbed_attach_ioctl!(pointer, devnode, handler, &error) != 0 else {
            let message = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "unknown error"
            if let error { api.error_free!(error) }
            throw TransportError("umockdev could not attach \(devnode): \(message)")
        }
    }

    /// The testbed's side of a node's pseudo-terminal.
    func masterDescriptor(devnode: String) -> Int32 {
        guard let api = try? UMockdevLibrary.api() else { return -1 }
        return api.testbed_get_dev_fd!(pointer, devnode)
    }

    /// Removes the testbed and its directory. The process's keys are gone with it.
    package func close() {
        guard let api = try? UMockdevLibrary.api() else { return }
        api.object_unref!(pointer)
    }

    /// Removes the testbed directories of this user that a fidosim process left behind when it was killed: those
    /// whose owner file names a process that is gone.
    static func removeStale() {
        let tmp = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        guard let dir = opendir(tmp) else { return }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix("umockdev.") else { continue }
            let path = tmp + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == getuid() else { continue }
            guard let owner = readSmallFile(path + "/" + ownerFile),
                let pid = owner.split(whereSeparator: \.isWhitespace).first.flatMap({ Int32($0) })
            else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { removeTree(path) }
        }
    }

    static func readSmallFile(_ path: String) -> String? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        return n > 0 ? String(decoding: buffer.prefix(n), as: UTF8.self) : nil
    }

    /// `rm -rf path`, without following links.
    static func removeTree(_ path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            if let dir = opendir(path) {
                var names: [String] = []
                while let entry = readdir(dir) {
                    let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                        String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                    }
                    if name != "." && name != ".." { names.append(name) }
                }
                closedir(dir)
                for name in names { removeTree(path + "/" + name) }
            }
            rmdir(path)
        } else {
            unlink(path)
        }
    }
}
