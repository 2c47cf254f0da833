"""fidosim as a USB/IP server (`serve --transport usbip`), from the host side that needs no kernel module: Linux's
own `usbip list` reads the exported device, a raw client imports it and speaks URBs, and malformed clients are
disconnected without harming the key. The attach through vhci-hcd, and libfido2, OpenSSH and conform on the
imported device, run in the VM (tools/e2e/groups/usbip.sh).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import struct
import subprocess
import time

import pytest
from fido2.hid import CtapHidConnection, CtapHidDevice, HidDescriptor
from fido2.webauthn import ResidentKeyRequirement, UserVerificationRequirement
from floods import free_tcp_port, read_exactly, submit

from fidosim import FidosimServer, find_binary
from fidosim.testing import authenticate, make_client, make_server, register, web_user

DEVID = 0x00010002


@pytest.fixture
def usbip_key():
    port = free_tcp_port()
    server = FidosimServer(binary=find_binary(), transport="usbip",
                           args=["--usbip-port", str(port), "--serial", "USBIPTEST1"])
    server.start()
    yield server, port
    code = server.stop()
    assert code == 0, server.stderr()


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(5)
    return s


def import_device(port: int) -> socket.socket:
    s = connect(port)
    s.sendall(struct.pack(">HHI", 0x0111, 0x8003, 0) + b"1-1".ljust(32, b"\0"))
    reply = read_exactly(s, 8)
    assert struct.unpack(">HHI", reply) == (0x0111, 0x0003, 0)
    read_exactly(s, 0x138)
    return s


def ret_submit(s: socket.socket, with_data: bool):
    header = read_exactly(s, 48)
    command, seqnum, _, _, _, status, length = struct.unpack(">IIIIIiI", header[:28])
    assert command == 3
    return seqnum, status, read_exactly(s, length) if with_data and length else b""


class UsbipHidConnection(CtapHidConnection):
    """python-fido2's HID connection over a raw USB/IP import: one interrupt IN transfer always waits for the next
    report, each report goes out as an interrupt OUT transfer (a host without vhci-hcd, as on this kernel)."""

    def __init__(self, port: int):
        self.s = import_device(port)
        self.s.sendall(submit(1, False, 0, 0, bytes([0, 9, 1, 0, 0, 0, 0, 0])))  # SET_CONFIGURATION 1
        assert ret_submit(self.s, False)[1] == 0
        self.seqnum = 2
        self.in_seqnum = self._submit_in()

    def _submit_in(self) -> int:
        self.seqnum += 1
        self.s.sendall(submit(self.seqnum, True, 1, 64))
        return self.seqnum

    def _next(self):
        header = read_exactly(self.s, 48)
        seqnum, status, length = struct.unpack(">IiI", header[4:8] + header[20:28])
        data = read_exactly(self.s, length) if seqnum == self.in_seqnum and length else b""
        assert status == 0, f"URB {seqnum} failed with status {status}"
        return seqnum, data

    def write_packet(self, data: bytes) -> None:
        self.seqnum += 1
        out = self.seqnum
        self.s.sendall(submit(out, False, 1, 64, data=bytes(data)))

    def read_packet(self) -> bytes:
        while True:
            seqnum, data = self._next()
            if seqnum == self.in_seqnum:
                self.in_seqnum = self._submit_in()
                return data

    def close(self) -> None:
        self.s.close()


def open_usbip_device(port: int) -> CtapHidDevice:
    descriptor = HidDescriptor(path=f"usbip:127.0.0.1:{port}", vid=0x1209, pid=0xF1D0, report_size_in=64,
                               report_size_out=64, product_name="fidosim", serial_number=None)
    return CtapHidDevice(descriptor, UsbipHidConnection(port))


def test_one_key_on_udp_and_usbip_at_once_signs_on_one_what_the_other_made():
    port = free_tcp_port()
    server = FidosimServer(binary=find_binary(), transport="udp",
                           args=["--transport", "usbip", "--usbip-port", str(port), "--log-level", "info"])
    server.start()
    try:
        record = server.keys[0].record
        assert (record["transport"], record["usbipPort"], record["busId"]) == ("udp", port, "1-1")
        over_udp = server.keys[0].device()
        over_usbip = open_usbip_device(port)
        # Two hosts, each with its CTAPHID machine and its channels.
        assert over_udp._channel_id != over_usbip._channel_id
        rp = make_server()
        discouraged = UserVerificationRequirement.DISCOURAGED
        client, _ = make_client(over_udp, pin=None)
        _, made = register(rp, client, web_user("both"), rk=ResidentKeyRequirement.DISCOURAGED, uv=discouraged)
        client, _ = make_client(over_usbip, pin=None)
        authenticate(rp, client, [made.credential_data], uv=discouraged)
        # Requests on both, interleaved: each host hears only its own answers.
        for _ in range(3):
            assert over_udp.call(0x01, b"udp") == b"udp"
            assert over_usbip.call(0x01, b"usbip" * 40) == b"usbip" * 40
        # The USB/IP host letting go is not a power cycle here: UDP keeps its channel (a power cycle would have
        # made it invalid) and its request waiting for the key is not disturbed.
        over_usbip.close()
        deadline = time.monotonic() + 10
        while "the key stays plugged into udp" not in server.stderr() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "the key stays plugged into udp" in server.stderr()
        assert "power cycle" not in server.stderr()
        assert over_udp.call(0x01, b"still here") == b"still here"
    finally:
        assert server.stop() == 0, server.stderr()


@contextlib.contextmanager
def udp_and_usbip_key():
    """One key on UDP and USB/IP at once: python-fido2's device over UDP, and the USB/IP port."""
    port = free_tcp_port()
    server = FidosimServer(binary=find_binary(), transport="udp", args=["--transport", "usbip", "--usbip-port",
                                                                           str(port)])
    server.start()
    try:
        yield server.keys[0].device(), port
    finally:
        assert server.stop() == 0, server.stderr()


