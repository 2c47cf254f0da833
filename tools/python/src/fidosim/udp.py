"""The UDP transport of `fidosim serve --transport udp`, as a python-fido2 device.

One UDP datagram carries exactly one raw 64-byte CTAPHID report (no report-id byte) in each direction; the
simulator answers to the sender's address. Everything here but ``open_udp_device`` and
``UdpCtapHidConnection`` works with the standard library alone; those two need python-fido2
(`pip install fidosim[fido2]`).
"""

from __future__ import annotations

import os
import random
import socket
import struct
import time

try:
    from fido2.hid import CtapHidDevice
    from fido2.hid.base import CtapHidConnection, HidDescriptor
except ImportError:  # the standard-library half still works
    CtapHidDevice = HidDescriptor = None
    CtapHidConnection = object

TYPE_INIT = 0x80
CTAPHID_INIT = 0x06

REPORT_SIZE = 64
BROADCAST_CID = 0xFFFFFFFF
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8111

# Magic datagram: the simulator treats it as "unplug and plug back in". No reply.
POWER_CYCLE = bytes.fromhex(
    "ac1052ca95e569de69e02ebff333485f13f9b2da34c5a8a340526697a9ab2e0b"
    "394d8d04973c134005be1a0140bff6045bb26eb77a73eaa47813f6b49a7250dc"
)
assert len(POWER_CYCLE) == REPORT_SIZE


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_udp_port(host: str = DEFAULT_HOST) -> int:
    """A UDP port a key may bind: one outside the kernel's ephemeral range, so that no client socket opened
    meanwhile (each gets an ephemeral port) can take it between this check and the key's bind."""
    low, high = _ephemeral_range()
    candidates = range(20000, low) if low > 21000 else range(high + 1, 65536)
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.choice(candidates)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError("no free UDP port outside the ephemeral range")


class UdpReadTimeout(TimeoutError):
    """No CTAPHID report arrived from the simulator in time."""


class UdpCtapHidConnection(CtapHidConnection):
    """CtapHidConnection over a UDP socket bound to the wildcard address, which takes the key's datagrams only."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 timeout: float = 5.0):
        self.host = host
        self.port = port
        self.timeout = timeout
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # Long responses (e.g. a 7 KB PING echo) arrive as >100 datagrams in a burst.
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        except OSError:
            pass
        # Bound to the wildcard address and not connected (connect() would bind the socket to one address): while
        # this socket holds its port, no other user's socket can take that port on any local address, so no one
        # can send to the key from this client's address and port (firmware-spec/security.md). Datagrams from
        # anywhere but the key are dropped here instead.
        self._sock.bind(("0.0.0.0", 0))
        # ICMP port unreachable (no key on the port) reaches an unconnected socket only with IP_RECVERR (11).
        self._sock.setsockopt(socket.IPPROTO_IP, 11, 1)
        self._key = (socket.gethostbyname(host), port)
        self._sock.settimeout(timeout)

    def write_packet(self, data: bytes) -> None:
        data = bytes(data)
        if len(data) != REPORT_SIZE:
            raise ValueError(f"CTAPHID report must be {REPORT_SIZE} bytes, got {len(data)}")
        sent = self._sock.sendto(data, self._key)
        if sent != REPORT_SIZE:
            raise OSError(f"short UDP send: {sent} of {REPORT_SIZE} bytes")

    def read_packet(self) -> bytes:
        deadline = time.monotonic() + self.timeout
        while True:
            self._sock.settimeout(max(0.0, deadline - time.monotonic()))
            try:
                data, sender = self._sock.recvfrom(4096)
            except (socket.timeout, BlockingIOError) as e:
                raise UdpReadTimeout(
                    f"no CTAPHID report from udp:{self.host}:{self.port} "
                    f"within {self.timeout} s"
                ) from e
            except ConnectionRefusedError:
                self._drain_errors()
                raise
            if sender == self._key:
                break
        if len(data) != REPORT_SIZE:
            raise OSError(
                f"expected a {REPORT_SIZE}-byte datagram, got {len(data)} bytes: {data.hex()}"
            )
        return data

    def _drain_errors(self) -> None:
        """Empties the error queue, which would otherwise keep the socket readable."""
        while True:
            try:
                self._sock.recvmsg(512, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except OSError:
                return

    def close(self) -> None:
        self._sock.close()


def _need_fido2() -> None:
    if CtapHidDevice is None:
        raise ImportError("a CTAP device needs python-fido2: pip install 'fidosim[fido2]' (or fido2)")


def descriptor_for(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT):
    _need_fido2()
    return HidDescriptor(
        path=f"udp:{host}:{port}",
        vid=0,
        pid=0,
        report_size_in=REPORT_SIZE,
        report_size_out=REPORT_SIZE,
        product_name="fidosim",
        serial_number=None,
    )


def open_udp_device(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                    timeout: float = 5.0):
    """Open a python-fido2 CtapHidDevice over UDP (the constructor performs CTAPHID_INIT)."""
    _need_fido2()
    conn = UdpCtapHidConnection(host, port, timeout)
    try:
        return CtapHidDevice(descriptor_for(host, port), conn)
    except BaseException:
        conn.close()
        raise


def probe_init(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
               timeout: float = 0.2) -> bool:
    """Send one CTAPHID_INIT on the broadcast channel; True if a matching reply came."""
    nonce = os.urandom(8)
    packet = struct.pack(">IBH", BROADCAST_CID, TYPE_INIT | CTAPHID_INIT, len(nonce)) + nonce
    packet = packet.ljust(REPORT_SIZE, b"\0")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        s.connect((host, port))
        s.settimeout(timeout)
        deadline = time.monotonic() + timeout
        try:
            s.send(packet)
            while time.monotonic() < deadline:
                s.settimeout(max(0.001, deadline - time.monotonic()))
                data = s.recv(4096)
                if (
                    len(data) == REPORT_SIZE
                    and struct.unpack_from(">IBH", data) == (BROADCAST_CID, TYPE_INIT | CTAPHID_INIT, 17)
                    and data[7:15] == nonce
                ):
                    return True
        except (socket.timeout, ConnectionRefusedError, OSError):
            return False
    return False


def wait_until_ready(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                     total: float = 2.0, is_alive=None) -> bool:
    """Poll CTAPHID_INIT until answered or `total` seconds pass.

    `is_alive` (optional callable) lets a caller stop early when the process died.
    """
    deadline = time.monotonic() + total
    while time.monotonic() < deadline:
        if is_alive is not None and not is_alive():
            return False
        if probe_init(host, port, timeout=min(0.2, max(0.01, deadline - time.monotonic()))):
            return True
        time.sleep(0.02)
    return False


def power_cycle(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                total: float = 10.0) -> None:
    """Send the power-cycle datagram, then wait until the key answers INIT again.

    The sending socket stays open until then: the key hears only its own user's sockets, and it can tell whose a
    socket is only while the socket exists."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(POWER_CYCLE, (host, port))
        if not wait_until_ready(host, port, total=total):
            raise UdpReadTimeout(
                f"udp:{host}:{port} did not answer CTAPHID_INIT within {total} s after power cycle"
            )
