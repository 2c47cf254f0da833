"""CTAP 2.1 extensions: credProtect, hmac-secret and PRF, credBlob, largeBlobKey and minPinLength, checked with
python-fido2's own code.

Everything on the client side comes from python-fido2 2.x and `cryptography`, not from the device.

Run:  FIDOSIM_BIN=.build/debug/fidosim python3 -m pytest -p no:cacheprovider -q \\
          tools/interop/test_extensions_interop.py
"""

from __future__ import annotations

import pytest
from fido2.ctap2 import Ctap2
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.extensions import HmacSecretExtension, _prf_salt
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.webauthn import ResidentKeyRequirement, UserVerificationRequirement

from fidosim.testing import (
    ERR,
    ES256_PARAMS,
    OTHER_RP,
    PERM,
    PIN,
    RP,
    RP_ID,
    authenticate,
    descriptor,
    expect_ctap_error,
    get_assertion_uv,
    make_client,
    make_cred_uv,
    make_server,
    new_cdh,
    register,
    token,
    user,
    web_user,
)

# No 200 ms wait for each simulated touch: keeps the file fast. Tests with their own sim_args repeat it.
pytestmark = pytest.mark.sim_args("--presence-delay", "0")

def hmac_secret_input(ctap2: Ctap2, protocol, salts: list[bytes]):
    """The hmac-secret getAssertion input, built with python-fido2's key agreement; returns (ext, shared)."""
    cp = ClientPin(ctap2, protocol)
    key_agreement, shared = cp._get_shared_secret()
    salt_enc = protocol.encrypt(shared, b"".join(salts))
    ext = {
        "hmac-secret": {
            1: key_agreement,
            2: salt_enc,
            3: protocol.authenticate(shared, salt_enc),
            4: protocol.VERSION,
        }
    }
    return ext, shared


# --------------------------------------------------------------------------
# 4. Extensions
# --------------------------------------------------------------------------


def test_cred_protect(sim):
    dev = sim.device()
    ctap2 = Ctap2(dev)
    ClientPin(ctap2).set_pin(PIN)
    server, (client, _ui) = make_server(), make_client(dev)
    u3, u2, u1 = web_user("level3"), web_user("level2"), web_user("level1")

    r3, ad3 = register(server, client, u3, extensions={
        "credentialProtectionPolicy": "userVerificationRequired",
        "enforceCredentialProtectionPolicy": True,
    })
    assert ad3.extensions == {"credProtect": 3}
    r2, ad2 = register(server, client, u2, extensions={
        "credentialProtectionPolicy": "userVerificationOptionalWithCredentialIDList",
    })
    assert ad2.extensions == {"credProtect": 2}
    _, ad1 = register(server, client, u1)
    c3, c2, c1 = ad3.credential_data, ad2.credential_data, ad1.credential_data

    # Without UV and without an allow list only the level-1 credential is found.
    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh)
    assert a.credential["id"] == c1.credential_id
    assert a.number_of_credentials in (None, 1)
    a.verify(cdh, c1.public_key)

    # Level 3 without UV: nothing, even by id. Level 2 by id: found.
    expect_ctap_error(ERR.NO_CREDENTIALS, ctap2.get_assertion, RP_ID, new_cdh(), [descriptor(c3.credential_id)])
    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh, [descriptor(c2.credential_id)])
    assert not a.auth_data.is_user_verified()
    a.verify(cdh, c2.public_key)

    # Only level-2/3 credentials: an empty allow list without UV finds nothing.
    ctap2_cm = CredentialManagement(ctap2, *token(ctap2, PERM.CREDENTIAL_MGMT, None))
    ctap2_cm.delete_cred(descriptor(c1.credential_id))
    expect_ctap_error(ERR.NO_CREDENTIALS, ctap2.get_assertion, RP_ID, new_cdh())

    # A non-discoverable credential keeps its protection level too.
    att = ctap2.make_credential(new_cdh(), RP, user("nrk3"), ES256_PARAMS, extensions={"credProtect": 3},
                                options={"rk": False})
    assert att.auth_data.extensions == {"credProtect": 3}
    nrk3 = att.auth_data.credential_data
    expect_ctap_error(ERR.NO_CREDENTIALS, ctap2.get_assertion, RP_ID, new_cdh(), [descriptor(nrk3.credential_id)])
    cdh = new_cdh()
    a = get_assertion_uv(ctap2, allow=[descriptor(nrk3.credential_id)], cdh=cdh)
    assert a.auth_data.is_user_verified()
    a.verify(cdh, nrk3.public_key)

    # With the PIN (Fido2Client, UV required) all are there.
    selection, response = authenticate(server, client, [c3, c2], allow=False)
    assert {a.credential["id"] for a in selection.get_assertions()} == {c3.credential_id, c2.credential_id}
    assert response.response.authenticator_data.is_user_verified()
    _, response = authenticate(server, client, [c3], allow=True)
    assert response.raw_id == c3.credential_id
    # And level 3 with UV, raw.
    cdh = new_cdh()
    a = get_assertion_uv(ctap2, allow=[descriptor(c3.credential_id)], cdh=cdh)
    a.verify(cdh, c3.public_key)


