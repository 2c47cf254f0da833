"""A passkey in Chromium driven by Playwright, with the security key in the test's hands.

The key is private (transport "private": no root, no /dev/uhid): a hidraw node that only the programs given its
environment see, here the Chromium this test starts (``launch(env=key.subprocess_env())``). It is in prompt mode, so
nothing happens until the test answers: ``touch()``, ``refuse()``, or ``presence("approve")`` to let it answer by
itself; ``set_user_verified()`` decides whether the next finger matches. ``get_credentials()`` reads back what it
holds.

Chromium asks a security key to verify the user for a passkey (it raises the site's "preferred" to "required"), and
headless Chromium cannot show its PIN dialog: a key with a PIN would leave the ceremony waiting for a PIN that nobody
can type. So the key has the simulated fingerprint sensor with one finger enrolled, and each ceremony's prompt is a
finger on it (its ``gesture`` is "fingerprint"); a touch is a matching finger.

Needs Playwright's Python package (``pip install playwright``, no ``playwright install``: it starts Debian's Chromium,
``apt-get install chromium``), the fidosim package, python-fido2 (the example site's server) and umockdev.
"""

from __future__ import annotations

import json
import os
from typing import Iterator

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from fidosim import Key, b64url, unb64url

CHROMIUM = "/usr/bin/chromium"
# The network service inside the browser process. umockdev's preload library (the private key's) is not fork-safe: a
# process that Chromium forks from a busy thread may inherit its lock held and hang before it starts, and Chromium
# starts its network service so (here 2 starts in 60 hung; in-process, none in 150).
NETWORK_IN_PROCESS = "--enable-features=NetworkServiceInProcess2"
WAIT_S = 30  # for the key's events and the page; a ceremony takes well under a second once answered
USER_VERIFIED = 0x04  # the UV bit of the authenticator data's flags

pytestmark = pytest.mark.fidosim(transport="private", uv="fingerprint", presence="prompt",
                                 args=["--enrolled-fingers", "1"])
expect.set_options(timeout=WAIT_S * 1000)


@pytest.fixture
def page(fidosim_key: Key, relying_party: str, chromium_log_args: list[str]) -> Iterator[Page]:
    """Headless Chromium on the site's page, its one security key the test's key (which is up before it starts)."""
    with sync_playwright() as playwright:
        # Chromium's sandbox cannot run as root: only there it goes without.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, env=fidosim_key.subprocess_env(),
                                             chromium_sandbox=os.geteuid() != 0,
                                             args=[NETWORK_IN_PROCESS, *chromium_log_args])
        page = browser.new_page()
        page.set_default_timeout(WAIT_S * 1000)
        page.goto(relying_party)
        yield page
        browser.close()


def verdict(page: Page, text: str) -> dict:
    """The site's verdict, once the page shows one with `text` in it."""
    out = page.locator("#out")
    expect(out).to_contain_text(text)
    return json.loads(out.text_content())


def test_a_passkey_registers_and_signs_in_with_a_touch_each(page: Page, fidosim_key: Key):
    key = fidosim_key
    events = key.events  # subscribed from here on

    with page.expect_request("**/register/complete") as sent:
        page.get_by_role("button", name="Register").click()
        prompt = events.wait_for("prompt", timeout=WAIT_S)  # Chromium asks the key for a finger
        assert prompt["rpId"] == "localhost" and prompt["gesture"] == "fingerprint"
        assert key.control.touch()["answered"]
    credential_id = unb64url(sent.value.post_data_json["rawId"])  # what the browser handed the site
    registered = verdict(page, '"registered": true')
    assert registered["credentialId"] == credential_id.hex() and registered["flags"] & USER_VERIFIED

    [stored] = key.control.get_credentials()
    assert stored["rpId"] == "localhost" and stored["credentialId"] == credential_id
    assert stored["isResidentCredential"] and stored["userName"] == "alice@example.com"

    with page.expect_request("**/authenticate/complete") as sent:
        page.get_by_role("button", name="Sign in").click()
        events.wait_for("prompt", timeout=WAIT_S, rpId="localhost")
        assert key.control.touch()["answered"]
    assert unb64url(sent.value.post_data_json["rawId"]) == credential_id
    signed_in = verdict(page, '"authenticated": true')
    used = events.wait_for("request", timeout=WAIT_S, command="getAssertion")
    assert used["status"] == "ok" and used["credentialId"] == b64url(credential_id)

    [after] = key.control.get_credentials()
    assert signed_in["signCount"] == after["signCount"] > stored["signCount"]


def test_a_refused_finger_is_asked_for_again(page: Page, fidosim_key: Key):
    """refuse() is the person saying no; on the sensor that is a finger that does not match. The key answers
    UV_INVALID, Chromium asks for the finger again, and a touch then registers."""
    key = fidosim_key
    events = key.events
    page.get_by_role("button", name="Register").click()
    events.wait_for("prompt", timeout=WAIT_S)
    assert key.control.refuse()["answered"]
    events.wait_for("request", timeout=WAIT_S, command="clientPIN", status="uvInvalid")
    assert key.control.get_credentials() == []

    events.wait_for("prompt", timeout=WAIT_S)
    assert key.control.touch()["answered"]
    registered = verdict(page, '"registered": true')
    assert [c["credentialId"].hex() for c in key.control.get_credentials()] == [registered["credentialId"]]


def test_user_verification_is_the_test_s_to_decide(page: Page, fidosim_key: Key):
    """presence("approve") lets the key answer by itself; set_user_verified(False) makes the next finger fail to
    match however it is touched, and True makes it match."""
    key = fidosim_key
    key.control.presence("approve")
    page.get_by_role("button", name="Register").click()
    registered = verdict(page, '"registered": true')

    key.control.presence("prompt")
    key.control.set_user_verified(False)
    events = key.events
    page.get_by_role("button", name="Sign in").click()
    events.wait_for("prompt", timeout=WAIT_S)
    assert key.control.touch()["answered"]
    events.wait_for("request", timeout=WAIT_S, command="clientPIN", status="uvInvalid")

    events.wait_for("prompt", timeout=WAIT_S)  # Chromium asks again
    key.control.set_user_verified(True)
    assert key.control.touch()["answered"]
    signed_in = verdict(page, '"authenticated": true')
    assert signed_in["credentialId"] == registered["credentialId"] and signed_in["flags"] & USER_VERIFIED
