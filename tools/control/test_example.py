"""An example test rig: a pytest fixture that starts `fidosim serve`, then a test that loads a known credential
into the key and waits for the events of the request that uses it.

Copy this file into a project's tests; set FIDOSIM_BIN to the binary. The client here is python-fido2 over UDP
(`tools/interop/udp_device.py`); with `--transport uhid` a browser or libfido2 would be the client instead, and
the control side stays the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "interop")]

from fidosim_control import FidosimControl  # noqa: E402

BINARY = os.environ.get("FIDOSIM_BIN", str(HERE.parents[1] / ".build" / "debug" / "fidosim"))


@pytest.fixture
def key():
    """A virtual key on a free UDP port with its control socket; yields (control connection, UDP port)."""
    directory = tempfile.mkdtemp(prefix="fidosim-example-")
    socket_path = os.path.join(directory, "key.sock")
    process = subprocess.Popen(
        [BINARY, "serve", "--transport", "udp", "--port", "0", "--flash", "memory", "--control", socket_path],
        stdout=subprocess.PIPE, text=True,
    )
    port = None
    for line in process.stdout:  # "fidosim: serving a virtual key on udp 127.0.0.1:PORT (...)"
        if "serving a virtual key on udp" in line:
            port = int(line.split("udp 127.0.0.1:")[1].split()[0])
            break
    assert port, "fidosim did not start"
    deadline = time.monotonic() + 10
    while not os.path.exists(socket_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    control = FidosimControl(path=socket_path)
    try:
        yield control, port
    finally:
        control.close()
        process.terminate()
        assert process.wait(10) == 0


def test_a_known_credential_signs_in_and_the_events_say_so(key):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from fido2.ctap2 import Ctap2
    from udp_device import open_udp_device

    control, port = key
    private = ec.generate_private_key(ec.SECP256R1())
    credential_id = b"fixture-credential-0001"
    control.add_credential(
        credential_id, "example.com",
        private.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()),
        resident=True, user_handle=b"user-42", user_name="fixture-user",
    )
    control.subscribe()
    control.presence("prompt")  # nothing is approved until the test touches the key

    client_data_hash = os.urandom(32)
    result = {}
    import threading

    def sign_in():
        result["assertion"] = Ctap2(open_udp_device("127.0.0.1", port)).get_assertion("example.com", client_data_hash)

    thread = threading.Thread(target=sign_in)
    thread.start()
    prompt = control.wait_for_event(lambda e: e["event"] == "prompt")  # "the client has asked the key"
    assert (prompt["command"], prompt["rpId"]) == ("getAssertion", "example.com")
    control.touch()
    thread.join(10)
    done = control.wait_for_event(lambda e: e["event"] == "request" and e["command"] == "getAssertion")
    assert done["status"] == "ok"

    assertion = result["assertion"]
    assert assertion.credential["id"] == credential_id and assertion.user["id"] == b"user-42"
    private.public_key().verify(
        assertion.signature, bytes(assertion.auth_data) + client_data_hash, ec.ECDSA(hashes.SHA256()))
