"""The control socket, driven by the `fidosim` package's client (tools/python) while python-fido2 uses the key.

Keys made here are checked with `cryptography` (OpenSSL), never with fidosim's own code: an imported private key
must sign what python-fido2 receives, and an exported private key must belong to the public key python-fido2
registered.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import subprocess
import threading

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction
from fido2.ctap import CtapError
from fido2.ctap1 import ApduError, Ctap1
from fido2.ctap2 import Ctap2
from fido2.ctap2.pin import ClientPin
from fido2.webauthn import AuthenticatorData

from fidosim.control import ControlError, b64url
from fidosim.testing import (
    ORIGIN,
    RP,
    assert_signs_like,
    control_lines_as_nobody,
    descriptor,
    expect_ctap_error,
    make_server,
    new_cdh,
    user,
)

# Another user cannot run the interpreter under /root (pyenv's, this suite's venv): the system's python3 runs the
# stdlib-only scripts of the tests that connect as someone else.

ES256 = [{"type": "public-key", "alg": -7}]


def pkcs8(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def verify_es256(public_key, auth_data: bytes, cdh: bytes, signature: bytes) -> None:
    public_key.verify(signature, bytes(auth_data) + cdh, ec.ECDSA(hashes.SHA256()))


# --------------------------------------------------------------------------
# Credentials in and out (WebDriver names)
# --------------------------------------------------------------------------


def test_an_added_credential_signs_and_openssl_verifies(sim):
    key = ec.generate_private_key(ec.SECP256R1())
    cred_id = os.urandom(40)
    with sim.control() as ctl:
        ctl.add_credential(cred_id, "example.com", pkcs8(key), resident=False, sign_count=100)
    ctap2 = Ctap2(sim.device())
    cdh = new_cdh()
    assertion = ctap2.get_assertion("example.com", cdh, [descriptor(cred_id)])
    assert assertion.credential["id"] == cred_id
    verify_es256(key.public_key(), assertion.auth_data, cdh, assertion.signature)
    assert assertion.auth_data.counter > 100
    # Not discoverable: an empty allow list finds nothing.
    expect_ctap_error(CtapError.ERR.NO_CREDENTIALS, ctap2.get_assertion, "example.com", new_cdh())


def test_an_added_resident_ed25519_credential_is_discovered(sim):
    key = ed25519.Ed25519PrivateKey.generate()
    cred_id, handle = os.urandom(16), os.urandom(32)
    with sim.control() as ctl:
        ctl.add_credential(cred_id, "example.com", pkcs8(key), resident=True, user_handle=handle,
                           user_name="alice", user_display_name="Alice")
        listed = ctl.get_credentials()
    assert [(c["credentialId"], c["userHandle"], c["algorithm"]) for c in listed] == [(cred_id, handle, "EdDSA")]
    assert listed[0]["privateKey"] == pkcs8(key)
    cdh = new_cdh()
    assertion = Ctap2(sim.device()).get_assertion("example.com", cdh)
    assert assertion.credential["id"] == cred_id
    assert assertion.user["id"] == handle
    key.public_key().verify(assertion.signature, bytes(assertion.auth_data) + cdh)


def test_registered_credentials_export_their_private_keys(sim):
    """python-fido2 registers through Fido2Client; the exported PKCS#8 key belongs to the registered public key."""
    server = make_server()
    client = Fido2Client(sim.device(), DefaultClientDataCollector(ORIGIN), user_interaction=UserInteraction())
    made = {}
    for rk in ("discouraged", "required"):
        options, state = server.register_begin(
            user(f"user-{rk}"), resident_key_requirement=rk, user_verification="discouraged")
        result = client.make_credential(options.public_key)
        made[rk] = server.register_complete(state, result).credential_data
    with sim.control() as ctl:
        listed = {c["credentialId"]: c for c in ctl.get_credentials()}
    assert set(listed) == {made[rk].credential_id for rk in made}
    for rk, data in made.items():
        exported = listed[data.credential_id]
        assert exported["isResidentCredential"] == (rk == "required")
        assert exported["rpId"] == "example.com"
        private = serialization.load_der_private_key(exported["privateKey"], None)
        numbers = private.public_key().public_numbers()
        assert (numbers.x.to_bytes(32, "big"), numbers.y.to_bytes(32, "big")) == (data.public_key[-2],
                                                                                 data.public_key[-3])


