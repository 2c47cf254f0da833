"""A browser-test rig in miniature: load a known credential, let a client ask for it, wait for the prompt the
person would see, touch, and check the events. The client here is python-fido2 over UDP; with
`@pytest.mark.fidosim(transport="uhid")` a browser or libfido2 on the same machine would be the client instead,
and the control side stays the same."""

import os
import threading

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from fido2.ctap2 import Ctap2


@pytest.mark.fidosim(presence="prompt")
def test_a_known_credential_signs_in_after_a_touch(fidosim_key):
    private = ec.generate_private_key(ec.SECP256R1())
    pkcs8 = private.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
    fidosim_key.control.add_credential(b"fixture-credential-0001", "example.com", pkcs8, resident=True,
                                       user_handle=b"user-42", user_name="fixture-user")
    events = fidosim_key.events  # subscribed from here on
    client_data_hash = os.urandom(32)
    result = {}
    ctap = Ctap2(fidosim_key.device())
    thread = threading.Thread(target=lambda: result.update(
        assertion=ctap.get_assertion("example.com", client_data_hash)))
    thread.start()
    prompt = events.wait_for("prompt", command="getAssertion", rpId="example.com")
    assert prompt["gesture"] == "touch"
    assert fidosim_key.control.touch()["answered"]
    thread.join(10)
    assert events.wait_for("request", command="getAssertion")["status"] == "ok"

    assertion = result["assertion"]
    assert assertion.credential["id"] == b"fixture-credential-0001" and assertion.user["id"] == b"user-42"
    private.public_key().verify(assertion.signature, bytes(assertion.auth_data) + client_data_hash,
                                ec.ECDSA(hashes.SHA256()))
