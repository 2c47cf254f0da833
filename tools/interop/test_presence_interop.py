"""Prompt mode as a person uses it: the terminal question names the key that asks, y/Enter touches and n refuses that
key (not key 1), an unanswered request times out with USER_ACTION_TIMEOUT, and names from the relying party reach
the terminal escaped. The default presence per transport is checked in the VM run (uhid) and below (UDP)."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import threading
import time

import pytest
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2

from fidosim import FidosimServer
from fidosim.testing import in_background, make_credential, start_lines
from fidosim.udp import open_udp_device, wait_until_ready

pytestmark = pytest.mark.skipif(os.environ.get("FIDOSIM_TRANSPORT", "udp") != "udp", reason="UDP keys")


class Terminal:
    """`fidosim serve` (the package's FidosimServer, with serve's own presence and notifications) with its standard
    input and output as a person's terminal."""

    def __init__(self, *args):
        self.server = FidosimServer(presence=None, presence_delay_ms=None, notify=None, args=args,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE).start()
        self.process = self.server.process
        self.lines: queue.Queue[str] = queue.Queue()
        self.ports = [key.port for key in self.server.keys]
        self.start_lines = start_lines(self.server)
        threading.Thread(target=self._read, daemon=True).start()
        for port in self.ports:
            assert wait_until_ready("127.0.0.1", port, total=10, is_alive=lambda: self.process.poll() is None)

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, pattern: str, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            seen.append(line)
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r} within {timeout} s; saw {seen}")

    def type(self, text: str) -> None:
        self.process.stdin.write(text)
        self.process.stdin.flush()

    def ctap2(self, i: int) -> Ctap2:
        return Ctap2(open_udp_device("127.0.0.1", self.ports[i]))

    def stop(self):
        self.server.close()


@pytest.fixture
def terminal(request):
    keys = Terminal(*request.param)
    yield keys
    keys.stop()






@pytest.mark.parametrize("terminal", [("--keys", "2", "--presence", "prompt", "--name", "desk")], indirect=True)
def test_the_terminal_answers_the_key_that_asks(terminal):
    # Key 2 asks while key 1 is idle: Enter touches key 2 (it used to touch key 1 and leave key 2 waiting).
    done = in_background(make_credential, terminal.ctap2(1), "second.example", "carol")
    question = terminal.expect(r"touch requested")
    assert question.startswith("fidosim: key desk-2: touch requested: makeCredential for second.example (user carol)")
    assert question.endswith("Touch the key? [Y/n]")
    terminal.type("\n")
    terminal.expect(r"^fidosim: key desk-2: touched \(terminal\)$")
    assert done().auth_data.rp_id_hash is not None

    # `n` refuses the request of the key that asks: CTAP2_ERR_OPERATION_DENIED.
    done = in_background(make_credential, terminal.ctap2(0))
    terminal.expect(r"^fidosim: key desk: touch requested: makeCredential for example.com")
    terminal.type("maybe\n")
    terminal.expect(r"answer y \(or Enter\) to touch the key, n to refuse")
    terminal.type("n\n")
    terminal.expect(r"^fidosim: key desk: refused \(terminal\)$")
    with pytest.raises(CtapError) as refused:
        done()
    assert refused.value.code == CtapError.ERR.OPERATION_DENIED

    # Both keys ask: the answers go in the order they asked, each to its own key.
    first = in_background(make_credential, terminal.ctap2(0), "one.example")
    terminal.expect(r"key desk: touch requested: makeCredential for one.example")
    second = in_background(make_credential, terminal.ctap2(1), "two.example")
    terminal.expect(r"key desk-2: touch requested: makeCredential for two.example")
    terminal.type("y\n")
    terminal.expect(r"^fidosim: key desk: touched")
    terminal.type("N\n")
    terminal.expect(r"^fidosim: key desk-2: refused")
    first()
    with pytest.raises(CtapError) as refused:
        second()
    assert refused.value.code == CtapError.ERR.OPERATION_DENIED


@pytest.mark.parametrize("terminal", [("--presence", "prompt", "--presence-timeout", "2")], indirect=True)
def test_an_unanswered_prompt_times_out_as_a_real_key_does(terminal):
    started = time.monotonic()
    done = in_background(make_credential, terminal.ctap2(0))
    terminal.expect(r"touch requested")
    with pytest.raises(CtapError) as timed_out:
        done()
    elapsed = time.monotonic() - started
    assert timed_out.value.code == CtapError.ERR.USER_ACTION_TIMEOUT
    # At least the 2 s (the key's own clock, started after `started`); the upper bound is generous, one a loaded
    # machine meets, well short of the default 30 s timeout.
    assert 1.8 <= elapsed < 20, elapsed
    terminal.expect(r"^fidosim: key default: nobody answered within 2 s: makeCredential timed out")
    # An answer after the timeout touches nothing that waits.
    terminal.type("\n")
    terminal.expect(r"key default: touched$")


@pytest.mark.parametrize("terminal", [("--presence", "prompt",)], indirect=True)
def test_names_from_the_relying_party_are_escaped_on_the_terminal(terminal):
    rp_id = "evil.example\x1b[2K\r\x1b[1Afidosim: key default: touch requested: getAssertion for bank.example"
    name = "\u202egnp.exe\x07"
    done = in_background(make_credential, terminal.ctap2(0), rp_id, name)
    question = terminal.expect(r"touch requested: makeCredential")
    assert "\x1b" not in question and "\r" not in question and "\u202e" not in question and "\x07" not in question
    assert "for evil.example\\x1b[2K\\x0d\\x1b[1Afidosim: key default:" in question
    assert "(user \\u{202e}gnp.exe\\x07)" in question
    terminal.type("\n")
    done()


@pytest.mark.parametrize("terminal", [()], indirect=True)
def test_udp_keeps_hands_free_approve_by_default(terminal):
    # A test rig's key: UDP approves without a person, and its start line says so.
    assert any("presence: approve after 0.2 seconds)" in line for line in terminal.start_lines), terminal.start_lines
    make_credential(terminal.ctap2(0))
