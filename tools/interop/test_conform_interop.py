"""`fidosim conform` against fidosim itself: every check passes, a broken key fails them, nothing is lost.

The conformance runner is fidosim's own client (FIDOClient): its CTAPHID framing, CBOR requests and OpenSSL
verification share no code with the firmware. python-fido2 reads the key before and after to confirm what the
runner reports and that a run without --allow-destructive leaves the key's credentials and PIN alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2
from fido2.ctap2.pin import ClientPin, PinProtocolV2

from fidosim import FidosimServer, find_binary
from fidosim.testing import new_cdh, user

TRANSPORT = os.environ.get("FIDOSIM_TRANSPORT", "udp")

RP = {"id": "keep.example", "name": "Keep"}
ES256 = [{"type": "public-key", "alg": -7}]


def device_address(sim) -> str:
    if TRANSPORT == "uhid":
        desc = sim.hidraw_descriptor()
        assert desc is not None
        return f"hid:{desc.path}"
    return f"udp:{sim.host}:{sim.port}"


def conform(sim, *args, timeout=600):
    return subprocess.run(
        [str(sim.binary), "conform", "--device", device_address(sim), "--control", sim.control_path, *args],
        capture_output=True, text=True, timeout=timeout)


def all_check_ids(sim) -> list[str]:
    """Every check a HID key runs: all of --list but the NFC binding's (test_pcsc_interop runs those)."""
    out = subprocess.run([str(sim.binary), "conform", "--list"], capture_output=True, text=True, check=True)
    return [line.split("\t")[0] for line in out.stdout.splitlines() if not line.startswith("nfc.")]


