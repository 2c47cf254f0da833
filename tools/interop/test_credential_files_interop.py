"""Credential files in every format fidosim reads and writes (webdriver, cdp, playwright, selenium, cxf): exported
from one key to standard output, checked with the readers of the tools that write them (Selenium's own Credential,
Python's strict base64, `cryptography` for the keys), imported into another key by `--format auto`, and the
credentials sign there as python-fido2 registered them. Malformed files name the member and the format."""

from __future__ import annotations

import base64
import json
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from fido2.ctap2 import Ctap2

from fidosim.testing import ES256_PARAMS as ES256
from fidosim.testing import RP, assert_signs_like, new_cdh, user


def fidosim(sim, *args, stdin=None, check=True):
    out = subprocess.run([str(sim.binary), *args], capture_output=True, text=True, timeout=60, input=stdin)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def register(sim, names=("alice", "bob")):
    """Discoverable ES256 credentials made through python-fido2: their public keys by id."""
    ctap2 = Ctap2(sim.device())
    made = {}
    for name in names:
        result = ctap2.make_credential(new_cdh(), RP, user(name, name.encode()), ES256, options={"rk": True})
        data = result.auth_data.credential_data
        made[data.credential_id] = data.public_key
    return made


def export(sim, fmt) -> dict | list:
    out = fidosim(sim, "credentials", "export", "--control", sim.control_path, "--format", fmt, "-o", "-")
    assert "exported" in out.stderr  # the count goes to stderr, the document alone to stdout
    return json.loads(out.stdout)


def import_into(other, document) -> str:
    """`credentials import -` (standard input, --format auto) into another key; returns its summary line."""
    return fidosim(other, "credentials", "import", "--control", other.control_path, "-",
                   stdin=json.dumps(document)).stdout


def assert_signs_like_and_discoverable(other, made):
    assert_signs_like(other, made)
    # Discoverable: found without an allow list.
    first = Ctap2(other.device()).get_assertion("example.com", new_cdh())
    assert first.number_of_credentials == len(made)


@pytest.fixture
def other(start_sim):
    key = start_sim()
    yield key
    key.finish()


def strict_b64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def strict_b64url_padded(text: str) -> bytes:
    assert len(text) % 4 == 0 and "+" not in text and "/" not in text, text
    return base64.urlsafe_b64decode(text)


@pytest.mark.parametrize("fmt", ["webdriver", "cdp", "playwright", "selenium", "cxf"])
def test_every_format_round_trips_into_another_key(sim, other, fmt):
    made = register(sim)
    document = export(sim, fmt)
    printed = import_into(other, document)
    assert f"imported {len(made)} of {len(made)} credentials" in printed
    assert_signs_like_and_discoverable(other, made)
    listed = {c["credentialId"]: c for c in other.control().get_credentials()}
    assert set(listed) == set(made)
    assert {c["userName"] for c in listed.values() if "userName" in c} <= {"alice", "bob"}


def test_chrome_devtools_files_are_standard_base64_with_padding(sim):
    register(sim)
    document = export(sim, "cdp")
    for credential in document["credentials"]:
        for name in ("credentialId", "privateKey", "userHandle"):
            strict_b64(credential[name])  # Chromium's strict decoder takes exactly this
        key = serialization.load_der_private_key(strict_b64(credential["privateKey"]), None)
        assert key.curve.name == "secp256r1"
        assert set(credential) <= {"credentialId", "isResidentCredential", "rpId", "privateKey", "userHandle",
                                   "signCount", "largeBlob", "backupEligibility", "backupState", "userName",
                                   "userDisplayName"}


def test_selenium_reads_and_writes_the_selenium_file(sim, other):
    pytest.importorskip("selenium")
    from selenium.webdriver.common.virtual_authenticator import Credential

    made = register(sim)
    document = export(sim, "selenium")
    assert isinstance(document, list)
    credentials = [Credential.from_dict(item) for item in document]
    # Selenium's properties give the values back as it encodes them itself: urlsafe base64 with padding.
    assert {base64.urlsafe_b64decode(c.id) for c in credentials} == set(made)
    for c, item in zip(credentials, document):
        assert item["credentialId"] == c.id and item["privateKey"] == c.private_key
        assert strict_b64url_padded(item["credentialId"]) in made
        serialization.load_der_private_key(base64.urlsafe_b64decode(c.private_key), None)
    # What Selenium writes back (to_dict) is what a test engineer saves: it imports as such.
    printed = import_into(other, [c.to_dict() for c in credentials])
    assert f"imported {len(made)} of {len(made)}" in printed
    assert_signs_like_and_discoverable(other, made)


def test_playwright_storage_state_carries_the_public_key_of_each_private_key(sim):
    register(sim)
    state = export(sim, "playwright")
    assert state["cookies"] == [] and state["origins"] == []
    for credential in state["credentials"]:
        assert set(credential) == {"id", "rpId", "userHandle", "privateKey", "publicKey"}
        assert not any(v.endswith("=") for v in credential.values())  # base64url without padding
        pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
        key = serialization.load_der_private_key(base64.urlsafe_b64decode(pad(credential["privateKey"])), None)
        spki = key.public_key().public_bytes(serialization.Encoding.DER,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)
        assert base64.urlsafe_b64decode(pad(credential["publicKey"])) == spki


def test_a_pem_private_key_is_accepted_by_ctl_add_credential(sim):
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    cdp = {"credentialId": base64.b64encode(b"\xfb\xef\xbe-pem").decode(), "isResidentCredential": True,
           "rpId": "example.com", "privateKey": pem, "userHandle": base64.b64encode(b"\xfa\xce").decode(),
           "signCount": 0, "userName": "pem-user"}
    fidosim(sim, "ctl", "--control", sim.control_path, "add-credential", "--params", json.dumps(cdp))
    [listed] = sim.control().get_credentials()
    assert listed["credentialId"] == b"\xfb\xef\xbe-pem" and listed["userHandle"] == b"\xfa\xce"
    cdh = new_cdh()
    assertion = Ctap2(sim.device()).get_assertion("example.com", cdh)
    from cryptography.hazmat.primitives import hashes

    key.public_key().verify(assertion.signature, bytes(assertion.auth_data) + cdh, ec.ECDSA(hashes.SHA256()))


@pytest.mark.parametrize("document, fmt, message", [
    ({"credentials": [{"credentialId": "AA==", "isResidentCredential": True, "privateKey": "AA==", "colour": 1}]},
     "auto", 'credential 1: unknown member "colour" (read as cdp)'),
    ([{"credentialId": "AA", "isResidentCredential": True, "privateKey": "AA", "userName": "x"}], "selenium",
     'credential 1: unknown member "userName" (read as selenium)'),
    ({"cookies": [], "origins": [], "credentials": [{"id": "AA", "rpId": "example.com", "privateKey": "AA"}]},
     "auto", 'credential 1: missing member "userHandle" (read as playwright)'),
    ({"credentials": [{"credentialId": "AA", "isResidentCredential": "yes", "privateKey": "AA"}]}, "webdriver",
     'credential 1: missing boolean member "isResidentCredential" (read as webdriver)'),
])
def test_a_malformed_file_names_the_member_and_imports_nothing(sim, tmp_path, document, fmt, message):
    path = tmp_path / "creds.json"
    path.write_text(json.dumps(document))
    out = fidosim(sim, "credentials", "import", "--control", sim.control_path, "--format", fmt, str(path), check=False)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert "Usage" not in out.stderr
    assert sim.control().get_credentials() == []
