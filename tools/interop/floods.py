"""A raw USB/IP host (also test_usbip_interop.py's), and USB/IP floods against a key that is also on UDP, measured
from outside: while a host opens hundreds of connections, leaves transfers waiting without end, or never reads what
the key sends, the owner's getInfo over UDP goes on, and the key's descriptors and memory stay bounded (issue 42).

`python tools/interop/floods.py` (or `make flood-figures`) prints the figures; test_peer_access.py runs the same
floods and checks the bounds.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field

from fido2.ctap2 import Ctap2

from fidosim import FidosimServer
from fidosim.udp import open_udp_device

DEVID = 0x00010002


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def read_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise EOFError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def import_configured(port: int) -> socket.socket:
    """A host that imported the key and configured it (SET_CONFIGURATION 1)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(struct.pack(">HHI", 0x0111, 0x8003, 0) + b"1-1".ljust(32, b"\0"))
    got = read_exactly(s, 8 + 0x138)
    assert struct.unpack(">HHI", got[:8]) == (0x0111, 0x0003, 0)
    s.sendall(submit(1, False, 0, 0, bytes([0, 9, 1, 0, 0, 0, 0, 0])))
    s.recv(48)
    return s


def submit(seqnum, direction_in, ep, length, setup=b"\0" * 8, data=b""):
    return struct.pack(">IIIIIIIIII", 1, seqnum, DEVID, 1 if direction_in else 0, ep, 0, length, 0, 0xFFFFFFFF,
                       0) + setup + data


def closed_by_peer(s: socket.socket, timeout: float) -> bool:
    """Whether the key closed this connection within `timeout` (what it sent before is read and dropped)."""
    s.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (socket.timeout, TimeoutError):
        return False
    return False


@dataclass
class OwnerLoop:
    """The owner's getInfo over UDP, one after another, while a flood runs."""
    host: str
    port: int
    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self):
        device = open_udp_device(self.host, self.port)
        ctap = Ctap2(device)
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                ctap.get_info()
                self.latencies.append(time.monotonic() - started)
            except Exception:  # a timeout is what is measured
                self.failures += 1
            time.sleep(0.01)

    def __enter__(self):
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)

    @property
    def worst(self) -> float:
        return max(self.latencies, default=float("inf"))


@dataclass
class Figures:
    name: str
    owner_calls: int
    owner_failures: int
    owner_worst_ms: float
    fds_before: int
    fds_peak: int
    rss_before_kib: int
    rss_after_kib: int
    detail: str

    def line(self) -> str:
        return (f"{self.name}: owner getInfo over UDP {self.owner_calls} answered, {self.owner_failures} failed, "
                f"slowest {self.owner_worst_ms:.1f} ms; key descriptors {self.fds_before} -> peak {self.fds_peak}; "
                f"RSS {self.rss_before_kib} -> {self.rss_after_kib} KiB; {self.detail}")


def start_key() -> tuple[FidosimServer, int]:
    port = free_tcp_port()
    server = FidosimServer(transport="udp", args=["--transport", "usbip", "--usbip-port", str(port)])
    server.start()
    return server, port


def measure(name: str, flood, seconds: float = 3.0) -> Figures:
    server, port = start_key()
    try:
        pid = server.process.pid
        key = server.keys[0]
        fds_before, rss_before = fd_count(pid), rss_kib(pid)
        peak = [fds_before]
        with OwnerLoop(key.record["host"], key.record["port"]) as owner:
            detail = flood(port, seconds, lambda: peak.append(fd_count(pid)))
        return Figures(name, len(owner.latencies), owner.failures, owner.worst * 1000, fds_before, max(peak),
                       rss_before, rss_kib(pid), detail)
    finally:
        server.stop()


def connection_flood(port: int, seconds: float, sample) -> str:
    """300 connections held open at once, a new one every millisecond or so."""
    held = []
    refused = 0
    deadline = time.monotonic() + seconds
    while len(held) + refused < 300 and time.monotonic() < deadline:
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            refused += 1
        sample()
    time.sleep(1.0)  # generous time, one a loaded machine meets, for the key to take and refuse the last of them
    sample()
    open_ones = sum(1 for s in held if not closed_by_peer(s, 0.05))
    for s in held:
        s.close()
    return f"300 connections opened, {open_ones} kept open by the key"


def waiting_transfers_flood(port: int, seconds: float, sample) -> str:
    """One host submits interrupt IN transfers without end (the key answers none: no report waits)."""
    s = import_configured(port)
    sent = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and sent < 200_000:
            s.sendall(b"".join(submit(10 + sent + i, True, 1, 64) for i in range(1000)))
            sent += 1000
            sample()
    except (BrokenPipeError, ConnectionResetError):
        pass
    dropped = closed_by_peer(s, 2)
    s.close()
    return f"{sent} IN transfers submitted, host dropped: {dropped}"


def silent_host_flood(port: int, seconds: float, sample) -> str:
    """One host sends CTAPHID pings (interrupt OUT) with an interrupt IN transfer for each answer, and never reads
    what the key sends back: the key's socket buffer fills, then what it queues for the host."""
    s = import_configured(port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    ping = struct.pack(">IBH", 0xFFFFFFFF, 0x81, 0) + bytes(57)
    sent = 0
    deadline = time.monotonic() + seconds
    s.settimeout(seconds)
    try:
        while time.monotonic() < deadline:
            s.sendall(b"".join(submit(10 + sent + 2 * i, False, 1, 64, data=ping)
                               + submit(11 + sent + 2 * i, True, 1, 64) for i in range(100)))
            sent += 200
            sample()
    except (BrokenPipeError, ConnectionResetError, socket.timeout, TimeoutError):
        pass
    dropped = closed_by_peer(s, 2)
    s.close()
    return f"{sent} transfers sent by a host that reads nothing, host dropped: {dropped}"


FLOODS = [
    ("connections", connection_flood),
    ("waiting IN transfers", waiting_transfers_flood),
    ("a host that never reads", silent_host_flood),
]


def main() -> int:
    for name, flood in FLOODS:
        print(measure(name, flood).line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
