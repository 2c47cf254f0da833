"""The same fixture with a kernel uhid key: python-fido2 reaches it through /dev/hidrawN, as a browser would.
Runs where /dev/uhid is writable (the VM run of make test); skipped elsewhere."""

import os
import threading

import pytest
from fido2.ctap2 import Ctap2

pytestmark = pytest.mark.skipif(not os.access("/dev/uhid", os.W_OK), reason="needs a writable /dev/uhid")


@pytest.mark.fidosim(transport="uhid", presence="prompt")
def test_a_uhid_key_waits_for_the_touch_the_test_gives(fidosim_key):
    dev = fidosim_key.device()
    assert dev.descriptor.serial_number == fidosim_key.serial
    events = fidosim_key.events
    made = {}
    thread = threading.Thread(target=lambda: made.update(credential=Ctap2(dev).make_credential(
        os.urandom(32), {"id": "example.com", "name": "Example"}, {"id": b"u1", "name": "alice"},
        [{"type": "public-key", "alg": -7}], options={"rk": True})))
    thread.start()
    assert events.wait_for("prompt", timeout=30, command="makeCredential")["rpId"] == "example.com"
    assert fidosim_key.control.touch()["answered"]
    thread.join(30)
    assert made["credential"].auth_data.credential_data is not None
    [stored] = fidosim_key.control.get_credentials()
    assert stored["userHandle"] == b"u1"