def test_remove_credential_and_remove_all(sim):
    ctap2 = Ctap2(sim.device())
    ids = []
    for i in range(3):
        made = ctap2.make_credential(new_cdh(), RP, user(f"u{i}"), ES256, options={"rk": True})
        ids.append(made.auth_data.credential_data.credential_id)
    with sim.control() as ctl:
        ctl.remove_credential(ids[0])
        with pytest.raises(ControlError) as missing:
            ctl.remove_credential(ids[0])
        assert missing.value.code == "not-found"
        expect_ctap_error(
            CtapError.ERR.NO_CREDENTIALS, ctap2.get_assertion, "example.com", new_cdh(), [descriptor(ids[0])])
        assert ctl.remove_all_credentials() == 2
        assert ctl.get_credentials() == []
    expect_ctap_error(CtapError.ERR.NO_CREDENTIALS, ctap2.get_assertion, "example.com", new_cdh())


def test_removed_non_discoverable_credentials_are_revoked_u2f_ones_too(sim):
    """A non-discoverable credential's id holds its key: removing it (or all) through the control plane revokes it,
    as a WebDriver authenticator forgets what it removed. A U2F registration's key handle is revoked by remove-all
    (the key knows only its application's hash, so it cannot list it by RP)."""
    ctap2 = Ctap2(sim.device())
    made = [ctap2.make_credential(new_cdh(), RP, user(f"n{i}"), ES256).auth_data.credential_data.credential_id
            for i in range(2)]
    ctap1 = Ctap1(sim.device())
    app = hashlib.sha256(b"https://u2f.example").digest()
    handle = ctap1.register(new_cdh(), app).key_handle
    ctap1.authenticate(new_cdh(), app, handle)
    with sim.control() as ctl:
        ctl.remove_credential(made[0])
        expect_ctap_error(CtapError.ERR.NO_CREDENTIALS, ctap2.get_assertion, "example.com", new_cdh(),
                          [descriptor(made[0])])
        assert ctap2.get_assertion("example.com", new_cdh(), [descriptor(made[1])]).credential["id"] == made[1]
        assert ctl.remove_all_credentials() == 2  # the other CTAP2 one and the U2F registration
    expect_ctap_error(CtapError.ERR.NO_CREDENTIALS, ctap2.get_assertion, "example.com", new_cdh(),
                      [descriptor(made[1])])
    with pytest.raises(ApduError) as refused:
        ctap1.authenticate(new_cdh(), app, handle)
    assert refused.value.code == 0x6A80


def test_a_bad_private_key_is_refused_and_nothing_is_stored(sim):
    with sim.control() as ctl:
        rsa_like = b"\x30\x03\x02\x01\x00"
        with pytest.raises(ControlError) as refused:
            ctl.add_credential(b"x", "example.com", rsa_like, resident=False)
        assert refused.value.code == "invalid-params"
        assert ctl.get_credentials() == []


# --------------------------------------------------------------------------
# Presence, touch, user verification, options
# --------------------------------------------------------------------------


def test_prompt_mode_waits_for_a_touch_announced_by_an_event(sim):
    with sim.control() as ctl, sim.control() as watcher:
        ctl.presence("prompt")
        watcher.subscribe()
        ctap2 = Ctap2(sim.device())
        result = {}

        def register():
            try:
                result["made"] = ctap2.make_credential(new_cdh(), RP, user("bob"), ES256)
            except Exception as error:  # reported below
                result["error"] = error

        thread = threading.Thread(target=register)
        thread.start()
        prompt = watcher.wait_for_event(lambda e: e["event"] == "prompt")
        assert (prompt["command"], prompt["rpId"], prompt["userName"]) == ("makeCredential", "example.com", "bob")
        assert ctl.status()["pending"]["rpId"] == "example.com"
        assert ctl.touch()["answered"] is True
        thread.join(10)
        assert "error" not in result, result.get("error")
        made_id = result["made"].auth_data.credential_data.credential_id
        done = watcher.wait_for_event(lambda e: e["event"] == "request" and e["command"] == "makeCredential")
        assert done["status"] == "ok"
        assert done["rpId"] == "example.com"
        assert done["credentialId"] == b64url(made_id)


