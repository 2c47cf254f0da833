"""The fidosim Python package (tools/python) as installed: its launcher reads `serve --ready-file`, its pytest
fixtures start and stop keys, and its control client raises one exception class per error code."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import pytest

from fidosim import (
    FidosimServer,
    InvalidParamsError,
    KeyStartError,
    NotFoundError,
    UnknownCommandError,
    probe_init,
)


def test_the_ready_file_names_every_key_and_each_answers(fidosim_server):
    server = fidosim_server(keys=2)
    record = json.loads(open(server.ready_path).readline())
    assert record["version"] == 1 and record["pid"] == server.process.pid
    assert [k["transport"] for k in record["keys"]] == ["udp", "udp"]
    ports = [k["port"] for k in record["keys"]]
    assert len(set(ports)) == 2 and all(p > 0 for p in ports)
    assert (record["port"], record["control"]) == (ports[0], record["keys"][0]["control"])
    for key in server.keys:
        assert probe_init(key.host, key.port, timeout=1.0)
        assert key.control.status()["transport"] == f"udp 127.0.0.1:{key.port}"


def test_an_unwritable_ready_file_stops_serve_before_it_serves():
    binary = os.environ["FIDOSIM_BIN"]
    done = subprocess.run([binary, "serve", "--transport", "udp", "--port", "0", "--flash", "memory",
                           "--control", "off", "--ready-file", "/nonexistent-dir/ready.json"],
                          capture_output=True, text=True, timeout=20)
    assert done.returncode == 1
    assert "--ready-file /nonexistent-dir/ready.json" in done.stderr


def test_a_key_that_cannot_start_raises_with_its_standard_error():
    with pytest.raises(KeyStartError) as raised:
        FidosimServer(profile="no-such-profile").start()
    assert "no-such-profile" in str(raised.value)


def test_each_error_code_has_its_exception(fidosim_key):
    with pytest.raises(InvalidParamsError):
        fidosim_key.control.presence("sometimes")
    with pytest.raises(UnknownCommandError):
        fidosim_key.control.request("launchMissiles")
    with pytest.raises(NotFoundError):
        fidosim_key.control.remove_credential(b"absent")


@pytest.mark.fidosim(pin="123456", profile="yubikey5")
def test_the_pin_option_sets_a_pin_through_ctap(fidosim_key):
    storage = fidosim_key.control.status()["storage"]
    assert storage["pinSet"] and storage["pinRetries"] == 8


def test_the_event_stream_filters_by_member(fidosim_key):
    from fido2.ctap2 import Ctap2

    events = fidosim_key.events
    Ctap2(fidosim_key.device()).get_info()
    event = events.wait_for("request", command="getInfo")
    assert event["status"] == "ok"
    with pytest.raises(TimeoutError):
        events.wait_for("request", timeout=0.3, command="makeCredential")


def test_a_key_file_is_kept_between_servers():
    with tempfile.TemporaryDirectory() as directory:
        image = os.path.join(directory, "key.img")
        with FidosimServer(flash=image) as first:
            first.key.control.add_credential(b"kept", "example.com", _p256(), resident=False)
        with FidosimServer(flash=image) as second:
            assert [c["credentialId"] for c in second.key.control.get_credentials()] == [b"kept"]


def _p256() -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def test_the_testing_module_checks_attestation_up_to_the_shared_root_of_this_tree():
    """fidosim.testing ships fidosim's shared attestation root: the certificate of tools/attestation/shared-root.pem."""
    import ssl
    from pathlib import Path

    from fidosim.testing import SHARED_ROOT

    pem = (Path(__file__).resolve().parents[1] / "attestation" / "shared-root.pem").read_text()
    assert SHARED_ROOT == ssl.PEM_cert_to_DER_cert(pem)


def test_a_server_restarted_on_its_flash_image_keeps_what_its_keys_stored(fidosim_server, tmp_path):
    from fido2.ctap2 import Ctap2

    from fidosim.testing import ES256_PARAMS, RP, new_cdh, user

    server = fidosim_server(flash=tmp_path / "key.img")
    made = Ctap2(server.key.device()).make_credential(new_cdh(), RP, user("alice"), ES256_PARAMS, options={"rk": True})
    first_pid = server.process.pid
    assert server.restart() == 0
    assert server.process.pid != first_pid
    assertion = Ctap2(server.key.device()).get_assertion(RP["id"], new_cdh())
    assert assertion.credential["id"] == made.auth_data.credential_data.credential_id