def test_hmac_secret_and_prf(sim):
    dev = sim.device()
    ctap2 = Ctap2(dev)
    ClientPin(ctap2).set_pin(PIN)
    server, (client, ui) = make_server(), make_client(
        dev, extensions=[HmacSecretExtension(allow_hmac_secret=True)])
    usr = web_user("prf")
    result, auth_data = register(server, client, usr, rk=ResidentKeyRequirement.DISCOURAGED,
                                 uv=UserVerificationRequirement.DISCOURAGED, extensions={"prf": {}})
    assert ui.requests == []  # makeCredUvNotRqd: no PIN asked for a non-discoverable credential
    assert result.client_extension_results.prf.enabled is True
    assert auth_data.extensions == {"hmac-secret": True}
    assert not auth_data.is_user_verified()
    cred = auth_data.credential_data

    first, second = b"first salt input", b"second salt input"

    def prf(uv, values):
        _, response = authenticate(server, client, [cred], uv=uv, extensions={"prf": {"eval": values}})
        assert response.response.authenticator_data.is_user_verified() == (
            uv == UserVerificationRequirement.REQUIRED)
        assert set(response.response.authenticator_data.extensions) == {"hmac-secret"}
        return response.client_extension_results.prf.results

    no_uv = UserVerificationRequirement.DISCOURAGED
    uv = UserVerificationRequirement.REQUIRED
    r1 = prf(no_uv, {"first": first, "second": second})
    assert len(r1.first) == 32 and len(r1.second) == 32
    assert r1.first != r1.second
    r2 = prf(no_uv, {"first": first, "second": second})
    assert (r2.first, r2.second) == (r1.first, r1.second)  # stable
    swapped = prf(no_uv, {"first": second})
    assert swapped.first == r1.second and not swapped.second
    other = prf(no_uv, {"first": b"a third salt"})
    assert other.first not in (r1.first, r1.second)

    ui.requests.clear()
    v1 = prf(uv, {"first": first, "second": second})
    assert ui.requests, "UV required should have asked for the PIN"
    assert v1.first != r1.first and v1.second != r1.second  # CredRandomWithUV differs
    v2 = prf(uv, {"first": first})
    assert v2.first == v1.first

    # Raw hmac-secret at the Ctap2 level, with either PIN protocol: the same secrets (the salt is the
    # WebAuthn PRF salt SHA-256("WebAuthn PRF" || 0x00 || input), computed by python-fido2).
    salt1, salt2 = _prf_salt(first), _prf_salt(second)
    for protocol in (PinProtocolV1(), PinProtocolV2()):
        ext, shared = hmac_secret_input(ctap2, protocol, [salt1, salt2])
        cdh = new_cdh()
        a = ctap2.get_assertion(RP_ID, cdh, [descriptor(cred.credential_id)], extensions=ext)
        a.verify(cdh, cred.public_key)
        assert not a.auth_data.is_user_verified()
        enc = a.auth_data.extensions["hmac-secret"]
        assert len(enc) == 64 + (16 if protocol.VERSION == 2 else 0)
        out = protocol.decrypt(shared, enc)
        assert (out[:32], out[32:]) == (r1.first, r1.second), f"protocol {protocol.VERSION}"

        # With a token (UV): the UV secrets. The token is fetched first, then the hmac key agreement.
        proto, tok = token(ctap2, PERM.GET_ASSERTION, RP_ID, protocol)
        ext, shared = hmac_secret_input(ctap2, protocol, [salt1])
        cdh = new_cdh()
        a = ctap2.get_assertion(RP_ID, cdh, [descriptor(cred.credential_id)], extensions=ext,
                                pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=proto.VERSION)
        assert a.auth_data.is_user_verified()
        enc = a.auth_data.extensions["hmac-secret"]
        assert len(enc) == 32 + (16 if protocol.VERSION == 2 else 0)
        assert protocol.decrypt(shared, enc) == v1.first, f"protocol {protocol.VERSION}"

    # A saltAuth that does not verify is refused: verify() fails -> CTAP2_ERR_PIN_AUTH_INVALID.
    ext, shared = hmac_secret_input(ctap2, PinProtocolV2(), [salt1])
    ext["hmac-secret"][3] = bytes(b ^ 0xFF for b in ext["hmac-secret"][3])
    expect_ctap_error(ERR.PIN_AUTH_INVALID, ctap2.get_assertion, RP_ID, new_cdh(),
                      [descriptor(cred.credential_id)], extensions=ext)

    # A credential made without hmac-secret has no secret to give.
    plain = ctap2.make_credential(new_cdh(), RP, user("plain"), ES256_PARAMS).auth_data.credential_data
    ext, _ = hmac_secret_input(ctap2, PinProtocolV2(), [salt1])
    a = ctap2.get_assertion(RP_ID, new_cdh(), [descriptor(plain.credential_id)], extensions=ext)
    assert not (a.auth_data.extensions or {}).get("hmac-secret")