def test_deny_and_approve_next(sim):
    ctap2 = Ctap2(sim.device())
    with sim.control() as ctl:
        ctl.presence("deny", delay_ms=0)
        expect_ctap_error(CtapError.ERR.OPERATION_DENIED, ctap2.make_credential, new_cdh(), RP, user("a"), ES256)
        ctl.presence("approveNext", delay_ms=0)
        ctap2.make_credential(new_cdh(), RP, user("b"), ES256)
        # Back to deny after the one approval.
        expect_ctap_error(CtapError.ERR.OPERATION_DENIED, ctap2.make_credential, new_cdh(), RP, user("c"), ES256)
        ctl.set_automatic_presence_simulation(True)
        ctap2.make_credential(new_cdh(), RP, user("d"), ES256)


@pytest.mark.sim_args("--uv", "fingerprint", "--enrolled-fingers", "1")
def test_set_user_verified_decides_the_finger(sim):
    ctap2 = Ctap2(sim.device())
    with sim.control() as ctl:
        ctl.set_user_verified(False)
        expect_ctap_error(CtapError.ERR.OPERATION_DENIED, ctap2.make_credential, new_cdh(), RP, user("a"), ES256,
                          options={"uv": True})
        ctl.set_user_verified(True)
        made = ctap2.make_credential(new_cdh(), RP, user("a"), ES256, options={"uv": True})
        assert made.auth_data.flags & AuthenticatorData.FLAG.UV


def test_set_option_always_uv_shows_in_get_info(sim):
    with sim.control() as ctl:
        assert ctl.set_option(alwaysUv=True)["alwaysUv"] is True
        assert Ctap2(sim.device()).get_info().options["alwaysUv"] is True
        assert ctl.set_option(alwaysUv=False)["alwaysUv"] is False
        assert Ctap2(sim.device()).get_info().options["alwaysUv"] is False


