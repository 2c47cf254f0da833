"""`fidosim conform` against a key in a rig: the runner acts through commands or a harness, never through a fidosim
control socket, and nobody is asked. fidosim stands in for the real key (presence prompt: every touch must come
from the rig), and the rig's parts drive its control socket as a relay or a hub would drive a real key. The VM's
usbip group runs the whole suite this way over hidraw (usbip-rig-conform)."""

from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest

from fidosim import FidosimServer, find_binary
from fidosim.control import FidosimControl


@pytest.fixture
def prompting_key():
    server = FidosimServer(binary=find_binary(), presence="prompt", presence_delay_ms=None)
    server.start()
    yield server
    assert server.stop() == 0, server.stderr()


def press_until_taken(path: str, what: str, stop: threading.Event, seconds: float = 10) -> None:
    """A relay: press (touch, or the deny button) until the key takes it, or the harness moves on."""
    import time

    with FidosimControl(path=path) as control:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not stop.is_set():
            answer = control.touch() if what == "touch" else control.refuse()
            if answer.get("answered"):
                return
            time.sleep(0.05)


def test_a_stdio_json_harness_runs_the_destructive_groups_with_no_person(prompting_key, tmp_path):
    key = prompting_key.keys[0]
    command = [str(find_binary()), "conform", "--device", f"udp:127.0.0.1:{key.port}", "--allow-destructive",
               "--only", "make-credential,client-pin,reset", "--operator", "stdio-json", "--report", str(tmp_path)]
    conform = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, bufsize=1)
    asked: dict[str, int] = {}
    stop = threading.Event()
    lines: list[str] = []
    for line in conform.stdout:
        lines.append(line)
        if not line.startswith("{"):
            continue
        request = json.loads(line)
        action = request["operator"]
        asked[action] = asked.get(action, 0) + 1
        # Each request ends the presses for the one before it (a relay lets go).
        stop.set()
        stop = threading.Event()
        if action in ("touch", "refuse"):
            threading.Thread(target=press_until_taken, args=(key.control_path, action, stop), daemon=True).start()
        if action == "refuse":
            conform.stdin.write(json.dumps({"id": request["id"], "done": True}) + "\n")
        elif action == "replug":
            key.control.power_cycle()
            conform.stdin.write(json.dumps({"id": request["id"], "done": True}) + "\n")
    code = conform.wait(timeout=300)
    stderr = conform.stderr.read()
    assert code == 0, "".join(lines) + stderr
    assert ">>>" not in stderr and "Press Enter" not in stderr, "nobody was asked"
    totals = json.loads((tmp_path / "report.json").read_text())["totals"]
    assert totals["failed"] == 0 and totals["skipped"] == 0, totals
    assert asked.get("touch", 0) > 5 and asked.get("refuse", 0) >= 2 and asked.get("replug", 0) >= 3, asked


def test_uhubctl_is_called_with_the_hub_port_and_the_key_is_found_again(prompting_key, tmp_path):
    """uhubctl stands in as a script on PATH that checks its arguments and power-cycles the key, as cutting a hub
    port's power would."""
    key = prompting_key.keys[0]
    binary = str(find_binary())
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "uhubctl.calls"
    (bindir / "uhubctl").write_text(
        "#!/bin/sh\n"
        f"echo \"$* pin=${{FIDOSIM_PIN-unset}}\" >> {calls}\n"
        "[ \"$*\" = '-l 1-1.4 -p 2 -a cycle' ] || exit 9\n"
        f"exec {binary} ctl --control {key.control_path} power-cycle >/dev/null\n")
    (bindir / "uhubctl").chmod(0o755)
    touch = tmp_path / "touch.sh"
    touch.write_text(f"#!/bin/sh\nfor i in $(seq 100); do {binary} ctl --control {key.control_path} touch "
                     ">/dev/null 2>&1 && exit 0; sleep 0.1; done\nexit 1\n")
    touch.chmod(0o755)
    # The owner's PIN in the runner's environment does not reach the rig's commands.
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", FIDOSIM_PIN="4711rig")
    out = subprocess.run([binary, "conform", "--device", f"udp:127.0.0.1:{key.port}", "--allow-destructive",
                          "--only", "reset", "--uhubctl", "1-1.4:2", "--touch-command", str(touch), "--report",
                          str(tmp_path / "report")], capture_output=True, text=True, timeout=300, env=env,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    by_id = {check["id"]: check for check in report["checks"]}
    # Without --refuse-command the refusal check is skipped, and says why; the others pass.
    assert by_id["reset.denied"]["status"] == "skipped"
    assert by_id["reset.denied"]["message"] == "refusing a touch needs --refuse-command"
    assert [c for c in report["checks"] if c["status"] == "failed"] == []
    assert calls.read_text().count("-l 1-1.4 -p 2 -a cycle pin=unset") >= 2
    assert "4711rig" not in calls.read_text()
    assert ">>>" not in out.stderr


def test_rig_options_are_checked():
    binary = str(find_binary())
    for args, message in [
        (["--uhubctl", "1-1"], "expected LOCATION:PORT"),
        (["--uhubctl", "1-1:2", "--replug-command", "true"], "give --uhubctl or --replug-command, not both"),
        (["--touch-command", "true", "--name", "x"], "not with the rig's commands"),
        (["--operator", "robot"], "--operator robot: terminal or stdio-json"),
    ]:
        out = subprocess.run([binary, "conform", "--device", "udp:127.0.0.1:9", *args], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 2 and message in out.stderr, (args, out.stderr)


def test_compare_says_where_two_keys_differ_and_that_two_runs_of_one_agree(tmp_path):
    binary = str(find_binary())
    reports = {}
    for name, profile in [("a", "fidosim"), ("b", "fidosim"), ("c", "yubikey5")]:
        with FidosimServer(binary=binary, profile=profile) as server:
            key = server.keys[0]
            out = subprocess.run([binary, "conform", "--device", f"udp:127.0.0.1:{key.port}", "--control",
                                  key.control_path, "--only", "info,hid,u2f,get-assertion", "--report",
                                  str(tmp_path / name)], capture_output=True, text=True, timeout=300)
            assert out.returncode == 0, out.stdout + out.stderr
            reports[name] = tmp_path / name
    same = subprocess.run([binary, "conform", "--compare", str(reports["a"] / "report.json"), str(reports["b"])],
                          capture_output=True, text=True, timeout=30)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("the reports agree: ")
    other = subprocess.run([binary, "conform", "--compare", str(reports["a"]), str(reports["c"])],
                           capture_output=True, text=True, timeout=30)
    assert other.returncode == 1, other.stdout + other.stderr
    assert other.stdout.splitlines()[0].startswith("device aaguid: ")
    assert "differences (" in other.stdout.splitlines()[-1]
    bad = subprocess.run([binary, "conform", "--compare", str(reports["a"])], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2 and "--compare takes two reports" in bad.stderr