def test_a_host_neither_talks_nor_listens_on_another_hosts_channel():
    """Two hosts on one key: the USB/IP host writing on the UDP host's channel hears ERR_INVALID_CHANNEL, as from a
    key that never gave it that channel, and none of the UDP host's answers."""
    with udp_and_usbip_key() as (over_udp, port):
        theirs = over_udp._channel_id
        raw = UsbipHidConnection(port)
        raw.write_packet(struct.pack(">IBH", theirs, 0x81, 4) + b"evil" + bytes(53))  # PING on the UDP host's channel
        answer = raw.read_packet()
        assert answer[:7] == struct.pack(">IBH", theirs, 0xBF, 1) and answer[7] == 0x0B
        # The owner's own request on that channel is answered to the owner only.
        assert over_udp.call(0x01, b"mine" * 30) == b"mine" * 30
        raw.s.settimeout(0.5)
        with pytest.raises((socket.timeout, TimeoutError)):
            raw.read_packet()
        raw.close()


def test_a_hosts_lock_and_half_sent_message_hold_only_that_host():
    """The USB/IP host takes a LOCK and leaves a message half sent: it hears the LOCK's answer and, 750 ms later, its
    message's timeout; the UDP host is served all along (one CTAPHID machine for both answered it CHANNEL_BUSY)."""
    with udp_and_usbip_key() as (over_udp, port):
        raw = UsbipHidConnection(port)
        raw.write_packet(struct.pack(">IBH", 0xFFFFFFFF, 0x86, 8) + b"12345678" + bytes(49))
        answer = raw.read_packet()
        assert answer[4] == 0x86 and answer[7:15] == b"12345678"
        mine = answer[15:19]
        raw.write_packet(mine + bytes([0x84, 0, 1, 10]) + bytes(56))  # LOCK 10 s
        assert raw.read_packet()[:7] == mine + bytes([0x84, 0, 0])
        raw.write_packet(mine + bytes([0x81, 0, 200]) + bytes(57))  # the first of a 200-byte PING's packets
        sent_at = time.monotonic()
        answered = []
        while len(answered) < 5 or time.monotonic() - sent_at < 1.5:
            started = time.monotonic()
            assert over_udp.call(0x01, b"owner" * 20) == b"owner" * 20
            assert over_udp.call(0x10, b"\x04")[0] == 0
            answered.append(time.monotonic() - started)
        print(f"the UDP host's operations under the USB/IP host's LOCK: {len(answered)}, slowest "
              f"{max(answered) * 1000:.1f} ms")
        # Generous bound a loaded machine meets: a UDP host the LOCK held would wait out its 10 s.
        assert max(answered) < 5.0, answered
        timeout = raw.read_packet()
        assert timeout[:8] == mine + bytes([0xBF, 0, 1, 0x05]), timeout.hex()
        raw.close()


