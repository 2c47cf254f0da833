"""A passkey in Chromium driven by Selenium and chromedriver, with the security key in the test's hands.

The key is private (transport "private": no root, no /dev/uhid): a hidraw node that only the programs given its
environment see. chromedriver gets it (``Service(env=key.subprocess_env())``) and hands it to the Chromium it starts.
(Another way: run the whole session inside a key's tree, ``fidosim run --control PATH -- python -m pytest ...``, and
drive that key with ``FidosimControl(path=PATH)``.) It is in prompt mode, so nothing happens until the test answers:
``touch()``, ``refuse()``, or ``presence("approve")`` to let it answer by itself; ``set_user_verified()`` decides
whether the next finger matches. ``get_credentials()`` reads back what it holds.

Chromium asks a security key to verify the user for a passkey (it raises the site's "preferred" to "required"), and
headless Chromium cannot show its PIN dialog: a key with a PIN would leave the ceremony waiting for a PIN that nobody
can type. So the key has the simulated fingerprint sensor with one finger enrolled, and each ceremony's prompt is a
finger on it (its ``gesture`` is "fingerprint"); a touch is a matching finger.

Needs Selenium (``pip install selenium``), Debian's Chromium and its driver (``apt-get install chromium
chromium-driver``), the fidosim package, python-fido2 (the example site's server) and umockdev.
"""

from __future__ import annotations

import json
import os
from typing import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from fidosim import Key, b64url

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# The network service inside the browser process. umockdev's preload library (the private key's) is not fork-safe: a
# process that Chromium forks from a busy thread may inherit its lock held and hang before it starts, and Chromium
# starts its network service so (here 5 starts in 100 hung; in-process, none in 150).
NETWORK_IN_PROCESS = "--enable-features=NetworkServiceInProcess2"
WAIT_S = 30  # for the key's events and the page; a ceremony takes well under a second once answered
USER_VERIFIED = 0x04  # the UV bit of the authenticator data's flags

pytestmark = pytest.mark.fidosim(transport="private", uv="fingerprint", presence="prompt",
                                 args=["--enrolled-fingers", "1"])


@pytest.fixture
def driver(fidosim_key: Key, relying_party: str, chromium_log_args: list[str]) -> Iterator[webdriver.Chrome]:
    """Headless Chromium on the site's page, its one security key the test's key (which is up before it starts)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    options.add_argument("--headless=new")  # the browser itself, without a window (it has the WebAuthn dialog)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium's sandbox cannot run as root
    for arg in [NETWORK_IN_PROCESS, *chromium_log_args]:
        options.add_argument(arg)
    service = Service(executable_path=CHROMEDRIVER, env=fidosim_key.subprocess_env())
    driver = webdriver.Chrome(options=options, service=service)
    try:
        driver.get(relying_party)
        yield driver
    finally:
        driver.quit()


def click(driver: webdriver.Chrome, label: str) -> None:
    driver.find_element(By.XPATH, f"//button[text()='{label}']").click()


def verdict(driver: webdriver.Chrome, text: str) -> dict:
    """The site's verdict, once the page shows one with `text` in it."""
    WebDriverWait(driver, WAIT_S).until(expected_conditions.text_to_be_present_in_element((By.ID, "out"), text))
    return json.loads(driver.find_element(By.ID, "out").text)


def test_a_passkey_registers_and_signs_in_with_a_touch_each(driver: webdriver.Chrome, fidosim_key: Key):
    key = fidosim_key
    events = key.events  # subscribed from here on

    click(driver, "Register")
    prompt = events.wait_for("prompt", timeout=WAIT_S)  # Chromium asks the key for a finger
    assert prompt["rpId"] == "localhost" and prompt["gesture"] == "fingerprint"
    assert key.control.touch()["answered"]
    registered = verdict(driver, '"registered": true')  # the site read the credential id from the browser's answer
    credential_id = bytes.fromhex(registered["credentialId"])
    assert registered["flags"] & USER_VERIFIED

    [stored] = key.control.get_credentials()
    assert stored["rpId"] == "localhost" and stored["credentialId"] == credential_id
    assert stored["isResidentCredential"] and stored["userName"] == "alice@example.com"

    click(driver, "Sign in")
    events.wait_for("prompt", timeout=WAIT_S, rpId="localhost")
    assert key.control.touch()["answered"]
    signed_in = verdict(driver, '"authenticated": true')
    assert signed_in["credentialId"] == registered["credentialId"]
    used = events.wait_for("request", timeout=WAIT_S, command="getAssertion")
    assert used["status"] == "ok" and used["credentialId"] == b64url(credential_id)

    [after] = key.control.get_credentials()
    assert signed_in["signCount"] == after["signCount"] > stored["signCount"]


def test_a_refused_finger_is_asked_for_again(driver: webdriver.Chrome, fidosim_key: Key):
    """refuse() is the person saying no; on the sensor that is a finger that does not match. The key answers
    UV_INVALID, Chromium asks for the finger again, and a touch then registers."""
    key = fidosim_key
    events = key.events
    click(driver, "Register")
    events.wait_for("prompt", timeout=WAIT_S)
    assert key.control.refuse()["answered"]
    events.wait_for("request", timeout=WAIT_S, command="clientPIN", status="uvInvalid")
    assert key.control.get_credentials() == []

    events.wait_for("prompt", timeout=WAIT_S)
    assert key.control.touch()["answered"]
    registered = verdict(driver, '"registered": true')
    assert [c["credentialId"].hex() for c in key.control.get_credentials()] == [registered["credentialId"]]


def test_user_verification_is_the_test_s_to_decide(driver: webdriver.Chrome, fidosim_key: Key):
    """presence("approve") lets the key answer by itself; set_user_verified(False) makes the next finger fail to
    match however it is touched, and True makes it match."""
    key = fidosim_key
    key.control.presence("approve")
    click(driver, "Register")
    registered = verdict(driver, '"registered": true')

    key.control.presence("prompt")
    key.control.set_user_verified(False)
    events = key.events
    click(driver, "Sign in")
    events.wait_for("prompt", timeout=WAIT_S)
    assert key.control.touch()["answered"]
    events.wait_for("request", timeout=WAIT_S, command="clientPIN", status="uvInvalid")

    events.wait_for("prompt", timeout=WAIT_S)  # Chromium asks again
    key.control.set_user_verified(True)
    assert key.control.touch()["answered"]
    signed_in = verdict(driver, '"authenticated": true')
    assert signed_in["credentialId"] == registered["credentialId"] and signed_in["flags"] & USER_VERIFIED