def test_cred_blob(sim):
    dev = sim.device()
    ctap2 = Ctap2(dev)
    server, (client, _ui) = make_server(), make_client(dev, pin=None)
    blob = b"credBlob: 32 bytes of RP data!!!"
    assert len(blob) == 32
    usr = web_user("blob")
    result, auth_data = register(server, client, usr, uv=UserVerificationRequirement.DISCOURAGED,
                                 extensions={"credBlob": blob})
    assert auth_data.extensions == {"credBlob": True}
    cred = auth_data.credential_data

    _, response = authenticate(server, client, [cred], allow=False, uv=UserVerificationRequirement.DISCOURAGED,
                               extensions={"getCredBlob": True})
    assert response.raw_id == cred.credential_id
    assert response.response.authenticator_data.extensions == {"credBlob": blob}
    _, response = authenticate(server, client, [cred], uv=UserVerificationRequirement.DISCOURAGED)
    assert not response.response.authenticator_data.extensions  # not asked for: not returned

    # Raw: too long (33 bytes) -> false, credential still made; non-discoverable -> false here.
    att = ctap2.make_credential(new_cdh(), RP, user("long"), ES256_PARAMS,
                                extensions={"credBlob": blob + b"!"}, options={"rk": True})
    assert att.auth_data.extensions == {"credBlob": False}
    long_cred = att.auth_data.credential_data
    a = ctap2.get_assertion(RP_ID, new_cdh(), [descriptor(long_cred.credential_id)],
                            extensions={"credBlob": True})
    assert a.auth_data.extensions == {"credBlob": b""}  # nothing stored: empty byte string
    att = ctap2.make_credential(new_cdh(), RP, user("nrk"), ES256_PARAMS,
                                extensions={"credBlob": b"x"}, options={"rk": False})
    assert att.auth_data.extensions == {"credBlob": False}