def test_usbip_list_shows_the_key(usbip_key):
    if shutil.which("usbip") is None:
        pytest.fail("usbip (Debian package usbip) is needed: make deps installs it")
    _, port = usbip_key
    out = subprocess.run(["usbip", "--tcp-port", str(port), "list", "-r", "127.0.0.1"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "1-1: " in out.stdout and "(1209:f1d0)" in out.stdout, out.stdout
    assert "(03/00/00)" in out.stdout  # one HID interface


def test_a_raw_host_runs_ctaphid_init_over_urbs(usbip_key):
    server, port = usbip_key
    s = import_device(port)
    # Descriptors as a host reads them, then SET_CONFIGURATION.
    s.sendall(submit(1, True, 0, 18, bytes([0x80, 6, 0, 1, 0, 0, 18, 0])))
    _, status, device = ret_submit(s, True)
    assert status == 0 and device[:2] == b"\x12\x01" and device[8:12] == b"\x09\x12\xd0\xf1"
    s.sendall(submit(2, True, 0, 255, bytes([0x80, 6, 3, 3, 0x09, 0x04, 255, 0])))
    _, _, serial = ret_submit(s, True)
    assert serial[2:].decode("utf-16-le") == "USBIPTEST1"
    s.sendall(submit(3, False, 0, 0, bytes([0, 9, 1, 0, 0, 0, 0, 0])))
    assert ret_submit(s, False)[1] == 0
    # An IN transfer waits; CTAPHID_INIT goes OUT; the answer comes on the waiting IN transfer.
    s.sendall(submit(4, True, 1, 64))
    nonce = b"12345678"
    s.sendall(submit(5, False, 1, 64, data=(b"\xff\xff\xff\xff\x86\x00\x08" + nonce).ljust(64, b"\0")))
    answers = {}
    for _ in range(2):
        header = read_exactly(s, 48)
        seqnum, status, length = struct.unpack(">IiI", header[4:8] + header[20:28])
        answers[seqnum] = (status, read_exactly(s, length) if seqnum == 4 else b"")
    assert answers[5][0] == 0
    status, report = answers[4]
    assert status == 0 and report[4] == 0x86 and report[7:15] == nonce
    s.close()


def test_one_host_at_a_time_and_a_detach_is_a_power_cycle(usbip_key):
    server, port = usbip_key
    first = import_device(port)
    second = connect(port)
    second.sendall(struct.pack(">HHI", 0x0111, 0x8003, 0) + b"1-1".ljust(32, b"\0"))
    assert struct.unpack(">HHI", read_exactly(second, 8)) == (0x0111, 0x0003, 1)
    events = server.key.events
    first.close()
    assert events.wait_for("powerCycle", timeout=10)
    import_device(port).close()


def test_malformed_clients_are_disconnected_and_the_key_serves_on(usbip_key):
    server, port = usbip_key
    for garbage in [b"\x01\x06\x80\x05\0\0\0\0", b"\x01\x11\x12\x34\0\0\0\0", b"\xff" * 100]:
        s = connect(port)
        s.sendall(garbage)
        assert s.recv(100) == b"", "the connection is closed"
        s.close()
    s = import_device(port)
    s.sendall(struct.pack(">IIIIIIIIII", 1, 1, 0x7777, 1, 1, 0, 64, 0, 0xFFFFFFFF, 0) + b"\0" * 8)  # wrong devid
    assert s.recv(100) == b""
    s.close()
    # The key is alive and the device can be imported again.
    import_device(port).close()
    assert server.process.poll() is None


def test_usbip_options_are_checked():
    binary = str(find_binary())
    remote = subprocess.run([binary, "serve", "--transport", "usbip", "--usbip-host", "0.0.0.0"],
                            capture_output=True, text=True, timeout=30)
    assert remote.returncode == 2 and "--allow-remote" in remote.stderr
    stray = subprocess.run([binary, "serve", "--transport", "udp", "--usbip-port", "4000"],
                           capture_output=True, text=True, timeout=30)
    assert stray.returncode == 2 and "--usbip-host and --usbip-port are for --transport usbip" in stray.stderr
    for twice in (["udp", "uhid"], ["usbip", "usbip"], ["auto", "usbip"]):
        refused = subprocess.run([binary, "serve"] + [a for t in twice for a in ("--transport", t)],
                                 capture_output=True, text=True, timeout=30)
        assert refused.returncode == 2 and "usbip and pcsc beside it" in refused.stderr, (twice, refused.stderr)
    port = free_tcp_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        busy = subprocess.run([binary, "serve", "--transport", "usbip", "--usbip-port", str(port), "--flash",
                               "memory", "--control", "off"], capture_output=True, text=True, timeout=30)
    assert busy.returncode == 1 and f"cannot listen on tcp 127.0.0.1:{port} for USB/IP" in busy.stderr
