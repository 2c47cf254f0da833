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
