"""Every subcommand ends with the same exit codes (README, "Exit codes"): 0 success, 1 the operation failed (a check
failed, the key refused), 2 usage or bad input, 3 the key could not be reached; a runtime error prints one line
and no usage banner."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess

import pytest

from fidosim import FidosimServer, find_binary

NOWHERE = "/nonexistent-fidosim/key.sock"


def run(*args, stdin=None, timeout=120):
    return subprocess.run([str(find_binary()), *args], capture_output=True, text=True, timeout=timeout,
                          input=stdin)


def expect(out, code, *, says=None, usage=None):
    assert out.returncode == code, f"exit {out.returncode}, expected {code}\n{out.stdout}\n{out.stderr}"
    if says is not None:
        assert says in out.stderr, out.stderr
    if usage is not None:  # a runtime error has no usage banner; a command line that does not parse has one
        assert ("Usage:" in out.stderr) == usage, out.stderr


def test_serve(tmp_path):
    # A key that served stops on SIGTERM with 0 (the package's FidosimServer sends it).
    server = FidosimServer(serve_args=["--transport", "udp", "--port", "0", "--flash", "memory", "--control", "off"],
                           startup_timeout=20).start()
    assert server.close() == 0
    expect(run("serve", "--keys", "129"), 2, says="--keys must be 0 to 128", usage=True)
    # A flash image that is a directory: the key cannot start.
    expect(run("serve", "--transport", "udp", "--port", "0", "--flash", str(tmp_path), "--control", "off",
               timeout=20), 1, usage=False)


def test_ctl(sim):
    socket = ["ctl", "--control", sim.control_path]
    expect(run(*socket, "status"), 0)
    expect(run(*socket, "remove-credential", "AAAA"), 1, says="not-found", usage=False)
    expect(run(*socket, "presence", "sometimes"), 2, says="invalid-params", usage=False)
    expect(run(*socket, "presense", "approve"), 2, says="did you mean 'presence'?")
    expect(run("ctl", "--control", NOWHERE, "status"), 3, says="cannot connect", usage=False)
    # --socket, the old name of --control, still works (hidden from --help); both at once is a usage error.
    expect(run("ctl", "--socket", sim.control_path, "status"), 0)
    expect(run("ctl", "--socket", sim.control_path, "--control", sim.control_path, "status"), 2, says="--control once")
    expect(run("credentials", "export", "--socket", sim.control_path, "-o", "-"), 0)
    # Nothing waits for a touch: it says so and fails.
    expect(run(*socket, "touch"), 1, says="touch:", usage=False)


def test_ctl_json_gives_errors_and_status_as_fields(sim):
    socket = ["ctl", "--control", sim.control_path, "--json"]
    status = json.loads(run(*socket, "status").stdout)
    assert status["presenceMode"] == {"mode": "approve", "delayMs": 200}
    assert status["transportDetail"] == {"transport": "udp", "host": "127.0.0.1", "port": sim.port}
    refused = run(*socket, "remove-credential", "AAAA")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["code"] == "not-found"
    unreachable = run("ctl", "--control", NOWHERE, "--json", "status")
    assert unreachable.returncode == 3 and json.loads(unreachable.stdout)["error"]["code"] == "unreachable"


def test_credentials(sim, tmp_path):
    socket = ["--control", sim.control_path]
    expect(run("credentials", "export", *socket, "-o", "-"), 0)
    expect(run("credentials", "export", *socket, "--format", "auto", "-o", "-"), 2, usage=True)
    expect(run("credentials", "export", "--control", NOWHERE, "-o", "-"), 3, usage=False)
    bad_key = [{"credentialId": "AQ", "isResidentCredential": False, "rpId": "example.com", "privateKey": "AAAA"}]
    expect(run("credentials", "import", *socket, "-", stdin=json.dumps(bad_key)), 1, says="not imported",
           usage=False)
    expect(run("credentials", "import", *socket, "-", stdin="not json"), 2, says="is not JSON", usage=False)


def test_attestation_and_metadata(sim):
    socket = ["--control", sim.control_path]
    expect(run("attestation", "provision", *socket, "--country", "XYZ"), 2, usage=True)
    expect(run("attestation", "provision", "--control", NOWHERE), 3, usage=False)
    expect(run("metadata", *socket), 0)
    expect(run("metadata", "--control", NOWHERE), 3, usage=False)


def test_profiles_and_flash(tmp_path):
    listed = run("profiles", "--json")
    expect(listed, 0)
    names = [p["name"] for p in json.loads(listed.stdout)]
    assert "fidosim" in names and "yubikey5" in names
    expect(run("profiles", "--bogus"), 2, usage=True)
    image = tmp_path / "key.img"
    expect(run("credentials", "import", "--flash", str(image), "-", stdin='{"credentials": []}'), 0)
    inspected = run("flash", "inspect", "--json", str(image))
    expect(inspected, 0)
    report = json.loads(inspected.stdout)
    assert report["clean"] is True and report["discoverableCredentials"] == 0
    not_an_image = tmp_path / "text.img"
    not_an_image.write_text("hello")
    expect(run("flash", "inspect", str(not_an_image)), 1, usage=False)
    expect(run("flash", "inspect"), 2, usage=True)


def test_conform(sim):
    socket = ["--control", sim.control_path]
    ok = run("conform", "--device", f"udp:127.0.0.1:{sim.port}", *socket, "--only", "selection", "--json")
    expect(ok, 0)
    report = json.loads(ok.stdout)  # stdout is the report alone
    assert report["checks"] and report["totals"]["failed"] == 0
    # A key that answers getInfo with an error fails the info checks.
    with sim.control() as control:
        control.inject_fault("status", command="getInfo", status=0x7F, count=1000)
    expect(run("conform", "--device", f"udp:127.0.0.1:{sim.port}", *socket, "--only", "info"), 1)
    expect(run("conform", "--device", "nonsense"), 2, usage=True)
    expect(run("conform", "--device", "udp:127.0.0.1:9", "--no-control", "--only", "selection", timeout=120),
           3, says="cannot reach the key", usage=False)


def test_bench():
    expect(run("bench", "--only", "nope"), 2, usage=True)


@pytest.mark.skipif(not shutil.which("script"), reason="script (util-linux) is missing")
def test_long_commands_show_progress_on_a_terminal_only():
    command = [str(find_binary()), "bench", "--only", "get-assertion", "--seconds", "0.2"]
    piped = subprocess.run(command, capture_output=True, timeout=120)  # bytes: text mode would turn \r into \n
    assert piped.returncode == 0 and b"\r" not in piped.stderr + piped.stdout
    # Under a pseudo-terminal (script(1)): the row being measured and its percentage, rewritten in place.
    on_tty = subprocess.run(["script", "-qec", shlex.join(command), "/dev/null"], capture_output=True, timeout=120)
    assert on_tty.returncode == 0
    assert re.search(rb"\rgetAssertion in process \(allowList, up=false\): \d+%", on_tty.stdout), on_tty.stdout[-500:]


def test_every_printing_command_has_json(sim, tmp_path):
    socket = ["--control", sim.control_path]
    bench = json.loads(run("bench", "--json", "--only", "get-assertion", "--seconds", "0.1").stdout)
    assert [r["name"] for r in bench["rows"]][0].startswith("raw ES256") and bench["rows"][1]["perSecond"] > 0
    exported = run("credentials", "export", *socket, "--json", "-o", str(tmp_path / "c.json"))
    expect(exported, 0)
    assert json.loads(exported.stdout) == {"exported": 0, "leftOut": 0, "format": "webdriver",
                                           "file": str(tmp_path / "c.json")}
    bad = [{"credentialId": "AQ", "isResidentCredential": False, "rpId": "example.com", "privateKey": "AAAA"}]
    imported = run("credentials", "import", *socket, "--json", "-", stdin=json.dumps(bad))
    expect(imported, 1)
    record = json.loads(imported.stdout)
    assert (record["imported"], record["total"], record["format"]) == (0, 1, "webdriver")
    assert record["failures"][0]["position"] == 1 and record["failures"][0]["rpId"] == "example.com"
    provisioned = run("attestation", "provision", *socket, "--json", "--root-out", str(tmp_path / "root.pem"))
    expect(provisioned, 0)
    assert json.loads(provisioned.stdout)["rootCertificate"] == str(tmp_path / "root.pem")
