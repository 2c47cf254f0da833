"""A pcscd of its own, with a vpcd reader on a free port, so that a fidosim key is a card every PC/SC client sees.

    from fidosim.pcsc import PcscDaemon
    from fidosim import start_key

    with PcscDaemon() as pcsc, start_key(transport="pcsc", pcsc=pcsc) as key:
        dev = key.device()                      # python-fido2's CtapPcscDevice (needs pyscard)

pcscd listens on one fixed socket (/run/pcscd/pcscd.comm), so one pcscd runs per machine: PcscDaemon refuses to
start beside one that runs already (a desktop's, started by systemd) and says so. It needs pcscd and
vsmartcard-vpcd (Debian packages `pcscd`, `vsmartcard-vpcd`); python-fido2's PC/SC device needs pyscard.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

PCSCD_SOCKET = "/run/pcscd/pcscd.comm"
VPCD_DRIVER = "/usr/lib/pcsc/drivers/serial/libifdvpcd.so"


class PcscUnavailable(RuntimeError):
    """pcscd or the vpcd driver is missing, or another pcscd runs already."""


def _socket_live(path: str) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        return True
    except OSError:
        return False
    finally:
        sock.close()


def free_tcp_port_pair(host: str = "127.0.0.1") -> int:
    """A port P with P and P+1 free on host (vpcd listens on both: readers 00 00 and 00 01)."""
    for _ in range(200):
        first = socket.socket()
        first.bind((host, 0))
        port = first.getsockname()[1]
        second = socket.socket()
        try:
            if port < 65535:
                second.bind((host, port + 1))
                return port
        except OSError:
            pass
        finally:
            first.close()
            second.close()
    raise RuntimeError("no two consecutive free TCP ports")


class PcscDaemon:
    """`pcscd -f -c DIR` whose only readers are two vpcd slots, `NAME 00 00` on ``port`` and `NAME 00 01` on
    ``port + 1``: give ``--vpcd-port port`` to `fidosim serve --transport pcsc`."""

    def __init__(self, name: str = "fidosim vpcd", pcscd: str | None = None, startup_timeout: float = 15.0):
        self.name = name
        self.pcscd = pcscd or shutil.which("pcscd") or "/usr/sbin/pcscd"
        self.startup_timeout = startup_timeout
        self.port = 0
        self.directory: str | None = None
        self.process: subprocess.Popen | None = None
        self._log = None

    @classmethod
    def attach(cls, port: int, name: str = "fidosim vpcd") -> "PcscDaemon":
        """A pcscd another process started (``python -m fidosim.pcsc``) whose vpcd reader listens on ``port``:
        its readers, without owning it (stop() leaves it running)."""
        daemon = cls(name=name)
        daemon.port = port
        daemon.attached = True
        return daemon

    attached = False

    def reader(self, index: int = 0) -> str:
        """The PC/SC name of reader `index` (0: the card on ``port``, 1: on ``port + 1``)."""
        return f"{self.name} 00 {index:02d}"

    def start(self) -> "PcscDaemon":
        if not os.path.exists(self.pcscd):
            raise PcscUnavailable("pcscd not found (Debian: apt install pcscd)")
        if not os.path.exists(VPCD_DRIVER):
            raise PcscUnavailable(f"the vpcd reader driver {VPCD_DRIVER} is missing "
                                  "(Debian: apt install vsmartcard-vpcd)")
        if _socket_live(PCSCD_SOCKET):
            raise PcscUnavailable(
                f"a pcscd runs already ({PCSCD_SOCKET} answers); pcscd has one socket per machine, so this test "
                "needs it stopped (systemctl stop pcscd.socket pcscd)")
        for stale in (PCSCD_SOCKET, "/run/pcscd/pcscd.pid"):
            try:
                os.unlink(stale)
            except FileNotFoundError:
                pass
            except PermissionError as error:
                raise PcscUnavailable(f"cannot remove the stale {stale}: {error}") from None
        if self.directory is None:
            self.port = free_tcp_port_pair()
            self.directory = tempfile.mkdtemp(prefix="fidosim-pcscd-")
            os.mkdir(os.path.join(self.directory, "conf"))
            with open(os.path.join(self.directory, "conf", "vpcd"), "w") as f:
                f.write(f'FRIENDLYNAME "{self.name}"\nDEVICENAME /dev/null:0x{self.port:04X}\n'
                        f"LIBPATH {VPCD_DRIVER}\nCHANNELID 0x{self.port:04X}\n")
        self._log = open(os.path.join(self.directory, "pcscd.log"), "w+b")
        self.process = subprocess.Popen([self.pcscd, "-f", "-i", "-c", os.path.join(self.directory, "conf")],
                                        stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        while not (_socket_live(PCSCD_SOCKET) and self._listening()):
            if self.process.poll() is not None:
                log = self.log()
                self.stop()
                raise PcscUnavailable(f"pcscd exited with code {self.process.returncode}:\n{log}")
            if time.monotonic() >= deadline:
                log = self.log()
                self.stop()
                raise PcscUnavailable(f"pcscd was not ready within {self.startup_timeout} s:\n{log}")
            time.sleep(0.05)
        return self

    def restart(self) -> "PcscDaemon":
        """Stops pcscd and starts it again with the same reader on the same port (a card reconnects by itself)."""
        self._stop_process()
        return self.start()

    def _listening(self) -> bool:
        """Whether vpcd listens for the card on ``port`` (pcscd -i logs it)."""
        return f"port {self.port}" in self.log()

    def log(self) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def _stop_process(self) -> int | None:
        # pyscard gives a connection's PC/SC context back when the object is collected, and raises if pcscd is
        # gone by then: collect what is unreachable while pcscd still answers.
        gc.collect()
        code = None
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        elif self.process is not None:
            code = self.process.returncode
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def stop(self) -> int | None:
        if self.attached:
            return None
        code = self._stop_process()
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
        return code

    def __enter__(self) -> "PcscDaemon":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def open_pcsc_device(reader: str, timeout: float = 10.0):
    """python-fido2's CtapPcscDevice for the card in `reader`, once a card is there (needs pyscard)."""
    from fido2.pcsc import CtapPcscDevice

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            for dev in CtapPcscDevice.list_devices(reader):
                return dev
        except Exception as error:  # no card yet: pyscard raises NoCardException and relatives
            last = error
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no FIDO card in reader {reader!r} within {timeout} s (last error: {last})")
        time.sleep(0.1)


def main() -> int:
    """`python -m fidosim.pcsc`: starts a pcscd with a vpcd reader on a free port, prints one JSON line (pid, port,
    readers) and keeps it until standard input closes or SIGTERM/SIGINT comes; then stops it."""
    import json
    import sys
    import threading

    daemon = PcscDaemon()
    try:
        daemon.start()
    except PcscUnavailable as error:
        print(f"fidosim.pcsc: {error}", file=sys.stderr)
        return 1
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    print(json.dumps({"pid": daemon.process.pid, "port": daemon.port, "readers": [daemon.reader(0), daemon.reader(1)]}),
          flush=True)
    done.wait()
    daemon.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
