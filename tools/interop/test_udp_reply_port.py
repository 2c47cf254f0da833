"""Keys that answer to a fixed UDP port, as solo1's simulation does (it sends every answer to 127.0.0.1:7112, not to
the sender): `fidosim conform --device udp:HOST:PORT?reply-port=N` listens there. The key under test is fidosim
served with --udp-reply-port, and a simulator of our own that follows the convention (a few lines: a front for a
fidosim key that answers to the fixed port, and hangs on WINK until its "hub" power-cycles it), against which the
runner must report the check that hung, power-cycle, and go on."""

from __future__ import annotations

import json
import socket
import subprocess
import threading

from fidosim import FidosimServer, find_binary
from fidosim.udp import free_udp_port


def conform(*args, timeout=300):
    return subprocess.run([str(find_binary()), "conform", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_fidosim_with_a_fixed_reply_port_passes_through_reply_port(tmp_path):
    reply = free_udp_port()
    server = FidosimServer(binary=find_binary(), args=["--udp-reply-port", str(reply)])
    server.start()
    try:
        port = server.keys[0].port
        out = conform("--device", f"udp:127.0.0.1:{port}?reply-port={reply}", "--only", "hid,info,get-assertion",
                      "--control", server.keys[0].control_path, "--report", str(tmp_path))
        assert out.returncode == 0, out.stdout + out.stderr
        report = json.loads((tmp_path / "report.json").read_text())
        assert report["device"]["address"] == f"udp:127.0.0.1:{port}?reply-port={reply}"
        assert report["totals"]["failed"] == 0 and report["totals"]["passed"] > 30
        # Without the reply port the answers go where nobody listens: the key cannot be reached.
        lost = conform("--device", f"udp:127.0.0.1:{port}", "--only", "info", "--control",
                       server.keys[0].control_path, timeout=120)
        assert lost.returncode == 3, lost.stdout + lost.stderr
    finally:
        assert server.stop() == 0, server.stderr()


class SoloConventionKey:
    """A key that follows solo1's convention: it listens on its port and sends every answer from there to
    127.0.0.1:reply. Behind it is a fidosim key. A WINK makes it hang (it drops everything) until a "resume" datagram,
    which the rig's replug command sends as a hub cutting power would."""

    def __init__(self, backend_port: int, reply: int):
        self.reply = reply
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.port = self.front.getsockname()[1]
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.connect(("127.0.0.1", backend_port))
        self.hung = False
        self.hangs = 0
        self.stopped = False
        threading.Thread(target=self._from_host, daemon=True).start()
        threading.Thread(target=self._from_key, daemon=True).start()

    def _from_host(self):
        while not self.stopped:
            try:
                data = self.front.recv(2048)
            except OSError:
                return
            if data == b"resume":
                self.hung = False
                continue
            if len(data) == 64 and data[4] == 0x88:  # CTAPHID_WINK
                self.hung = True
                self.hangs += 1
            if not self.hung:
                self.back.send(data)

    def _from_key(self):
        while not self.stopped:
            try:
                data = self.back.recv(2048)
            except OSError:
                return
            if not self.hung:
                self.front.sendto(data, ("127.0.0.1", self.reply))

    def close(self):
        self.stopped = True
        self.front.close()
        self.back.close()


def test_a_key_that_hangs_mid_run_is_reported_power_cycled_and_the_run_goes_on(tmp_path):
    server = FidosimServer(binary=find_binary(), presence="prompt", presence_delay_ms=None)
    server.start()
    reply = free_udp_port()
    key = SoloConventionKey(server.keys[0].port, reply)
    control = server.keys[0].control_path
    touch = tmp_path / "touch.sh"
    touch.write_text(f"#!/bin/sh\nfor i in $(seq 100); do {find_binary()} ctl --control {control} touch "
                     ">/dev/null 2>&1 && exit 0; sleep 0.1; done\nexit 1\n")
    touch.chmod(0o755)
    try:
        replug = (f"python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'resume', "
                  f"('127.0.0.1', {key.port}))\" && {find_binary()} ctl --control {server.keys[0].control_path} "
                  "power-cycle >/dev/null")
        out = conform("--device", f"udp:127.0.0.1:{key.port}?reply-port={reply}", "--only", "hid,info",
                      "--touch-command", str(touch), "--replug-command", replug, "--report", str(tmp_path))
        assert key.hangs == 1
        assert out.returncode == 1, out.stdout + out.stderr  # a failed check, not an unreachable key
        assert "the key stopped answering after hid.wink; each time a power cycle brought it back" in out.stderr
        report = json.loads((tmp_path / "report.json").read_text())
        assert report["hungAfter"] == ["hid.wink"] and report["stoppedAnswering"] is False
        checks = [c["id"] for c in report["checks"]]
        wink = report["checks"][checks.index("hid.wink")]
        assert wink["status"] == "failed"
        assert wink["message"].endswith("then the key stopped answering; it answered again after a power cycle, "
                                        "and the run went on")
        after = report["checks"][checks.index("hid.wink") + 1:]
        assert len(after) > 10 and all(c["status"] == "passed" for c in after), after
        assert "The key stopped answering after: hid.wink" in (tmp_path / "report.md").read_text()
    finally:
        key.close()
        assert server.stop() == 0, server.stderr()


def test_reply_port_addresses_are_checked():
    for bad in ["udp:127.0.0.1:8111?reply=7112", "udp:127.0.0.1:8111?reply-port=0", "udp:127.0.0.1:8111?reply-port=x"]:
        out = conform("--device", bad, timeout=30)
        assert out.returncode == 2 and "?reply-port=N" in out.stderr, (bad, out.stderr)
    out = subprocess.run([str(find_binary()), "serve", "--transport", "uhid", "--udp-reply-port", "7112"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "--udp-reply-port is for --transport udp" in out.stderr
