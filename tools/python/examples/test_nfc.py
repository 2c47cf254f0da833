"""The same fixture with a key that is a card in a PC/SC reader (NFC): python-fido2 reaches it through pcscd, as an
NFC client would. The plugin starts a pcscd of the session's own (fidosim_pcsc); without pcscd, pyscard or
vsmartcard-vpcd the test is skipped, saying why."""

import os
import threading

import pytest
from fido2.ctap2 import Ctap2

pytest.importorskip("smartcard", reason="python-fido2's PC/SC device needs pyscard")


@pytest.mark.fidosim(transport="pcsc", presence="prompt")
def test_an_nfc_key_in_prompt_mode_waits_for_the_touch(fidosim_key):
    dev = fidosim_key.device()  # python-fido2's CtapPcscDevice
    ctap = Ctap2(dev)
    assert ctap.get_info().transports == ["nfc"]
    events = fidosim_key.events

    # The tap brings the key into the field; it is not consent: in prompt mode the person touches, as over USB.
    # Here the test is the person, through the control plane, once the key asks.
    def person():
        events.wait_for("prompt", command="makeCredential")
        fidosim_key.control.touch()

    touching = threading.Thread(target=person)
    touching.start()
    made = ctap.make_credential(
        os.urandom(32), {"id": "example.com", "name": "Example"}, {"id": b"u1", "name": "alice"},
        [{"type": "public-key", "alg": -7}], options={"rk": True})
    touching.join(10)
    assert made.auth_data.credential_data is not None
    [stored] = fidosim_key.control.get_credentials()
    assert stored["userHandle"] == b"u1"
