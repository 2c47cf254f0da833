import os

from fido2.ctap2 import Ctap2


def test_the_key_makes_a_passkey_and_the_control_socket_sees_it(fidosim_key):
    ctap = Ctap2(fidosim_key.device())
    ctap.make_credential(os.urandom(32), {"id": "example.com", "name": "Example"}, {"id": b"user-1", "name": "alice"},
                         [{"type": "public-key", "alg": -7}], options={"rk": True})
    [passkey] = fidosim_key.control.get_credentials()
    assert (passkey["rpId"], passkey["userHandle"]) == ("example.com", b"user-1")
