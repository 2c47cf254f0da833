import Console
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Where fidosim writes its files (``WholeFile/write(_:to:mode:secret:)``): only into folders no other user can
/// change under it, and never through a link. The other user's side is tools/interop/test_private_key.py's.
@Suite struct WholeFileTests {
    /// A fresh folder of ours under /tmp (sticky, writable by all: a folder of ours in it is safe).
    func folder() throws -> String {
        var template = Array("/tmp/fidosim-wholefile.XXXXXX".utf8CString)
        let made = try #require(mkdtemp(&template))
        return String(cString: made)
    }

    @Test func aFileIsWrittenWholeInAFolderOfOurs() throws {
        let base = try folder()
        try WholeFile.write(Array("one\n".utf8), to: base + "/a.json", secret: true)
        #expect(try WholeFile.read(base + "/a.json") == Array("one\n".utf8))
        // A link planted at the name is replaced, not written through.
        symlink(base + "/victim", base + "/b.json")
        try WholeFile.write(Array("two\n".utf8), to: base + "/b.json")
        #expect(access(base + "/victim", F_OK) != 0)
        #expect(try WholeFile.read(base + "/b.json") == Array("two\n".utf8))
    }

    @Test func aLinkInThePathIsRefused() throws {
        let base = try folder()
        mkdir(base + "/real", 0o700)
        symlink(base + "/real", base + "/linked")
        #expect(throws: WholeFileError.self) { try WholeFile.write([1], to: base + "/linked/x.json") }
        #expect(access(base + "/real/x.json", F_OK) != 0)
    }

    @Test func aFolderOthersMayWriteTakesNoSecretAndNoFileUnlessSticky() throws {
        let base = try folder()
        mkdir(base + "/open", 0o777)
        chmod(base + "/open", 0o777)
        #expect(throws: WholeFileError.self) { try WholeFile.write([1], to: base + "/open/x.json") }
        chmod(base + "/open", 0o1777)
        try WholeFile.write([1], to: base + "/open/x.json")
        #expect(throws: WholeFileError.self) { try WholeFile.write([1], to: base + "/open/y.env", secret: true) }
    }

    @Test func relativePathsAndDotsAreTheFoldersTheyName() throws {
        let base = try folder()
        mkdir(base + "/sub", 0o700)
        let (fd, name) = try WholeFile.openFolder(of: base + "/sub/../sub/./z.json", secret: true)
        close(fd)
        #expect(name == "z.json")
    }

    @Test func onlyARegularFileIsRead() throws {
        let base = try folder()
        mkfifo(base + "/fifo", 0o600)
        #expect(throws: WholeFileError.self) { try WholeFile.read(base + "/fifo", regularOnly: true) }
        #expect(throws: WholeFileError.self) { try WholeFile.read("/dev/zero", regularOnly: true) }
        #expect(throws: WholeFileError.self) { try WholeFile.read(base, regularOnly: true) }
    }
}