def test_every_check_passes_on_fidosim(sim, tmp_path):
    out = conform(sim, "--allow-destructive", "--report", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "will be RESET" in out.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    ids = [check["id"] for check in report["checks"]]
    assert ids == all_check_ids(sim), "every check ran, in --list order"
    assert report["totals"] == {"passed": len(ids), "failed": 0, "skipped": 0}
    assert all(check["section"].startswith(("CTAP 2.", "U2F ", "WebAuthn")) for check in report["checks"])
    # The identity in the report is what python-fido2 reads from the key.
    info = Ctap2(sim.device()).get_info()
    assert report["device"]["aaguid"].replace("-", "") == bytes(info.aaguid).hex()
    assert report["device"]["versions"] == list(info.versions)
    markdown = (tmp_path / "report.md").read_text()
    assert markdown.startswith("# CTAP conformance report")
    assert f"{len(ids)} passed, 0 failed, 0 skipped" in markdown
    # Live progress: one line per check.
    assert sum(line.startswith("pass  ") for line in out.stdout.splitlines()) == len(ids)


def test_a_run_without_allow_destructive_keeps_credentials_and_pin(sim):
    dev = sim.device()
    ctap = Ctap2(dev)
    client_pin = ClientPin(ctap, PinProtocolV2())
    client_pin.set_pin("55555555")
    token = client_pin.get_pin_token("55555555", ClientPin.PERMISSION.MAKE_CREDENTIAL, RP["id"])
    cdh = new_cdh()
    made = ctap.make_credential(
        cdh, RP, user("keeper"), ES256, options={"rk": True},
        pin_uv_param=PinProtocolV2().authenticate(token, cdh), pin_uv_protocol=2)
    kept_id = made.auth_data.credential_data.credential_id

    out = conform(sim, "--pin", "55555555")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "skip  client-pin.set " in out.stdout and "needs --allow-destructive" in out.stdout
    assert "pass  client-pin.auth-blocked" in out.stdout  # three wrong PINs, then a power cycle

    sim.forget_devices()
    ctap = Ctap2(sim.device())
    client_pin = ClientPin(ctap, PinProtocolV2())
    assert client_pin.get_pin_retries()[0] == 8
    token = client_pin.get_pin_token("55555555", ClientPin.PERMISSION.GET_ASSERTION, RP["id"])
    cdh = new_cdh()
    assertion = ctap.get_assertion(RP["id"], cdh, pin_uv_param=PinProtocolV2().authenticate(token, cdh),
                                   pin_uv_protocol=2)
    assert assertion.credential["id"] == kept_id
    assertion.verify(cdh, made.auth_data.credential_data.public_key)


def test_a_broken_key_fails_with_expected_and_actual(sim, tmp_path):
    # Every getAssertion answers OPERATION_DENIED: the checks that expect a signature must fail and say why.
    sim.control().request("injectFault", kind="status", command="getAssertion", status=0x27, count=1000)
    out = conform(sim, "--only", "get-assertion", "--report", str(tmp_path))
    assert out.returncode == 1, out.stdout + out.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    failed = {check["id"]: check for check in report["checks"] if check["status"] == "failed"}
    assert "get-assertion.allow-list" in failed
    assert failed["get-assertion.allow-list"]["expected"] == "0x00 CTAP2_OK"
    assert failed["get-assertion.allow-list"]["actual"] == "0x27 CTAP2_ERR_OPERATION_DENIED"
    assert "## Failures" in (tmp_path / "report.md").read_text()


def test_packed_batch_attestation_is_verified(sim, tmp_path):
    out = subprocess.run(
        [str(sim.binary), "attestation", "provision", "--control", sim.control_path,
         "--root-out", str(tmp_path / "root.pem")],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    out = conform(sim, "--only", "make-credential", "--report", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    notes = json.loads((tmp_path / "report.json").read_text())["notes"]
    assert "make-credential.es256: attestation format packed, type basic (x5c verified)" in notes


@pytest.mark.sim_args("--profile", "ctap20")
def test_a_ctap20_key_passes_what_applies(sim):
    out = conform(sim, "--allow-destructive")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "skip  selection.touch" in out.stdout and "getInfo does not list FIDO_2_1" in out.stdout


# What each built-in profile is observed to choose where the specification leaves a choice (commands.md).
PROFILE_OBSERVATIONS = {
    "ctap20": ["an unknown clientPIN subcommand: 0x02 CTAP1_ERR_INVALID_PARAMETER",
               "getPINRetries without a PIN: the count"],
    "ctap21pre": ["0x41 with a getPinToken token: accepted", "getPINRetries without a PIN: the count",
                  "an unknown clientPIN subcommand: 0x02 CTAP1_ERR_INVALID_PARAMETER",
                  "getPinToken twice on a FIDO_2_1_PRE key: a new token"],
    "yubikey5": ["0x41 with a getPinToken token: refused (CTAP2_ERR_PIN_AUTH_INVALID)",
                 "getPINRetries without a PIN: CTAP2_ERR_PIN_NOT_SET (the text gives the count)"],
    "fidosim": ["0x41 with a getPinToken token: refused (CTAP2_ERR_PIN_AUTH_INVALID)",
                "getPINRetries without a PIN: the count"],
}


# Every built-in profile but solo1 answers setPIN on a key with a PIN as the text says.
for _observed in PROFILE_OBSERVATIONS.values():
    _observed.append("setPIN on a key with a PIN: CTAP2_ERR_PIN_AUTH_INVALID")
PROFILE_OBSERVATIONS["solo1"] = [
    "getPINRetries without a PIN: the count",
    "setPIN on a key with a PIN: CTAP2_ERR_NOT_ALLOWED (the text gives CTAP2_ERR_PIN_AUTH_INVALID)",
    "an unknown clientPIN subcommand: 0x7f CTAP1_ERR_OTHER",
    "getPinToken twice on a FIDO_2_1_PRE key: the same token",
]
# What a profile fails as the key it imitates does: Solo 1 answers INVALID_OPTION to any explicit up in
# makeCredential and to rk in getAssertion (CTAP 2.0's rules on a FIDO_2_1_PRE key, fido2/ctap.c).
PROFILE_FAILURES = {"solo1": ["get-assertion.rk-option", "make-credential.up-option"]}

# The other built-in profiles change no choice: they are observed as fidosim is. always-uv's PIN is set at the start
# (alwaysUv is on after the reset), so getPINRetries is never asked without one.
for _name in ("legacy-quirks", "tiny-storage"):
    PROFILE_OBSERVATIONS[_name] = PROFILE_OBSERVATIONS["fidosim"]
PROFILE_OBSERVATIONS["always-uv"] = [o for o in PROFILE_OBSERVATIONS["fidosim"] if "getPINRetries" not in o]


@pytest.mark.parametrize("profile", sorted(PROFILE_OBSERVATIONS))
def test_each_built_in_profile_passes_and_its_choices_are_observed(profile, tmp_path, start_sim):
    key = start_sim("--profile", profile)
    try:
        out = conform(key, "--allow-destructive", "--report", str(tmp_path))
        failures = PROFILE_FAILURES.get(profile, [])
        assert out.returncode == (1 if failures else 0), out.stdout + out.stderr
        report = json.loads((tmp_path / "report.json").read_text())
        assert sorted(c["id"] for c in report["checks"] if c["status"] == "failed") == failures
        observed = sorted(line.removeprefix("observed: ") for line in out.stdout.splitlines()
                          if line.startswith("observed: "))
        assert observed == sorted(PROFILE_OBSERVATIONS[profile]), out.stdout
        assert sorted(report["observations"]) == observed
        assert "## Choices observed" in (tmp_path / "report.md").read_text()
    finally:
        key.finish()


@pytest.mark.sim_args("--profile", "u2f-only")
def test_a_u2f_only_key_runs_the_u2f_checks(sim):
    out = conform(sim, "--allow-destructive")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "pass  u2f.authenticate" in out.stdout
    assert "skip  make-credential.es256" in out.stdout and "does not speak CTAP2" in out.stdout


def test_bad_arguments_are_refused_clearly(sim):
    binary = str(sim.binary)
    out = subprocess.run([binary, "conform", "--device", "usb:whatever"], capture_output=True, text=True)
    assert out.returncode != 0
    assert "expected hid:/dev/hidrawN, hid:VID:PID, hid:auto, udp:HOST:PORT or pcsc:READER" in out.stderr
    out = subprocess.run([binary, "conform", "--device", device_address(sim), "--only", "nosuch"], capture_output=True,
                         text=True)
    assert out.returncode != 0 and "unknown group 'nosuch'" in out.stderr
    out = subprocess.run([binary, "conform", "--device", "udp:127.0.0.1:1", "--no-control"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 3 and "cannot reach the key" in out.stderr


def test_a_key_that_goes_away_ends_the_run_quickly(tmp_path):
    """The key is killed during the run: the check under way fails, the rest are skipped, and the runner ends."""

    server = FidosimServer(presence_delay_ms=None, notify=None, startup_timeout=30).start()
    port, control = server.key.port, server.key.control_path
    try:
        runner = subprocess.Popen([str(find_binary()), "conform", "--device", f"udp:127.0.0.1:{port}", "--control",
                                   control, "--report", str(tmp_path)], stdout=subprocess.PIPE, text=True)
        lines = []
        for line in runner.stdout:
            lines.append(line)
            if line.startswith("pass  hid.ping.sizes"):
                server.send_signal(signal.SIGKILL)
        runner.wait(timeout=120)
    finally:
        server.close()
    assert runner.returncode == 3, "".join(lines)  # the key could not be reached
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["stoppedAnswering"] is True
    skipped = [c for c in report["checks"] if c.get("message") == "not run: the key stopped answering"]
    assert len(skipped) > 50
    assert report["seconds"] < 90


def pin_retries(sim) -> int:
    return ClientPin(Ctap2(sim.device()), PinProtocolV2()).get_pin_retries()[0]


def test_a_wrong_pin_stops_the_run_after_one_retry(sim):
    ClientPin(Ctap2(sim.device()), PinProtocolV2()).set_pin("55555555")
    assert pin_retries(sim) == 8
    for run in range(1, 4):
        out = conform(sim, "--pin", "12341234")
        assert out.returncode == 2, out.stdout + out.stderr
        # The third wrong PIN in a row is also the key's PIN_AUTH_BLOCKED (until a power cycle), as on any client.
        expected = "the PIN given is wrong (CTAP2_ERR_PIN_INVALID; the key has" if run < 3 else \
            "the PIN given was refused: 0x34 CTAP2_ERR_PIN_AUTH_BLOCKED; no check was run"
        assert expected in out.stderr, out.stderr
        assert "pass  " not in out.stdout and "FAIL  " not in out.stdout  # no check ran
        # Each run costs the owner one retry, never three: three runs leave 5 of 8, the PIN is not blocked.
        assert pin_retries(sim) == 8 - run
    sim.power_cycle()
    # The right PIN from a file (or the environment), kept out of ps, restores the retries and runs the checks.
    pin_file = os.path.join(sim.control_dir, "pin")
    with open(pin_file, "w") as f:
        f.write("55555555\n")
    out = conform(sim, "--pin-file", pin_file, "--only", "client-pin")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "pass  client-pin.token" in out.stdout
    assert pin_retries(sim) == 8
    out = subprocess.run(
        [str(sim.binary), "conform", "--device", device_address(sim), "--control", sim.control_path,
         "--only", "client-pin"], capture_output=True, text=True, timeout=600,
        env=dict(os.environ, FIDOSIM_PIN="55555555"))
    assert out.returncode == 0 and "pass  client-pin.token" in out.stdout, out.stdout + out.stderr


def test_a_key_with_few_pin_retries_left_is_not_tried(sim):
    client_pin = ClientPin(Ctap2(sim.device()), PinProtocolV2())
    client_pin.set_pin("55555555")
    for wrong in range(6):
        if wrong and wrong % 3 == 0:
            sim.power_cycle()
        try:
            ClientPin(Ctap2(sim.device()), PinProtocolV2()).get_pin_token("00000000")
        except CtapError:
            pass
    sim.power_cycle()
    assert pin_retries(sim) == 2
    out = conform(sim, "--pin", "55555555")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "the key has 2 PIN retries left: the run stops before spending one" in out.stderr
    assert pin_retries(sim) == 2


@pytest.mark.skipif(TRANSPORT != "udp", reason="the UDP key's control socket")
def test_a_fidosim_key_without_its_control_socket_is_named_not_failed(sim, tmp_path):
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path), HOME=str(tmp_path))
    out = subprocess.run([str(sim.binary), "conform", "--device", device_address(sim)], capture_output=True,
                         text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode != 0
    assert "is a fidosim key (its AAGUID), but its control socket is not " + str(tmp_path / "fidosim/default.sock") \
        in out.stderr, out.stderr
    assert "pass  " not in out.stdout and "FAIL  " not in out.stdout