def test_power_cycle_lifts_the_three_wrong_pins_block(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin("12345678")
    for _ in range(2):
        expect_ctap_error(CtapError.ERR.PIN_INVALID, ClientPin(ctap2).get_pin_token, "00000000")
    expect_ctap_error(CtapError.ERR.PIN_AUTH_BLOCKED, ClientPin(ctap2).get_pin_token, "00000000")
    expect_ctap_error(CtapError.ERR.PIN_AUTH_BLOCKED, ClientPin(ctap2).get_pin_token, "12345678")
    with sim.control() as ctl:
        ctl.subscribe()
        ctl.power_cycle()
        assert ctl.wait_for_event(lambda e: e["event"] == "powerCycle")
    sim.replugged()
    assert ClientPin(Ctap2(sim.device())).get_pin_token("12345678")


# --------------------------------------------------------------------------
# Fault injection
# --------------------------------------------------------------------------


def test_an_injected_status_reaches_the_client(sim):
    ctap2 = Ctap2(sim.device())
    with sim.control() as ctl:
        ctl.subscribe()
        ctl.inject_fault("status", command="makeCredential", status=0x28, count=2)
        for _ in range(2):
            expect_ctap_error(CtapError.ERR.KEY_STORE_FULL, ctap2.make_credential, new_cdh(), RP, user("a"), ES256)
        event = ctl.wait_for_event(lambda e: e["event"] == "request" and e["command"] == "makeCredential")
        assert event["injected"] is True and event["status"] == "keyStoreFull"
        ctap2.make_credential(new_cdh(), RP, user("a"), ES256)
        assert ctap2.get_info()  # other commands were never affected


def test_key_store_full_after_n_credentials(sim):
    ctap2 = Ctap2(sim.device())
    with sim.control() as ctl:
        ctl.inject_fault("keyStoreFull", afterCredentials=2)
        for i in range(2):
            ctap2.make_credential(new_cdh(), RP, user(f"u{i}"), ES256, options={"rk": True})
        expect_ctap_error(CtapError.ERR.KEY_STORE_FULL, ctap2.make_credential, new_cdh(), RP, user("u2"), ES256,
                          options={"rk": True})
        assert ctl.status()["storage"]["remainingCapacity"] == 0
        ctap2.make_credential(new_cdh(), RP, user("u3"), ES256)  # non-discoverable credentials need no room
        ctl.clear_faults()
        ctap2.make_credential(new_cdh(), RP, user("u2"), ES256, options={"rk": True})


@pytest.fixture
def sim_with_flash(tmp_path, start_sim):
    key = start_sim("--flash", str(tmp_path / "key.img"))
    yield key
    key.finish()


def test_a_failed_flash_write_keeps_the_old_state(sim_with_flash):
    sim = sim_with_flash
    ctap2 = Ctap2(sim.device())
    first = ctap2.make_credential(new_cdh(), RP, user("kept"), ES256, options={"rk": True})
    with sim.control() as ctl:
        ctl.inject_fault("flashWriteFailure")
        expect_ctap_error(CtapError.ERR.OTHER, ctap2.make_credential, new_cdh(), RP, user("lost"), ES256,
                          options={"rk": True})
        assert [c["userName"] for c in ctl.get_credentials()] == ["kept"]
    sim.power_cycle()
    ctap2 = Ctap2(sim.device())
    cdh = new_cdh()
    found = ctap2.get_assertion("example.com", cdh)
    assert found.credential["id"] == first.auth_data.credential_data.credential_id
    assert found.number_of_credentials in (None, 1)


@pytest.mark.skipif(os.environ.get("FIDOSIM_TRANSPORT", "udp") != "udp", reason="sends raw UDP reports")
def test_dropped_reports(sim):
    with sim.control() as ctl:
        ctl.inject_fault("dropReports", direction="in", count=1)
        raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        raw.settimeout(1.0)
        raw.connect((sim.host, sim.port))
        init = b"\xff\xff\xff\xff\x86\x00\x08" + os.urandom(8)
        raw.send(init.ljust(64, b"\0"))
        with pytest.raises(socket.timeout):
            raw.recv(64)
        raw.send(init.ljust(64, b"\0"))
        answer = raw.recv(64)
        assert answer[4] == 0x86 and answer[7:15] == init[7:15]
        assert ctl.status()["faults"]["dropInbound"] == 0
        raw.close()


# --------------------------------------------------------------------------
# The socket itself: permissions, malformed requests, size limit
# --------------------------------------------------------------------------


def test_socket_and_directory_are_private(sim):
    assert stat.S_IMODE(os.stat(sim.control_path).st_mode) == 0o600
    assert stat.S_ISSOCK(os.stat(sim.control_path).st_mode)
    assert stat.S_IMODE(os.stat(os.path.dirname(sim.control_path)).st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another user")
def test_another_user_is_refused(sim):
    # Open the file-system permissions so the check of the peer's uid is what refuses.
    os.chmod(os.path.dirname(sim.control_path), 0o755)
    os.chmod(sim.control_path, 0o666)
    lines = control_lines_as_nobody(sim.control_path, '{"id":1,"command":"status"}')
    assert len(lines) == 1, "the refused peer gets one error line and then end of stream"
    message = json.loads(lines[0])
    assert message["ok"] is False and message["error"]["code"] == "permission-denied"
    with sim.control() as ctl:  # the owner still gets in
        assert ctl.status()["protocolVersion"] == 1


MALFORMED = [
    (b"this is not json", "parse-error", None),
    (b'{"id":1,"command":"status"', "parse-error", None),
    (b'{"id":1,"id":2,"command":"status"}', "parse-error", None),
    (b"\xff\xfe", "parse-error", None),
    (b'["status"]', "invalid-request", None),
    (b'{"command":"status"}', "invalid-request", None),
    (b'{"id":[1],"command":"status"}', "invalid-request", None),
    (b'{"id":7,"params":{}}', "invalid-request", 7),
    (b'{"id":8,"command":"status","params":"all"}', "invalid-request", 8),
    (b'{"id":"x","command":"selfDestruct"}', "unknown-command", "x"),
    (b'{"id":9,"command":"presence","params":{"mode":42}}', "invalid-params", 9),
    (b'{"id":10,"command":"presence","params":{"mode":"approve","delayMs":-5}}', "invalid-params", 10),
    (b'{"id":11,"command":"setUserVerified","params":{}}', "invalid-params", 11),
    (b'{"id":12,"command":"removeCredential","params":{"credentialId":"!!"}}', "invalid-params", 12),
    (b'{"id":13,"command":"status","params":{"unexpected":true}}', "invalid-params", 13),
    (b'{"id":14,"command":"injectFault","params":{"kind":"status","command":"getInfo","status":300}}',
     "invalid-params", 14),
    (b'[' * 100000, "parse-error", None),
]


def test_every_malformed_request_gets_a_structured_error_and_disturbs_nothing(sim):
    ctap2 = Ctap2(sim.device())
    made = ctap2.make_credential(new_cdh(), RP, user("before"), ES256, options={"rk": True})
    with sim.control() as ctl:
        for line, code, request_id in MALFORMED:
            ctl.send_line(line)
            answer = ctl.read_message()
            assert answer["ok"] is False, line
            assert answer["error"]["code"] == code, (line, answer)
            assert answer["id"] == request_id, (line, answer)
            assert answer["error"]["message"]
        # The connection and the key still work.
        assert ctl.status()["storage"]["discoverableCredentials"] == 1
    cdh = new_cdh()
    assert ctap2.get_assertion("example.com", cdh).credential["id"] == made.auth_data.credential_data.credential_id


def test_a_line_over_one_mebibyte_is_refused_and_the_next_one_works(sim):
    with sim.control() as ctl:
        big = b'{"id":1,"command":"status","params":{"pad":"' + b"a" * (1 << 20) + b'"}}'
        ctl.send_line(big)
        answer = ctl.read_message()
        assert answer["ok"] is False and answer["error"]["code"] == "too-large"
        assert ctl.status()["protocolVersion"] == 1
        # Just under the limit is read (and refused only for its unknown parameter).
        near = b'{"id":2,"command":"status","params":{"pad":"' + b"a" * ((1 << 20) - 100) + b'"}}'
        ctl.send_line(near)
        answer = ctl.read_message()
        assert answer["id"] == 2 and answer["error"]["code"] == "invalid-params"


def test_a_second_simulator_cannot_take_the_socket(sim):
    out = subprocess.run(
        [str(sim.binary), "serve", "--transport", "udp", "--port", "0", "--flash", "memory",
         "--control", sim.control_path],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode != 0
    assert "another fidosim answers on" in out.stderr
    with sim.control() as ctl:
        assert ctl.status()["protocolVersion"] == 1


def test_ctl_command_line(sim):
    def ctl(*args):
        return subprocess.run([str(sim.binary), "ctl", "--control", sim.control_path, *args],
                              capture_output=True, text=True, timeout=30)

    status = ctl("status")
    assert status.returncode == 0 and "aaguid:      f1d0f1d0-5157-4e00-8a6e-000000000001" in status.stdout
    assert json.loads(ctl("--json", "status").stdout)["protocolVersion"] == 1
    assert ctl("presence", "deny", "delayMs=0").stdout.strip() == "presence: deny after 0.0 seconds"
    # A request the key cannot read is bad input (exit 2); a missing socket is an unreachable key (exit 3).
    refused = ctl("presence", "sometimes")
    assert refused.returncode == 2 and "invalid-params" in refused.stderr
    key = ec.generate_private_key(ec.SECP256R1())
    added = ctl("add-credential", "credentialId=AAEC", "isResidentCredential=true", "rpId=example.com",
                f"privateKey={b64url(pkcs8(key))}", "userHandle=dXNlcg", "userName=carol")
    assert added.returncode == 0, added.stderr
    table = ctl("credentials").stdout
    assert "example.com" in table and "carol" in table and "AAEC" in table
    missing = subprocess.run([str(sim.binary), "ctl", "--control", sim.control_path + ".nope", "status"],
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode == 3 and "cannot connect" in missing.stderr


# --------------------------------------------------------------------------
# fidosim credentials export / import (WebDriver JSON and CXF)
# --------------------------------------------------------------------------


def run_fidosim(sim, *args, check=True):
    out = subprocess.run([str(sim.binary), *args], capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def register_both_kinds(sim):
    """One discoverable and one non-discoverable credential through python-fido2; their public keys by id."""
    ctap2 = Ctap2(sim.device())
    made = {}
    for name, rk in (("resident", True), ("plain", False)):
        result = ctap2.make_credential(new_cdh(), RP, user(name), ES256, options={"rk": rk})
        data = result.auth_data.credential_data
        made[data.credential_id] = data.public_key
    return made


def test_webdriver_export_then_offline_import_into_an_image(sim, tmp_path, start_sim):
    made = register_both_kinds(sim)
    exported = tmp_path / "creds.json"
    printed = run_fidosim(sim, "credentials", "export", "--control", sim.control_path, "-o", str(exported)).stdout
    assert "exported 2 credentials" in printed
    assert stat.S_IMODE(os.stat(exported).st_mode) == 0o600
    document = json.loads(exported.read_text())
    assert {c["rpId"] for c in document["credentials"]} == {"example.com"}
    # Refuses to overwrite without --force.
    again = run_fidosim(sim, "credentials", "export", "--control", sim.control_path, "-o", str(exported), check=False)
    assert again.returncode != 0 and "exists" in again.stderr

    image = tmp_path / "other.img"
    printed = run_fidosim(sim, "credentials", "import", "--flash", str(image), str(exported)).stdout
    assert "imported 2 of 2 credentials" in printed
    other = start_sim("--flash", str(image))
    try:
        assert_signs_like(other, made)
        # The discoverable one is discoverable there too.
        assertion = Ctap2(other.device()).get_assertion("example.com", new_cdh())
        assert assertion.credential["id"] in made
    finally:
        other.finish()


def test_cxf_export_and_import_into_a_running_key(sim, tmp_path, start_sim):
    made = register_both_kinds(sim)
    exported = tmp_path / "passkeys.cxf.json"
    printed = run_fidosim(sim, "credentials", "export", "--control", sim.control_path, "--format", "cxf",
                          "-o", str(exported)).stdout
    assert "exported 1 credential" in printed and "non-discoverable left out" in printed
    document = json.loads(exported.read_text())
    assert document["version"] == {"major": 1, "minor": 0}
    passkeys = [c for a in document["accounts"] for i in a["items"] for c in i["credentials"]]
    assert [p["type"] for p in passkeys] == ["passkey"]
    assert set(passkeys[0]) >= {"credentialId", "rpId", "username", "userDisplayName", "userHandle", "key"}

    other = start_sim()
    try:
        printed = run_fidosim(other, "credentials", "import", "--control", other.control_path, str(exported)).stdout
        assert "imported 1 of 1 credential" in printed
        cdh = new_cdh()
        assertion = Ctap2(other.device()).get_assertion("example.com", cdh)
        cred_id = assertion.credential["id"]
        made[cred_id].verify(bytes(assertion.auth_data) + cdh, assertion.signature)
    finally:
        other.finish()


def test_cxf_import_of_a_credential_manager_export(sim, tmp_path):
    """A CXF 1.0 document as a credential manager writes it: a password item, a passkey with extensions."""
    key = ec.generate_private_key(ec.SECP256R1())
    cred_id, handle = os.urandom(20), os.urandom(32)
    document = {
        "version": {"major": 1, "minor": 0},
        "exporterRpId": "manager.example",
        "exporterDisplayName": "Manager",
        "timestamp": 1705228800,
        "accounts": [{
            "id": b64url(os.urandom(16)), "username": "jane", "email": "jane@example.com", "collections": [],
            "items": [
                {"id": b64url(os.urandom(16)), "title": "A password",
                 "credentials": [{"type": "basic-auth", "username": {"fieldType": "string", "value": "jane"}}]},
                {"id": b64url(os.urandom(16)), "title": "Example", "creationAt": 1705142400,
                 "credentials": [{
                     "type": "passkey", "credentialId": b64url(cred_id), "rpId": "example.com",
                     "username": "jane", "userDisplayName": "Jane", "userHandle": b64url(handle),
                     "key": b64url(pkcs8(key)),
                     "fido2Extensions": {"hmacCredentials": {"algorithm": "hmac-sha256", "credWithUV": "AQ",
                                                             "credWithoutUV": "Ag"}},
                 }]},
            ],
        }],
    }
    path = tmp_path / "manager.json"
    path.write_text(json.dumps(document))
    printed = run_fidosim(sim, "credentials", "import", "--control", sim.control_path, str(path)).stdout
    assert "imported 1 of 1 credential" in printed and "1 item that are not passkeys left out" in printed
    cdh = new_cdh()
    assertion = Ctap2(sim.device()).get_assertion("example.com", cdh)
    assert (assertion.credential["id"], assertion.user["id"]) == (cred_id, handle)
    verify_es256(key.public_key(), assertion.auth_data, cdh, assertion.signature)


@pytest.mark.parametrize("content, message", [
    ("not json", "is not JSON"),
    ('{"accounts": 3}', "no \"accounts\" array"),
    ('{"credentials": [{"rpId": "example.com"}]}', 'credential 1: missing member "credentialId" (read as webdriver)'),
    ('{"version": {"major": 2, "minor": 0}, "accounts": []}', "newer than this reader"),
])
def test_bad_import_files_are_clear_errors(sim, tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    out = run_fidosim(sim, "credentials", "import", "--control", sim.control_path, str(path), check=False)
    assert out.returncode != 0
    assert message in out.stderr
    with sim.control() as ctl:
        assert ctl.get_credentials() == []


# --------------------------------------------------------------------------
# Traces: JSON lines and pcapng (read back with Debian's tshark)
# --------------------------------------------------------------------------


def test_a_jsonl_trace_has_every_report_and_the_decoded_messages(sim, tmp_path):
    path = tmp_path / "trace.jsonl"
    with sim.control() as ctl:
        assert ctl.request("trace", path=str(path))["format"] == "jsonl"
        ctap2 = Ctap2(sim.device())
        ctap2.make_credential(new_cdh(), RP, user("traced"), ES256)
        assert ctl.request("trace")["tracing"] is None
    records = [json.loads(line) for line in path.read_text().splitlines()]
    reports = [r for r in records if "report" in r]
    assert reports and all(len(bytes.fromhex(r["report"])) == 64 for r in reports)
    assert {r["dir"] for r in reports} == {"in", "out"}
    request = next(r for r in records if r.get("command") == "makeCredential")
    response = next(r for r in records if r.get("type") == "response" and r["channel"] == request["channel"]
                    and r["status"] == "ok" and records.index(r) > records.index(request))
    assert '"name": "traced"' in request["decoded"]
    # The request's reports on its channel reassemble to the payload the trace decoded.
    cid = request["channel"].to_bytes(4, "big")
    inbound = [bytes.fromhex(r["report"]) for r in records[:records.index(request)]
               if r.get("dir") == "in" and "report" in r and bytes.fromhex(r["report"])[:4] == cid]
    start = max(i for i, rep in enumerate(inbound) if rep[4] == 0x90)
    length = int.from_bytes(inbound[start][5:7], "big")
    data = inbound[start][7:] + b"".join(rep[5:] for rep in inbound[start + 1:])
    assert data[:length].hex() == request["payload"]
    assert bytes.fromhex(response["payload"])[0] == 0


@pytest.mark.skipif(subprocess.run(["which", "tshark"], capture_output=True).returncode != 0,
                    reason="tshark is not installed (make test installs it)")
def test_a_pcapng_trace_opens_in_tshark(sim, tmp_path):
    path = tmp_path / "trace.pcapng"
    with sim.control() as ctl:
        assert ctl.request("trace", path=str(path))["format"] == "pcapng"
        ctap2 = Ctap2(sim.device())
        ctap2.make_credential(new_cdh(), RP, user("wire"), ES256)
        ctap2.get_info()
        ctl.request("trace")
    out = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-E", "separator=|", "-e", "frame.len",
         "-e", "frame.packet_flags_direction", "-e", "frame.comment"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split("|", 2) for line in out.stdout.splitlines()]
    assert len(rows) > 10
    assert all(length == "64" for length, _, _ in rows)
    directions = {int(d, 16) for _, d, _ in rows}
    assert directions == {1, 2}  # inbound (from the host) and outbound
    comments = [c for _, _, c in rows if c]
    assert any(c.startswith("CTAP2 makeCredential") and '"wire"' in c for c in comments)
    assert any(c.startswith("CTAP2 response ok") for c in comments)
    assert any(c.startswith("CTAP2 getInfo") for c in comments)


# --------------------------------------------------------------------------
# WebDriver largeBlob: through the large-blob array, read and written by python-fido2's LargeBlobs (zlib)
# --------------------------------------------------------------------------


def test_an_added_large_blob_is_read_by_python_fido2(sim):
    from fido2.ctap2.blob import LargeBlobs

    key = ec.generate_private_key(ec.SECP256R1())
    blob = b"certificate bundle " * 40
    with sim.control() as ctl:
        ctl.request("addCredential", credentialId=b64url(b"blob-cred"), isResidentCredential=True,
                    rpId="example.com", privateKey=b64url(pkcs8(key)), userHandle=b64url(b"u1"),
                    largeBlob=b64url(blob))
        listed = ctl.get_credentials()
    assert listed[0]["largeBlob"] == blob  # the client decodes binary members
    ctap2 = Ctap2(sim.device())
    assertion = ctap2.get_assertion("example.com", new_cdh(), extensions={"largeBlobKey": True})
    assert assertion.large_blob_key and len(assertion.large_blob_key) == 32
    assert LargeBlobs(ctap2).get_blob(assertion.large_blob_key) == blob


def test_a_blob_written_by_python_fido2_shows_in_get_credentials(sim):
    from fido2.ctap2.blob import LargeBlobs

    ctap2 = Ctap2(sim.device())
    made = ctap2.make_credential(new_cdh(), RP, user("blobby"), ES256, options={"rk": True},
                                 extensions={"largeBlobKey": True})
    data = bytes(range(256)) * 8 + b"compressible " * 100  # zlib makes dynamic-Huffman blocks of this
    LargeBlobs(ctap2).put_blob(made.large_blob_key, data)
    with sim.control() as ctl:
        listed = {c["userName"]: c for c in ctl.request("getCredentials")["credentials"]}
    assert listed["blobby"]["largeBlob"] == b64url(data)


def test_a_large_blob_needs_a_resident_credential(sim):
    key = ec.generate_private_key(ec.SECP256R1())
    with sim.control() as ctl:
        with pytest.raises(ControlError) as refused:
            ctl.request("addCredential", credentialId=b64url(b"x"), isResidentCredential=False, rpId="example.com",
                        privateKey=b64url(pkcs8(key)), largeBlob=b64url(b"blob"))
        assert refused.value.code == "invalid-params"
        with pytest.raises(ControlError) as full:
            ctl.request("addCredential", credentialId=b64url(b"y"), isResidentCredential=True, rpId="example.com",
                        privateKey=b64url(pkcs8(key)), userHandle=b64url(b"u"), largeBlob=b64url(os.urandom(5000)))
        assert full.value.code == "failed" and "largeBlobStorageFull" in full.value.message
        assert ctl.get_credentials() == []
