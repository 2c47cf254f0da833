"""Flash image files from outside are untrusted input: crafted headers, images others may write or own, and a disk
that fills during a creation each get a clear message from `serve`, `flash inspect` and `credentials export`,
never a crash, a huge allocation or a half-written image."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import struct
import subprocess
import zlib

import pytest

from fidosim import FidosimServer, KeyStartError, find_binary


def crafted_header(word: int, page: int, pages: int) -> bytes:
    """A 64-byte image header with a valid magic, version and CRC that describes the given geometry."""
    offset = (64 + 4 * pages + 4095) // 4096 * 4096
    fields = b"FIDOFLSH" + struct.pack("<8I", 1, offset & 0xFFFFFFFF, word, page, pages, 2, 10_000, 0)
    return (fields + struct.pack("<I", zlib.crc32(fields))).ljust(64, b"\0")


def commands(image) -> dict[str, list[str]]:
    """Every command that opens an image, with the image."""
    binary = str(find_binary())
    return {
        "serve": [binary, "serve", "--transport", "udp", "--port", "0", "--control", "off", "--flash", str(image)],
        "inspect": [binary, "flash", "inspect", str(image)],
        "export": [binary, "credentials", "export", "--flash", str(image), "-o", str(image) + ".json"],
    }


def run(command, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, **kwargs)


@pytest.mark.parametrize("word,page,pages,message", [
    (4, 1 << 31, 1 << 20, "at most 256 MiB"),  # c2c5324: "failed to allocate 2251799813685280 bytes", abort
    (4, 4096, 196_608, "at most 256 MiB"),  # 768 MiB in an 8 KiB file: c2c5324 grew to 784 MiB first
    (4, 4096, 20, "header announces 81920 bytes"),  # a header and no flash
])
def test_a_crafted_header_gets_a_clear_error_from_every_command(tmp_path, word, page, pages, message):
    image = tmp_path / "crafted.img"
    image.write_bytes(crafted_header(word, page, pages) + bytes(8192 - 64))
    image.chmod(0o600)
    for name, command in commands(image).items():
        done = run(command)
        assert done.returncode == 1, (name, done.returncode, done.stderr)  # an error, not a signal
        assert message in done.stderr, (name, done.stderr)
        assert "Fatal error" not in done.stderr
    assert image.read_bytes()[:64] == crafted_header(word, page, pages), "a refused image is left as it was"


def image_server(image, *args, **options) -> FidosimServer:
    """A UDP key on ``image`` with no control socket, serve's own presence and notifications (the package's
    FidosimServer, not started)."""
    options = {"presence_delay_ms": None, **options}
    return FidosimServer(flash=image, control="off", presence=None, notify=None, args=args, startup_timeout=60,
                         **options)


def make_image(tmp_path):
    """A fresh image made by `serve` (which creates it), stopped cleanly."""
    image = tmp_path / "key.img"
    server = image_server(image).start()
    code = server.stop()
    err = server.stderr()
    server.close()
    assert code == 0, err
    assert image.exists()
    return image


def test_new_images_and_their_lock_files_are_private(tmp_path):
    image = make_image(tmp_path)
    assert image.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "key.img.lock").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("mode,who", [(0o666, "every user"), (0o660, "its group")])
def test_an_image_others_may_write_is_refused_with_the_fix(tmp_path, mode, who):
    image = make_image(tmp_path)
    image.chmod(mode)
    for name, command in commands(image).items():
        done = run(command)
        assert done.returncode == 1, (name, done.stderr)
        assert f"may be written by {who}" in done.stderr and f"chmod 600 {image}" in done.stderr, (name, done.stderr)
    image.chmod(0o600)
    assert run(commands(image)["inspect"]).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_an_image_of_another_user_is_refused_with_the_fix(tmp_path):
    image = make_image(tmp_path)
    try:
        os.chown(image, 65534, 65534)
    except OSError as error:
        pytest.skip(f"user 65534 cannot own a file here: {error}")
    for name, command in commands(image).items():
        done = run(command)
        assert done.returncode == 1, (name, done.stderr)
        assert "belongs to user 65534" in done.stderr and f"chown {os.geteuid()} {image}" in done.stderr, done.stderr
    os.chown(image, 0, 0)
    assert run(commands(image)["inspect"]).returncode == 0


def test_an_image_that_cannot_be_written_whole_is_not_left_behind(tmp_path):
    """The disk fills during the creation (a file-size limit of 16 KiB: writes beyond it fail with EFBIG): serve
    says why and leaves neither the image nor its temporary file; the next start creates it whole."""
    image = tmp_path / "key.img"

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))

    done = run(commands(image)["serve"], preexec_fn=small_disk)
    assert done.returncode == 1, done.stderr
    assert "cannot open the flash image" in done.stderr and "File too large" in done.stderr, done.stderr
    assert not image.exists()
    assert [p.name for p in tmp_path.iterdir() if ".new-" in p.name] == []
    make_image(tmp_path)
    assert run(commands(image)["inspect"]).returncode == 0


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.parametrize("durability", ["process", "host"])
def test_durability_host_flushes_every_write_before_the_answer(tmp_path, durability):
    """Seen from the kernel (strace): with --durability host every pwrite to the image is followed by an fdatasync
    before the next answer leaves the key; with process (the default) nothing is flushed."""
    from fido2.ctap2 import Ctap2

    from fidosim.testing import assert_by_id, make_cred

    image, trace = tmp_path / "key.img", tmp_path / "trace"
    # SIGTERM goes to fidosim itself (strace, told to stop, would detach and leave it running); strace then exits.
    server = image_server(image, "--durability", durability, presence_delay_ms=0, stdout=subprocess.PIPE,
                          prefix=("strace", "-f", "-qq", "-e", "trace=pwrite64,fdatasync,sendto,sendmsg,sendmmsg",
                                  "-o", str(trace)))
    try:
        server.start()
    except KeyStartError as error:
        if "ptrace" in str(error) or "Operation not permitted" in str(error):
            pytest.skip(f"strace cannot trace here: {server.stderr().strip()}")
        pytest.fail(f"serve under strace did not start: {error}")
    try:
        ctap2 = Ctap2(server.key.device())
        _, cred = make_cred(ctap2, os.urandom(16), rk=True)
        for _ in range(3):
            assert_by_id(ctap2, cred)
    finally:
        server.stop()
        out = server.process.stdout.read()
        server.close()
    assert f"durability {durability}" in out, out
    calls = [line.split("(", 1)[0].split()[-1] for line in trace.read_text().splitlines() if "(" in line]
    writes = [i for i, name in enumerate(calls) if name == "pwrite64"]
    assert len(writes) >= 4, calls  # the first start's records, the credential and three counters
    syncs = calls.count("fdatasync")
    if durability == "process":
        assert syncs == 0, calls
        return
    sends = [i for i, name in enumerate(calls) if name.startswith("send")]
    for w in writes:
        next_send = next((s for s in sends if s > w), len(calls))
        assert "fdatasync" in calls[w + 1:next_send], f"a pwrite at {w} was answered before it was flushed: {calls}"


def test_a_write_the_disk_refuses_fails_the_request_and_loses_nothing(tmp_path):
    """A write the file refuses during operation (here a file size limit, EFBIG, as a full disk's ENOSPC would):
    the request fails with a CTAP error, stderr says why, the key goes on as after a power cut during that write
    (later writes work once the file takes them, without a restart), and a restart finds every acknowledged
    credential."""
    from fido2.ctap import CtapError
    from fido2.ctap2 import Ctap2

    from fidosim.testing import RP_ID, make_cred, new_cdh

    image = tmp_path / "key.img"
    assert run(commands(image)["inspect"]).returncode != 0  # no image yet
    make_image(tmp_path)

    def serve(limit: int | None):
        def small_disk():
            if limit is not None:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

        server = image_server(image, presence_delay_ms=0, preexec_fn=small_disk).start()
        return server, Ctap2(server.key.device())

    # The image's first flash page starts at 4096: only it may be written.
    server, ctap2 = serve(limit=2 * 4096)
    acknowledged = 0
    try:
        for i in range(40):
            try:
                make_cred(ctap2, bytes([i + 1]) * 32, rk=True, name="n" * 60)
                acknowledged += 1
            except CtapError as e:
                assert e.code == CtapError.ERR.OTHER, e
                break
        else:
            pytest.fail("every write was taken")
        assert acknowledged >= 3
        # The file takes writes again: the key goes on without a restart.
        resource.prlimit(server.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        make_cred(ctap2, b"\xEE" * 32, rk=True)
        acknowledged += 1
    finally:
        server.stop()
        err = server.stderr()
        server.close()
    assert "File too large" in err and "fails, as after a power cut" in err, err

    server, ctap2 = serve(limit=None)
    try:
        assert ctap2.get_assertion(RP_ID, new_cdh()).number_of_credentials == acknowledged
    finally:
        server.close()