def test_large_blob_key(sim):
    ctap2 = Ctap2(sim.device())
    att = ctap2.make_credential(new_cdh(), RP, user("lbk"), ES256_PARAMS,
                                extensions={"largeBlobKey": True}, options={"rk": True})
    key = att.large_blob_key
    assert isinstance(key, bytes) and len(key) == 32
    assert "largeBlobKey" not in (att.auth_data.extensions or {})  # unsigned, response member 0x05
    cred = att.auth_data.credential_data

    att2 = ctap2.make_credential(new_cdh(), RP, user("lbk2"), ES256_PARAMS,
                                 extensions={"largeBlobKey": True}, options={"rk": True})
    assert len(att2.large_blob_key) == 32 and att2.large_blob_key != key
    # Not requested: not returned.
    att3 = ctap2.make_credential(new_cdh(), RP, user("nolbk"), ES256_PARAMS, options={"rk": True})
    assert att3.large_blob_key is None

    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh, [descriptor(cred.credential_id)], extensions={"largeBlobKey": True})
    assert a.large_blob_key == key
    a.verify(cdh, cred.public_key)
    a = ctap2.get_assertion(RP_ID, new_cdh(), [descriptor(cred.credential_id)])
    assert a.large_blob_key is None
    a = ctap2.get_assertion(RP_ID, new_cdh(), [descriptor(att3.auth_data.credential_data.credential_id)],
                            extensions={"largeBlobKey": True})
    assert a.large_blob_key is None  # this credential has none
    # Discoverable enumeration: each assertion carries its own key.
    assertions = ctap2.get_assertions(RP_ID, new_cdh(), extensions={"largeBlobKey": True})
    keys = {a.credential["id"]: a.large_blob_key for a in assertions}
    assert keys[cred.credential_id] == key
    assert keys[att2.auth_data.credential_data.credential_id] == att2.large_blob_key

    # largeBlobKey false, or on a non-discoverable credential: CTAP2_ERR_INVALID_OPTION.
    expect_ctap_error(ERR.INVALID_OPTION, ctap2.make_credential, new_cdh(), RP, user("x"), ES256_PARAMS,
                      extensions={"largeBlobKey": False}, options={"rk": True})
    expect_ctap_error(ERR.INVALID_OPTION, ctap2.make_credential, new_cdh(), RP, user("y"), ES256_PARAMS,
                      extensions={"largeBlobKey": True}, options={"rk": False})

    # minPinLength for an RP the device was not configured to tell: no output.
    att = ctap2.make_credential(new_cdh(), RP, user("mpl"), ES256_PARAMS, extensions={"minPinLength": True})
    assert "minPinLength" not in (att.auth_data.extensions or {})


@pytest.mark.sim_args("--presence-delay", "0", "--min-pin-length-rp", "example.com")
def test_min_pin_length_extension(sim):
    ctap2 = Ctap2(sim.device())
    att = ctap2.make_credential(new_cdh(), RP, user("mpl"), ES256_PARAMS, extensions={"minPinLength": True})
    assert att.auth_data.extensions == {"minPinLength": 4}
    # Not asked for: not returned. An RP that is not listed: not returned.
    att = ctap2.make_credential(new_cdh(), RP, user("mpl2"), ES256_PARAMS)
    assert not att.auth_data.extensions
    att = ctap2.make_credential(new_cdh(), OTHER_RP, user("mpl3"), ES256_PARAMS, extensions={"minPinLength": True})
    assert "minPinLength" not in (att.auth_data.extensions or {})
    # With a PIN set (and a token), the same answer.
    ClientPin(ctap2).set_pin(PIN)
    att = make_cred_uv(ctap2, user("mpl4"), extensions={"minPinLength": True})
    assert att.auth_data.extensions == {"minPinLength": 4}
