"""Start a key from a shell script through the package: `fidosim serve` with the given options, held until a signal.

    python -m fidosim.launch [--binary BIN] [--record FILE] [--hidraw] [--timeout S] -- SERVE_OPTIONS...

It starts serve with exactly SERVE_OPTIONS (``FidosimServer(serve_args=...)``, which adds only ``--ready-file``);
serve's standard input, output and error are this program's. Once serve has written its ready file (and, with
``--hidraw``, each key's /dev/hidrawN exists: a uhid key's found by its serial number, a private key's from its
record), it writes serve's ready record as one JSON line to FILE (written whole, then renamed into place; default:
standard output), with ``"hidraw"``: the node of each key, under ``--hidraw``. SIGTERM, SIGINT and SIGHUP stop
serve (SIGTERM, then SIGKILL after 5 s) and SIGUSR1 goes to serve (a power cycle); the exit status is serve's (128+N
for a signal N), also when serve ends by itself. A key that does not start exits with serve's status, or 1.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time

from .key import SHUTDOWN_TIMEOUT, FidosimServer, Key, KeyStartError


def exit_status(code: int | None) -> int:
    """A process's exit status as a shell reports it: 128+N for signal N, 1 when there is none."""
    if code is None:
        return 1
    return 128 - code if code < 0 else code


def hidraw_node(key: Key, timeout: float) -> str:
    """The key's /dev/hidrawN: a private key's record names it; a uhid key's is the hidraw node whose HID device has
    the key's serial number (HID_UNIQ in its uevent), as the kernel lists it. The standard library only, not
    python-fido2's device list: importing python-fido2 (and its cryptography) took about 8 s per key in the VM run's
    emulated guest, which reads every file anew from the host."""
    if key.transport == "private":
        node = key.record.get("devnode") or key.server.record.get("devnode")
        if not node:
            raise TimeoutError(f"the record of private key {key.name} names no hidraw node")
        return node
    deadline = time.monotonic() + timeout
    while True:
        for uevent in sorted(glob.glob("/sys/class/hidraw/hidraw*/device/uevent")):
            try:
                with open(uevent) as f:
                    if f"HID_UNIQ={key.serial}" not in f.read().splitlines():
                        continue
            except OSError:  # listed, then gone
                continue
            node = "/dev/" + uevent.split("/")[4]
            if os.path.exists(node):
                return node
        if time.monotonic() >= deadline or not key.server.running:
            raise TimeoutError(f"no hidraw node with serial {key.serial} within {timeout} s")
        time.sleep(0.05)


def write_record(record: dict, path: str | None) -> None:
    line = json.dumps(record, sort_keys=True) + "\n"
    if path is None:
        sys.stdout.write(line)
        sys.stdout.flush()
        return
    # As serve writes its ready file: a new temporary of a random name (never through a link), renamed over the name.
    partial = f"{path}.{os.urandom(8).hex()}.tmp"
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(descriptor, "w") as f:
        f.write(line)
    os.replace(partial, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fidosim.launch",
                                     description="Starts `fidosim serve SERVE_OPTIONS` and holds it until a signal.")
    parser.add_argument("--binary", help="the fidosim binary (default: $FIDOSIM_BIN, else fidosim on PATH)")
    parser.add_argument("--record", help="where the ready record goes once the key is ready (default: stdout)")
    parser.add_argument("--hidraw", action="store_true", help="ready when each key's hidraw node exists too")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the key (default 60)")
    parser.add_argument("serve_args", nargs=argparse.REMAINDER, help="-- and serve's options")
    options = parser.parse_args(argv)
    serve_args = options.serve_args[1:] if options.serve_args[:1] == ["--"] else options.serve_args

    server = FidosimServer(binary=options.binary, serve_args=serve_args, stdin=None, stdout=None,
                           capture_stderr=False, startup_timeout=options.timeout)
    stopping: list[float] = []  # when a stop was asked for

    def on_signal(signum, _frame):
        running = server.process is not None and server.process.poll() is None
        if signum == signal.SIGUSR1:
            if running:
                server.send_signal(signum)
            return
        if not stopping:
            stopping.append(time.monotonic())
        if running:
            server.send_signal(signal.SIGTERM)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
        signal.signal(signum, on_signal)

    try:
        server.start()
        if stopping:
            raise KeyStartError("stopped during start-up")
        record = dict(server.record)
        if options.hidraw:
            deadline = time.monotonic() + options.timeout
            record["hidraw"] = [hidraw_node(key, max(0.0, deadline - time.monotonic())) for key in server.keys]
    except (KeyStartError, TimeoutError) as error:
        print(f"fidosim.launch: {error}", file=sys.stderr)
        code = server.close()
        return exit_status(code) if code else 1
    write_record(record, options.record)

    process = server.process
    while process.poll() is None:
        if stopping and time.monotonic() - stopping[0] > SHUTDOWN_TIMEOUT:
            process.kill()
        try:
            process.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
    code = process.returncode
    server.close()
    return exit_status(code)


if __name__ == "__main__":
    sys.exit(main())
