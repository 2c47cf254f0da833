"""WebAuthn Level 3's backup flags and Chromium's response overrides, checked from outside with python-fido2.

BE (backup eligible) and BS (backed up) as Fido2Server's AuthenticatorData reads them: the key's defaults
(`--backup-eligible`, `--backup-state`), WebDriver's Set Credential Properties through the control socket, the
credential parameters of addCredential and getCredentials; and the response overrides (a zero signature, UP or UV
cleared) that a relying party must refuse.

Run:  FIDOSIM_BIN=.build/debug/fidosim python3 -m pytest -p no:cacheprovider -q \\
          tools/interop/test_backup_flags_interop.py
"""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from fido2.ctap2 import Ctap2
from fido2.ctap2.pin import ClientPin
from fido2.webauthn import AuthenticatorData, ResidentKeyRequirement, UserVerificationRequirement

from fidosim.control import ControlError
from fidosim.testing import (
    PIN,
    RP,
    RP_ID,
    authenticate,
    descriptor,
    make_client,
    make_server,
    new_cdh,
    register,
    user,
    web_user,
)

pytestmark = pytest.mark.sim_args("--presence-delay", "0")
DISCOURAGED = UserVerificationRequirement.DISCOURAGED


def flags_of(sim, cred_id):
    got = Ctap2(sim.device()).get_assertion(RP_ID, new_cdh(), [descriptor(cred_id)])
    return got.auth_data.is_backup_eligible(), got.auth_data.is_backed_up()


def test_a_key_without_backup_sets_neither_flag(sim):
    att = Ctap2(sim.device()).make_credential(new_cdh(), RP, user("a"), [{"type": "public-key", "alg": -7}])
    assert not att.auth_data.is_backup_eligible() and not att.auth_data.is_backed_up()


@pytest.mark.sim_args("--presence-delay", "0", "--backup-eligible", "on")
def test_fido2server_sees_eligibility_and_the_state_the_control_plane_sets(sim):
    server = make_server([-7])
    client, _ = make_client(sim.device(), pin=None)
    _, auth_data = register(server, client, web_user("b"), rk=ResidentKeyRequirement.DISCOURAGED, uv=DISCOURAGED)
    assert auth_data.is_backup_eligible() and not auth_data.is_backed_up()
    cred = auth_data.credential_data
    with sim.control() as ctl:
        ctl.request("setCredentialProperties", credentialId=ctl_b64(cred.credential_id), backupState=True)
        _, response = authenticate(server, client, [cred], uv=DISCOURAGED)
        data = AuthenticatorData(response.response.authenticator_data)
        assert data.is_backup_eligible() and data.is_backed_up()
        (listed,) = ctl.get_credentials()
        assert listed["backupEligibility"] is True and listed["backupState"] is True
        with pytest.raises(ControlError) as refused:
            ctl.request("setCredentialProperties", credentialId=ctl_b64(cred.credential_id), backupEligibility=False)
        assert refused.value.code == "invalid-params"
        with pytest.raises(ControlError) as missing:
            ctl.request("setCredentialProperties", credentialId=ctl_b64(b"nope"), backupState=True)
        assert missing.value.code == "not-found"
        ctl.request("setCredentialProperties", credentialId=ctl_b64(cred.credential_id), backupState=False)
    assert flags_of(sim, cred.credential_id) == (True, False)


def test_a_credentials_sign_count_removed_and_raised(sim):
    """Chromium's signCount in Set Credential Properties: -1 removes a credential's counter (python-fido2 reads 0
    in its assertions, the other credentials count on), a number raises the key's one counter, and a lower one is
    refused."""
    ctap2 = Ctap2(sim.device())
    es256 = [{"type": "public-key", "alg": -7}]
    quiet = ctap2.make_credential(new_cdh(), RP, user("quiet"), es256).auth_data.credential_data.credential_id
    loud = ctap2.make_credential(new_cdh(), RP, user("loud"), es256).auth_data.credential_data.credential_id

    def counter(cred_id):
        return ctap2.get_assertion(RP_ID, new_cdh(), [descriptor(cred_id)]).auth_data.counter

    with sim.control() as ctl:
        ctl.set_credential_properties(quiet, sign_count=-1)
        before = counter(loud)
        assert [counter(quiet), counter(quiet)] == [0, 0]
        assert counter(loud) == before + 1
        assert {c["credentialId"]: c["signCount"] for c in ctl.get_credentials()}[quiet] == 0
        ctl.set_credential_properties(quiet, sign_count=1000)
        assert counter(quiet) == 1001 and counter(loud) == 1002
        with pytest.raises(ControlError) as lower:
            ctl.set_credential_properties(loud, sign_count=5)
        assert lower.value.code == "invalid-params" and "never goes back" in str(lower.value)
        with pytest.raises(ControlError) as below:
            ctl.request("setCredentialProperties", credentialId=ctl_b64(loud), signCount=-2)
        assert below.value.code == "invalid-params"
    assert counter(loud) == 1003


@pytest.mark.sim_args("--presence-delay", "0", "--backup-eligible", "on", "--backup-state", "on")
def test_the_key_default_makes_discoverable_credentials_backed_up(sim):
    ctap2 = Ctap2(sim.device())
    att = ctap2.make_credential(new_cdh(), RP, user("c"), [{"type": "public-key", "alg": -7}], options={"rk": True})
    assert att.auth_data.is_backup_eligible() and att.auth_data.is_backed_up()
    sim.power_cycle()
    assert flags_of(sim, att.auth_data.credential_data.credential_id) == (True, True)


def test_add_credential_carries_the_flags(sim):
    key = ec.generate_private_key(ec.SECP256R1())
    pkcs8 = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    with sim.control() as ctl:
        ctl.request("addCredential", credentialId=ctl_b64(b"backed-up"), isResidentCredential=False, rpId=RP_ID,
                    privateKey=ctl_b64(pkcs8), backupEligibility=True, backupState=True)
        with pytest.raises(ControlError):
            ctl.request("addCredential", credentialId=ctl_b64(b"bad"), isResidentCredential=False, rpId=RP_ID,
                        privateKey=ctl_b64(pkcs8), backupEligibility=False, backupState=True)
    assert flags_of(sim, b"backed-up") == (True, True)


def ctl_b64(data: bytes) -> str:
    from fidosim.control import b64url

    return b64url(data)


@pytest.mark.parametrize("bits,error", [
    ({"isBogusSignature": True}, "Invalid signature"),
    ({"isBadUP": True}, "User Present flag not set"),
    ({"isBadUV": True}, "user verified flag not set"),
])
def test_a_relying_party_refuses_overridden_responses(sim, bits, error):
    dev = sim.device()
    ClientPin(Ctap2(dev)).set_pin(PIN)
    server = make_server([-7], attestation="none")
    client, _ = make_client(dev)
    _, auth_data = register(server, client, web_user("o"))
    creds = [auth_data.credential_data]
    with sim.control() as ctl:
        ctl.inject_fault("responseOverride", count=1, **bits)
        with pytest.raises(Exception) as refused:
            authenticate(server, client, creds)
        assert refused.type is ValueError and error.lower() in str(refused.value).lower()
        authenticate(server, client, creds)  # the next answer is right again
        ctl.inject_fault("responseOverride", isBogusSignature=True)  # until cleared
        for _ in range(2):
            with pytest.raises(ValueError, match="Invalid signature"):
                authenticate(server, client, creds)
        assert ctl.status()["faults"]["responseOverride"]["remaining"] is None
        ctl.clear_faults()
        authenticate(server, client, creds)
