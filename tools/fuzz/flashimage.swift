// libFuzzer target: whole flash image files, header included, through the path every command takes to open one
// (FileFlash.open, then a mount of the store in memory, as `flash inspect` does). Compiled together with
// Sources/FlashStore and Sources/FlashImage. A header is untrusted: nothing may trap, hang or allocate more than
// the file can hold.

#if canImport(Glibc)
import Glibc
#endif

private let path = "/tmp/fidosim-fuzz-flashimage-\(getpid()).img"

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFlashImage(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fatalError("cannot write \(path)") }
    if let data, size > 0 { precondition(write(fd, data, size) == size, "short write to \(path)") }
    close(fd)
    defer { unlink(path) }  // the open image keeps its descriptor; nothing is left in /tmp
    let announced = try? FileFlash.geometry(ofImageAt: path)
    guard let file = try? FileFlash.open(path: path, sync: false) else { return 0 }
    precondition(announced == file.geometry, "the header read twice gave two geometries")
    // An image that opens holds every byte its header announces, and no more than the limit.
    precondition(file.geometry.totalSize <= FileFlash.maxFlashBytes && file.geometry.totalSize <= size)
    var memory = file.memory
    guard var store = try? FlashKVStore.mount(&memory) else { return 0 }
    for key in store.keys { _ = try? store.get(key) }
    _ = try? store.insert([1, 2, 3], for: 7)  // a mounted store takes a write or refuses it cleanly
    return 0
}
