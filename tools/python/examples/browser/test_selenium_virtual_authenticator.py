"""A Selenium test written for Chromium's virtual authenticator, unchanged, run against real keys: the test is pointed
at `fidosim webdriver` (``webdriver.Remote(FIDOSIM_WEBDRIVER, ...)``) instead of chromedriver. fidosim starts
chromedriver in a private key tree and answers the WebAuthn extension commands itself: ``add_virtual_authenticator``
plugs a real CTAP key into the tree (Chromium sees a security key arrive and uses its own security-key path),
``add_credential``, ``get_credentials`` and ``remove_virtual_authenticator`` are that key's. Everything between the
test and the browser is what it was; what differs is what a real key and the browser's UI do (the README's "Selenium's
virtual authenticator on real keys").

The test body below (from ``options = VirtualAuthenticatorOptions()`` on) is a virtual-authenticator test as Selenium's
documentation writes them: resident keys and user verification, a credential added with a known P-256 key and used
from the page, a passkey registered and signed in on the site, the credentials read back with their sign counts.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
import time
from typing import Iterator

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.virtual_authenticator import Credential, VirtualAuthenticatorOptions
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from fidosim import FidosimControl, FidosimHub, find_binary

CHROMIUM = "/usr/bin/chromium"
WAIT_S = 30


@pytest.fixture
def fidosim_webdriver() -> Iterator[dict]:
    """`fidosim webdriver` on a free port; its ready file (the endpoint, the hub)."""
    directory = tempfile.mkdtemp(prefix="fidosim-webdriver-test-")
    ready = os.path.join(directory, "ready.json")
    process = subprocess.Popen([str(find_binary()), "webdriver", "--webdriver-port", "0", "--ready-file", ready,
                                "--log-level", "warning"], stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not os.path.exists(ready):
        assert process.poll() is None, f"fidosim webdriver exited with {process.returncode}"
        assert time.monotonic() < deadline, "fidosim webdriver was not ready within 60 s"
        time.sleep(0.05)
    with open(ready) as f:
        record = json.load(f)
    yield record
    process.terminate()
    assert process.wait(timeout=30) is not None


@pytest.fixture
def driver(fidosim_webdriver: dict, relying_party: str, chromium_log_args: list[str]) -> Iterator[webdriver.Remote]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    options.add_argument("--headless=new")
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")
    for arg in chromium_log_args:
        options.add_argument(arg)
    driver = webdriver.Remote(command_executor=fidosim_webdriver["webdriver"], options=options)
    try:
        driver.get(relying_party)
        yield driver
    finally:
        driver.quit()


def click(driver, label: str) -> None:
    driver.find_element(By.XPATH, f"//button[text()='{label}']").click()


def verdict(driver, text: str) -> dict:
    WebDriverWait(driver, WAIT_S).until(expected_conditions.text_to_be_present_in_element((By.ID, "out"), text))
    return json.loads(driver.find_element(By.ID, "out").text)


# navigator.credentials.get() with one allowed credential; the assertion's parts, base64url, back to the test.
GET_WITH = """
const [id, giveUpMs, done] = arguments.length > 2 ? arguments : [arguments[0], 0, arguments[1]];
const b64 = s => Uint8Array.from(atob(s.replace(/-/g, '+').replace(/_/g, '/')), c => c.charCodeAt(0));
const enc = b => btoa(String.fromCharCode(...new Uint8Array(b)))
    .replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '');
navigator.credentials.get({signal: giveUpMs ? AbortSignal.timeout(giveUpMs) : undefined,
  publicKey: {challenge: new Uint8Array(32), rpId: 'localhost', timeout: 20000,
    allowCredentials: [{type: 'public-key', id: b64(id)}], userVerification: 'discouraged'}})
  .then(c => done({id: c.id, authenticatorData: enc(c.response.authenticatorData),
                   clientDataJSON: enc(c.response.clientDataJSON), signature: enc(c.response.signature)}))
  .catch(e => done({error: String(e)}));
