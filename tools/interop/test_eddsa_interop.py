"""EdDSA (Ed25519) credentials: raw CTAP signatures verified with `cryptography`, and Fido2Server with a PIN.

Everything on the client side comes from python-fido2 2.x and `cryptography`, not from the device.

Run:  FIDOSIM_BIN=.build/debug/fidosim python3 -m pytest -p no:cacheprovider -q tools/interop/test_eddsa_interop.py
"""

from __future__ import annotations

import os

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from fido2.attestation import AttestationType, PackedAttestation
from fido2.cose import EdDSA
from fido2.ctap2 import Ctap2
from fido2.ctap2.pin import ClientPin
from fido2.webauthn import AuthenticatorData

from fidosim.testing import (
    EDDSA_PARAMS,
    ERR,
    ES256_PARAMS,
    PIN,
    RP,
    RP_ID,
    authenticate,
    descriptor,
    expect_ctap_error,
    make_client,
    make_server,
    new_cdh,
    register,
    sha256,
    user,
    web_user,
)

# No 200 ms wait for each simulated touch: keeps the file fast. Tests with their own sim_args repeat it.
pytestmark = pytest.mark.sim_args("--presence-delay", "0")

# --------------------------------------------------------------------------
# 5. EdDSA
# --------------------------------------------------------------------------


@pytest.mark.sim_args("--presence-delay", "0", "--profile",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles", "self-attestation.json"))
def test_eddsa_raw_verified_with_cryptography(sim):
    """With self attestation (a profile's choice), the attestation is signed by the new Ed25519 key itself."""
    ctap2 = Ctap2(sim.device())
    cdh = new_cdh()
    att = ctap2.make_credential(cdh, RP, user("ed"), EDDSA_PARAMS, options={"rk": True})
    cred = att.auth_data.credential_data
    pk = cred.public_key
    assert isinstance(pk, EdDSA)
    assert pk[1] == 1 and pk[3] == -8 and pk[-1] == 6 and len(pk[-2]) == 32  # OKP, EdDSA, Ed25519
    assert set(pk) == {1, 3, -1, -2}
    ed = Ed25519PublicKey.from_public_bytes(pk[-2])

    assert att.fmt == "packed"
    assert att.att_stmt["alg"] == -8 and "x5c" not in att.att_stmt
    sig = att.att_stmt["sig"]
    assert len(sig) == 64
    ed.verify(sig, bytes(att.auth_data) + cdh)  # raises InvalidSignature if wrong
    with pytest.raises(InvalidSignature):
        ed.verify(sig, bytes(att.auth_data) + new_cdh())
    assert PackedAttestation().verify(att.att_stmt, att.auth_data, cdh).attestation_type == AttestationType.SELF

    for allow in ([descriptor(cred.credential_id)], None):
        cdh = new_cdh()
        a = ctap2.get_assertion(RP_ID, cdh, allow)
        assert len(a.signature) == 64
        ed.verify(a.signature, bytes(a.auth_data) + cdh)
        with pytest.raises(InvalidSignature):
            ed.verify(a.signature, bytes(a.auth_data) + sha256(cdh))

    # The first supported algorithm in the RP's order is chosen.
    att = ctap2.make_credential(new_cdh(), RP, user("a"), EDDSA_PARAMS + ES256_PARAMS)
    assert att.auth_data.credential_data.public_key[3] == -8 and att.att_stmt["alg"] == -8
    att = ctap2.make_credential(new_cdh(), RP, user("b"), ES256_PARAMS + EDDSA_PARAMS)
    assert att.auth_data.credential_data.public_key[3] == -7 and att.att_stmt["alg"] == -7
    att = ctap2.make_credential(new_cdh(), RP, user("c"), [{"type": "public-key", "alg": -1000}] + EDDSA_PARAMS)
    assert att.auth_data.credential_data.public_key[3] == -8
    expect_ctap_error(ERR.UNSUPPORTED_ALGORITHM, ctap2.make_credential, new_cdh(), RP, user("d"),
                      [{"type": "public-key", "alg": -1000}])


def test_eddsa_with_fido2_server_and_pin(sim):
    dev = sim.device()
    ClientPin(Ctap2(dev)).set_pin(PIN)
    server, (client, _ui) = make_server(algs=[-8]), make_client(dev)
    usr = web_user("eddsa")
    result, auth_data = register(server, client, usr)
    cred = auth_data.credential_data
    assert isinstance(cred.public_key, EdDSA)
    assert result.response.attestation_object.att_stmt["alg"] == -7  # signed by fidosim's shared batch (ES256)
    assert auth_data.is_user_verified()

    _, response = authenticate(server, client, [cred], allow=False)
    assert response.response.user_handle == usr.id
    ad = response.response.authenticator_data
    assert ad.is_user_verified()
    Ed25519PublicKey.from_public_bytes(cred.public_key[-2]).verify(
        response.response.signature, bytes(ad) + response.response.client_data.hash)
    assert ad.flags & AuthenticatorData.FLAG.UP