def test_serve_can_keep_its_own_defaults_and_talk_on_pipes():
    """presence, its delay and notify None: serve's defaults; stdin and stdout PIPE: text pipes, line by line."""
    with FidosimServer(presence=None, presence_delay_ms=None, notify=None, stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE) as server:
        assert "--presence" not in server.command and "--notify" not in server.command
        started = next(line for line in server.process.stdout if "serving a virtual key" in line)
        assert started.startswith(f"fidosim: serving a virtual key on udp 127.0.0.1:{server.key.port}")
        assert "presence: approve after 0.2 seconds)" in started
        server.process.stdin.write("\n")  # nothing waits for a touch: the answer is dropped
        server.process.stdin.flush()
        assert probe_init(server.key.host, server.key.port, timeout=1.0)


def test_the_control_socket_the_directory_and_the_environment_are_the_callers(tmp_path):
    with FidosimServer(control="off", flash="rel/key.img", cwd=tmp_path,
                       env={**os.environ, "FIDOSIM_PACKAGE_TEST": "1"}) as server:
        assert server.key.control_path is None and server.key.record["control"] is None
        assert (tmp_path / "rel" / "key.img").exists()
        with open(f"/proc/{server.pid}/environ", "rb") as f:
            assert b"FIDOSIM_PACKAGE_TEST=1" in f.read().split(b"\0")
    socket = tmp_path / "mine.sock"
    with FidosimServer(control=socket) as server:
        assert server.key.control_path == str(socket)
        assert server.key.control.status()["transport"] == f"udp 127.0.0.1:{server.key.port}"


def test_signals_go_to_serve_itself_under_a_prefix_that_forks(tmp_path):
    """A prefix that runs serve as its child (sh, which waits for it): stop's SIGTERM reaches serve, and the prefix's
    exit code is serve's."""
    ran = tmp_path / "prefix-ran"
    with FidosimServer(prefix=("sh", "-c", f'touch {ran}; "$@"; exit $?', "sh")) as server:
        assert ran.exists()
        assert server.pid == server.record["pid"] != server.process.pid
        assert server.running
        assert server.stop() == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="runs serve as another user")
def test_serve_runs_as_another_user_with_no_groups_of_ours():
    from fidosim.testing import NOBODY

    with FidosimServer(user=NOBODY, group=NOBODY, control="off") as server:
        with open(f"/proc/{server.pid}/status") as f:
            status = {line.split(":")[0]: line.split()[1:] for line in f}
        assert status["Uid"][0] == str(NOBODY) and status["Gid"][0] == str(NOBODY) and status["Groups"] == []
        assert probe_init(server.key.host, server.key.port, timeout=1.0)
        assert server.stop() == 0


def test_a_card_can_go_to_a_vpcd_reader_of_the_tests_own():
    """transport pcsc with vpcd_port instead of a PcscDaemon: the card looks for a reader on that port."""
    with pytest.raises(ValueError):
        FidosimServer(transport="pcsc")
    with FidosimServer(transport="pcsc", vpcd_port=1, control="off") as card:
        assert (card.record["vpcdHost"], card.record["vpcdPort"]) == ("127.0.0.1", 1)
        assert card.running


def test_the_launcher_command_holds_a_key_for_a_shell_and_exits_with_serves_status(tmp_path):
    """python -m fidosim.launch: serve with the options given, the ready record in a file once the key is ready,
    SIGTERM stops it with serve's exit status; a key that cannot start exits with serve's."""
    import signal
    import sys
    import time

    record_path = tmp_path / "record.json"
    # Links planted at the record's name and at the name of a predictable temporary are not written through.
    record_path.symlink_to(tmp_path / "victim")
    (tmp_path / "record.json.partial").symlink_to(tmp_path / "other-victim")
    launcher = subprocess.Popen([sys.executable, "-m", "fidosim.launch", "--record", str(record_path), "--",
                                 "--transport", "udp", "--port", "0", "--flash", "memory", "--control", "off"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 20
        while not record_path.exists():
            assert launcher.poll() is None and time.monotonic() < deadline, launcher.stdout.read()
            time.sleep(0.05)
        assert not record_path.is_symlink() and record_path.stat().st_mode & 0o777 == 0o600
        assert not (tmp_path / "victim").exists() and not (tmp_path / "other-victim").exists()
        record = json.loads(record_path.read_text())
        assert record["pid"] != launcher.pid and record["control"] is None
        assert probe_init(record["host"], record["port"], timeout=1.0)
    finally:
        launcher.send_signal(signal.SIGTERM)
        out = launcher.communicate(timeout=20)[0]
    assert launcher.returncode == 0, out
    assert "serving a virtual key on udp" in out  # serve's output is the launcher's
    refused = subprocess.run([sys.executable, "-m", "fidosim.launch", "--", "--keys", "129"], capture_output=True,
                             text=True, timeout=30)
    assert refused.returncode == 2 and "--keys must be 0 to 128" in refused.stderr
