"""Who may reach a key on UDP, checked from outside with sockets of this and other users: a transaction's answer
goes only to the client that asked, another client on the same channel gets CHANNEL_BUSY and never the answer, a
flood of garbage costs the owner nothing, another user's datagrams (even the power-cycle datagram) are ignored
unless --any-local-user, and a --host other machines reach needs --allow-remote."""

from __future__ import annotations

import os
import random
import socket
import struct
import subprocess
import threading
import time

import pytest
from fido2.ctap2 import Ctap2

from fidosim import FidosimServer, find_binary
from fidosim.testing import RP, as_nobody, new_cdh, user
from fidosim.udp import POWER_CYCLE, free_udp_port, open_udp_device

HOST = "127.0.0.1"

pytestmark = pytest.mark.skipif(os.environ.get("FIDOSIM_TRANSPORT", "udp") != "udp", reason="UDP keys")
ES256 = [{"type": "public-key", "alg": -7}]
# Another user cannot run the interpreter under /root (pyenv's, this suite's venv): the system's python3 runs the
# stdlib-only scripts of the tests that connect as someone else.


def raw_socket(timeout=0.3):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((HOST, 0))
    sock.settimeout(timeout)
    return sock


def init_request(nonce: bytes) -> bytes:
    return struct.pack(">IBH", 0xFFFFFFFF, 0x86, 8) + nonce + bytes(64 - 15)


def received(sock, seconds=0.5):
    """Every datagram that arrives within `seconds`."""
    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            out.append(sock.recv(256))
        except (socket.timeout, TimeoutError):
            break
    return out


@pytest.mark.sim_args("--presence", "delay:800")
def test_an_answer_goes_only_to_the_client_that_asked(sim):
    owner = open_udp_device(sim.host, sim.port)
    channel = owner._channel_id
    result = {}
    waiting = threading.Event()
    thread = threading.Thread(
        target=lambda: result.setdefault("cred", Ctap2(owner).make_credential(
            new_cdh(), RP, user("alice"), ES256, on_keepalive=lambda _: waiting.set())))
    thread.start()
    # The key is waiting for its (simulated) touch: its first keepalive says so, however slow the machine.
    assert waiting.wait(10), "no keepalive from the key"
    other = raw_socket()
    # An empty datagram, a continuation and a new request on the owner's channel from another socket.
    other.sendto(b"", (sim.host, sim.port))
    other.sendto(struct.pack(">IB", channel, 0) + bytes(59), (sim.host, sim.port))
    other.sendto(struct.pack(">IBH", channel, 0x90, 1) + b"\x04" + bytes(56), (sim.host, sim.port))
    thread.join(10)
    got = received(other, 1.0)
    assert "cred" in result, "the owner did not get its answer"
    # The other socket hears CHANNEL_BUSY for its two reports on the busy channel, and nothing of the answer.
    busy = struct.pack(">IBHB", channel, 0xBF, 1, 0x06)
    assert [d[:8] for d in got] == [busy, busy], [d[:8].hex() for d in got]
    owner.close()


@pytest.mark.sim_args("--presence", "delay:50")
def test_a_flood_of_garbage_from_another_socket_costs_the_owner_nothing(sim):
    stop = threading.Event()

    def flood():
        sock = raw_socket()
        rng = random.Random(7)
        while not stop.is_set():
            for _ in range(10):
                sock.sendto(bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 8, 64]))), (sim.host, sim.port))
            time.sleep(0.01)  # about 1,000 datagrams a second

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    try:
        ctap = Ctap2(open_udp_device(sim.host, sim.port))
        done = 0
        for _ in range(20):
            ctap.make_credential(new_cdh(), RP, user("alice"), ES256)
            done += 1
    finally:
        stop.set()
        thread.join(5)
    assert done == 20


ANOTHER_USER_CLIENT = r"""
import socket, struct, sys, os
host, port, magic = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((host, 0))
s.settimeout(1.0)
s.sendto(magic, (host, port))  # the power-cycle datagram
nonce = os.urandom(8)
s.sendto(struct.pack(">IBH", 0xFFFFFFFF, 0x86, 8) + nonce + bytes(49), (host, port))
try:
    answer = s.recv(64)
    print("answered" if answer[7:15] == nonce else "other")
except socket.timeout:
    print("silence")
"""


def other_user_may_run_here():
    return os.geteuid() == 0


@pytest.mark.skipif(not other_user_may_run_here(), reason="setpriv to another uid needs root")
def test_another_users_datagrams_are_ignored(sim):
    with sim.control() as ctl:
        ctl.subscribe()
        assert as_nobody(ANOTHER_USER_CLIENT, sim.host, str(sim.port), POWER_CYCLE.hex()) == "silence"
        # Its power-cycle datagram did not unplug the key either.
        time.sleep(0.3)
        assert not [e for e in ctl.events(timeout=0.3) if e.get("event") == "powerCycle"]
    # This user's client is still served.
    Ctap2(open_udp_device(sim.host, sim.port)).get_info()


@pytest.mark.skipif(not other_user_may_run_here(), reason="setpriv to another uid needs root")
@pytest.mark.sim_args("--any-local-user")
def test_udp_any_user_lets_other_users_in(sim):
    with sim.control() as ctl:
        ctl.subscribe()
        assert as_nobody(ANOTHER_USER_CLIENT, sim.host, str(sim.port), POWER_CYCLE.hex()) == "answered"
        ctl.wait_for_event(lambda e: e["event"] == "powerCycle")


@pytest.mark.sim_args("--udp-power-cycle", "off")
def test_the_power_cycle_datagram_can_be_turned_off(sim):
    with sim.control() as ctl:
        ctl.subscribe()
        raw_socket().sendto(POWER_CYCLE, (sim.host, sim.port))
        time.sleep(0.5)
        assert not [e for e in ctl.events(timeout=0.3) if e.get("event") == "powerCycle"]


def serve_once(*args, timeout=10):
    return subprocess.run(
        [str(find_binary()), "serve", "--transport", "udp", "--flash", "memory", "--control", "off", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def test_a_host_other_machines_reach_needs_allow_remote():
    refused = serve_once("--host", "0.0.0.0", "--port", "0")
    assert refused.returncode != 0
    assert "--host 0.0.0.0 can be reached from other machines" in refused.stderr
    assert "--allow-remote" in refused.stderr
    port = free_udp_port()
    server = FidosimServer(presence=None, presence_delay_ms=None, notify=None, control="off",
                           args=("--host", "0.0.0.0", "--port", str(port), "--allow-remote")).start()
    try:
        deadline = time.monotonic() + 10
        sock = raw_socket()
        while time.monotonic() < deadline:
            nonce = os.urandom(8)
            sock.sendto(init_request(nonce), ("127.0.0.1", port))
            answers = received(sock, 0.3)
            if answers:
                assert answers[0][7:15] == nonce
                break
        else:
            pytest.fail("the key on 0.0.0.0 did not answer")
    finally:
        server.stop()
        err = server.stderr()
        server.close()
    assert f"warning: listening on udp 0.0.0.0:{port}: any machine that reaches this address can use the key" in err