"""


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_an_unmodified_virtual_authenticator_test_runs_on_a_real_key(driver, fidosim_webdriver: dict):
    options = VirtualAuthenticatorOptions()
    options.has_resident_key = True
    options.has_user_verification = True
    options.is_user_verified = True
    driver.add_virtual_authenticator(options)

    # The key behind it, seen from outside the browser: its events show each ceremony.
    [key] = FidosimHub(path=fidosim_webdriver["hub"]).list_virtual_authenticators()
    events = FidosimControl(path=key["control"])
    events.subscribe()

    # A credential with a known P-256 key, used from the page; the test checks the signature with its own key.
    known = ec.generate_private_key(ec.SECP256R1())
    pkcs8 = known.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    credential_id = os.urandom(16)
    driver.add_credential(Credential.create_non_resident_credential(credential_id, "localhost", pkcs8, 0))
    used = driver.execute_async_script(GET_WITH, base64.urlsafe_b64encode(credential_id).decode().rstrip("="))
    assert "error" not in used, used
    assert unb64(used["id"]) == credential_id
    auth_data, client_data = unb64(used["authenticatorData"]), unb64(used["clientDataJSON"])
    known.public_key().verify(unb64(used["signature"]), auth_data + _sha256(client_data), ec.ECDSA(hashes.SHA256()))
    assert events.wait_for_event(lambda e: e.get("event") == "request" and e["command"] == "getAssertion",
                                 timeout=WAIT_S)["status"] == "ok"

    # A passkey registered and signed in on the site (its server verifies both by itself).
    click(driver, "Register")
    registered = verdict(driver, '"registered": true')
    assert events.wait_for_event(lambda e: e.get("event") == "request" and e["command"] == "makeCredential",
                                 timeout=WAIT_S)["status"] == "ok"
    click(driver, "Sign in")
    signed_in = verdict(driver, '"authenticated": true')
    assert signed_in["credentialId"] == registered["credentialId"]

    credentials = {unb64(c.id): c for c in driver.get_credentials()}  # Selenium gives ids as base64url
    assert credential_id in credentials
    passkey = credentials[bytes.fromhex(registered["credentialId"])]
    assert passkey.is_resident_credential and passkey.rp_id == "localhost"
    assert passkey.sign_count >= signed_in["signCount"] > 0

    driver.remove_virtual_authenticator()
    assert FidosimHub(path=fidosim_webdriver["hub"]).list_virtual_authenticators() == []


def test_keys_come_and_go_while_the_browser_runs(driver):
    """The browser, started with no key, sees each one arrive and leave: a credential of a removed key is found by
    nobody (the page's request is still waiting when it gives up after 3 s), the next key's is used at once."""
    def use(credential_id: bytes, give_up_ms: int) -> dict:
        # Chromium waits for a key longer than a page may ask it to: the page gives up itself (an AbortSignal).
        return driver.execute_async_script(GET_WITH, base64.urlsafe_b64encode(credential_id).decode().rstrip("="),
                                           give_up_ms)

    for round in range(2):
        driver.add_virtual_authenticator(VirtualAuthenticatorOptions())
        known = ec.generate_private_key(ec.SECP256R1())
        pkcs8 = known.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        credential_id = os.urandom(16)
        driver.add_credential(Credential.create_non_resident_credential(credential_id, "localhost", pkcs8, 0))
        assert unb64(use(credential_id, 20000)["id"]) == credential_id, f"round {round}"
        driver.remove_virtual_authenticator()
        # No key answers any more: the request is still waiting for one when the page gives up.
        assert "TimeoutError" in use(credential_id, 3000)["error"]


def _sha256(data: bytes) -> bytes:
    digest = hashes.Hash(hashes.SHA256())
    digest.update(data)
    return digest.finalize()
