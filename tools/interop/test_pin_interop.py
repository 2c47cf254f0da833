"""CTAP 2.1 PIN/UV: getInfo, setting and changing the PIN, retries and blocks, tokens and their permissions, reset,
and the WebAuthn client with a PIN, checked with python-fido2's own code.

Everything on the client side comes from python-fido2 2.x and `cryptography`, not from the device.

Run:  FIDOSIM_BIN=.build/debug/fidosim python3 -m pytest -p no:cacheprovider -q \\
          tools/interop/test_pin_interop.py
"""

from __future__ import annotations

import os
import time

import pytest
from fido2.cose import ES256
from fido2.ctap2 import Ctap2
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2

from fidosim.testing import (
    ERR,
    ES256_PARAMS,
    OTHER_RP,
    PERM,
    PIN,
    PROTOCOL_IDS,
    PROTOCOLS,
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
    retries,
    sha256,
    token,
    user,
    web_user,
)

# No 200 ms wait for each simulated touch: keeps the file fast. Tests with their own sim_args repeat it.
pytestmark = pytest.mark.sim_args("--presence-delay", "0")

def pad_pin_bytes(pin: bytes) -> bytes:
    """paddedNewPin: the PIN's UTF-8 bytes, zero-padded to 64 bytes (no client-side policy checks)."""
    assert len(pin) <= 64
    return pin.ljust(64, b"\0")


def raw_set_pin(ctap2: Ctap2, protocol, padded: bytes, *, corrupt_auth=False):
    """setPin (0x03) built by hand from python-fido2's protocol primitives, bypassing its PIN checks."""
    cp = ClientPin(ctap2, protocol)
    key_agreement, shared = cp._get_shared_secret()
    new_pin_enc = protocol.encrypt(shared, padded)
    auth = bytearray(protocol.authenticate(shared, new_pin_enc))
    if corrupt_auth:
        auth[0] ^= 0x01
    return ctap2.client_pin(
        protocol.VERSION, ClientPin.CMD.SET_PIN, key_agreement=key_agreement,
        new_pin_enc=new_pin_enc, pin_uv_param=bytes(auth),
    )


def raw_change_pin(ctap2: Ctap2, protocol, old_pin: str, padded_new: bytes):
    cp = ClientPin(ctap2, protocol)
    key_agreement, shared = cp._get_shared_secret()
    pin_hash_enc = protocol.encrypt(shared, sha256(old_pin.encode())[:16])
    new_pin_enc = protocol.encrypt(shared, padded_new)
    return ctap2.client_pin(
        protocol.VERSION, ClientPin.CMD.CHANGE_PIN, key_agreement=key_agreement,
        pin_hash_enc=pin_hash_enc, new_pin_enc=new_pin_enc,
        pin_uv_param=protocol.authenticate(shared, new_pin_enc + pin_hash_enc),
    )


# --------------------------------------------------------------------------
# 1. getInfo and clientPIN
# --------------------------------------------------------------------------


def test_get_info_advertises_ctap21_pin_features(sim):
    info = Ctap2(sim.device()).get_info()
    assert info.versions == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1", "FIDO_2_3"]
    assert info.pin_uv_protocols == [2, 1]
    assert info.options.get("clientPin") is False  # supported, not set
    assert info.options.get("pinUvAuthToken") is True
    assert info.options.get("credMgmt") is True
    assert info.options.get("credentialMgmtPreview") is True
    assert info.options.get("makeCredUvNotRqd") is True
    assert "uv" not in info.options  # no built-in user verification
    assert {"credProtect", "hmac-secret", "credBlob", "largeBlobKey", "minPinLength"} <= set(info.extensions)
    assert info.max_cred_blob_length == 32
    algs = [a["alg"] for a in info.algorithms]
    assert -7 in algs and -8 in algs
    assert info.min_pin_length == 4


@pytest.mark.parametrize("protocol_cls", PROTOCOLS, ids=PROTOCOL_IDS)
def test_set_change_pin_and_retries(sim, protocol_cls):
    ctap2 = Ctap2(sim.device())
    protocol = protocol_cls()
    cp = ClientPin(ctap2, protocol)

    # getKeyAgreement: an uncompressed P-256 point in COSE form (python-fido2 rejects points off the curve).
    ka = ctap2.client_pin(protocol.VERSION, ClientPin.CMD.GET_KEY_AGREEMENT)[1]
    assert ka[1] == 2 and ka[3] == -25 and ka[-1] == 1
    assert len(ka[-2]) == 32 and len(ka[-3]) == 32
    protocol.encapsulate(ka)

    assert cp.get_pin_retries()[0] == 8
    expect_ctap_error(ERR.PIN_NOT_SET, cp.get_pin_token, PIN, PERM.MAKE_CREDENTIAL, RP_ID)
    expect_ctap_error(ERR.PIN_NOT_SET, cp.change_pin, PIN, "87654321")
    # A zero-length pinUvAuthParam is the "touch to select" probe: PIN_NOT_SET without a PIN.
    expect_ctap_error(
        ERR.PIN_NOT_SET, ctap2.make_credential, new_cdh(), RP, user("probe"), ES256_PARAMS,
        pin_uv_param=b"", pin_uv_protocol=protocol.VERSION,
    )

    # setPin with a bad pinUvAuthParam, or a PIN that breaks the policy, is refused and sets nothing.
    expect_ctap_error(ERR.PIN_AUTH_INVALID, raw_set_pin, ctap2, protocol,
                      pad_pin_bytes(PIN.encode()), corrupt_auth=True)
    expect_ctap_error(ERR.PIN_POLICY_VIOLATION, raw_set_pin, ctap2, protocol, pad_pin_bytes(b"123"))
    # minPINLength counts Unicode code points: 3 two-byte characters (6 bytes) are still too short.
    expect_ctap_error(ERR.PIN_POLICY_VIOLATION, raw_set_pin, ctap2, protocol,
                      pad_pin_bytes("ééé".encode()))
    # 64 bytes without a terminating zero: longer than the 63-byte maximum.
    expect_ctap_error(ERR.PIN_POLICY_VIOLATION, raw_set_pin, ctap2, protocol, pad_pin_bytes(b"7" * 64))
    assert ctap2.get_info().options["clientPin"] is False

    cp.set_pin(PIN)
    assert ctap2.get_info().options["clientPin"] is True
    assert cp.get_pin_retries()[0] == 8
    # setPin once a PIN is set: CTAP2_ERR_PIN_AUTH_INVALID (CTAP 2.1 §6.5.5.5); use changePin instead.
    expect_ctap_error(ERR.PIN_AUTH_INVALID, cp.set_pin, "11112222")

    tok = cp.get_pin_token(PIN, PERM.MAKE_CREDENTIAL | PERM.GET_ASSERTION, RP_ID)
    assert len(tok) == 32
    # The token works for a makeCredential under this protocol (UV flag set).
    cdh = new_cdh()
    att = ctap2.make_credential(cdh, RP, user("alice"), ES256_PARAMS, options={"rk": True},
                                pin_uv_param=protocol.authenticate(tok, cdh),
                                pin_uv_protocol=protocol.VERSION)
    assert att.auth_data.is_user_verified()

    # Wrong PIN: PIN_INVALID, one retry gone; the right PIN restores 8.
    expect_ctap_error(ERR.PIN_INVALID, cp.get_pin_token, "00000000", PERM.MAKE_CREDENTIAL, RP_ID)
    assert cp.get_pin_retries()[0] == 7
    cp.get_pin_token(PIN, PERM.GET_ASSERTION, RP_ID)
    assert cp.get_pin_retries()[0] == 8

    # Legacy getPinToken (0x05, no permissions): mc and ga only, usable for makeCredential, not for cm.
    legacy = cp.get_pin_token(PIN)
    assert len(legacy) == 32
    cdh = new_cdh()
    att = ctap2.make_credential(cdh, RP, user("legacy"), ES256_PARAMS, options={"rk": True},
                                pin_uv_param=protocol.authenticate(legacy, cdh),
                                pin_uv_protocol=protocol.VERSION)
    assert att.auth_data.is_user_verified()
    legacy = cp.get_pin_token(PIN)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, CredentialManagement(ctap2, protocol, legacy).get_metadata)

    # changePin: wrong current PIN refused (and counted); right one changes it.
    expect_ctap_error(ERR.PIN_INVALID, cp.change_pin, "00000000", "87654321")
    assert cp.get_pin_retries()[0] == 7
    expect_ctap_error(ERR.PIN_POLICY_VIOLATION, raw_change_pin, ctap2, protocol, PIN, pad_pin_bytes(b"abc"))
    before_change = cp.get_pin_token(PIN, PERM.MAKE_CREDENTIAL, RP_ID)
    cp.change_pin(PIN, "87654321")
    assert cp.get_pin_retries()[0] == 8
    # changePin ends the token obtained before it.
    cdh = new_cdh()
    expect_ctap_error(ERR.PIN_AUTH_INVALID, ctap2.make_credential, cdh, RP, user("stale"), ES256_PARAMS,
                      options={"rk": True}, pin_uv_param=protocol.authenticate(before_change, cdh),
                      pin_uv_protocol=protocol.VERSION)
    expect_ctap_error(ERR.PIN_INVALID, cp.get_pin_token, PIN, PERM.GET_ASSERTION, RP_ID)
    assert len(cp.get_pin_token("87654321", PERM.GET_ASSERTION, RP_ID)) == 32

    # A 4-code-point PIN of 2-byte characters meets the minimum.
    raw_change_pin(ctap2, protocol, "87654321", pad_pin_bytes("éééé".encode()))
    assert len(cp.get_pin_token("éééé", PERM.GET_ASSERTION, RP_ID)) == 32

    # The probe with a PIN set: PIN_INVALID.
    expect_ctap_error(
        ERR.PIN_INVALID, ctap2.make_credential, new_cdh(), RP, user("probe"), ES256_PARAMS,
        pin_uv_param=b"", pin_uv_protocol=protocol.VERSION,
    )


def test_token_permissions(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2, PinProtocolV2()).set_pin(PIN)
    cp = ClientPin(ctap2, PinProtocolV2())
    # be needs the fingerprint sensor (off here); pcmr (0x40) only comes alone.
    for refused in (PERM.BIO_ENROLL, PERM.MAKE_CREDENTIAL | PERM.BIO_ENROLL,
                    PERM.MAKE_CREDENTIAL | ClientPin.PERMISSION(0x40)):
        expect_ctap_error(ERR.UNAUTHORIZED_PERMISSION, cp.get_pin_token, PIN, refused, RP_ID)
    # permissions 0 is an invalid parameter (python-fido2 would drop it, so send it raw).
    key_agreement, shared = cp._get_shared_secret()
    expect_ctap_error(
        ERR.INVALID_PARAMETER, ctap2.client_pin, 2, ClientPin.CMD.GET_TOKEN_USING_PIN,
        key_agreement=key_agreement, pin_hash_enc=cp.protocol.encrypt(shared, sha256(PIN.encode())[:16]),
        permissions=0, permissions_rpid=RP_ID,
    )

    def mc_with(tok, proto, rp=RP):
        cdh = new_cdh()
        return ctap2.make_credential(cdh, rp, user("u"), ES256_PARAMS, options={"rk": True},
                                     pin_uv_param=proto.authenticate(tok, cdh),
                                     pin_uv_protocol=proto.VERSION)

    # pinUvAuthParam without pinUvAuthProtocol: MISSING_PARAMETER; an unknown protocol: INVALID_PARAMETER.
    proto, tok = token(ctap2, PERM.MAKE_CREDENTIAL)
    cdh = new_cdh()
    expect_ctap_error(ERR.MISSING_PARAMETER, ctap2.make_credential, cdh, RP, user("u"), ES256_PARAMS,
                      options={"rk": True}, pin_uv_param=proto.authenticate(tok, cdh))
    expect_ctap_error(ERR.INVALID_PARAMETER, ctap2.make_credential, cdh, RP, user("u"), ES256_PARAMS,
                      options={"rk": True}, pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=3)

    # A ga token requested without an rpId is bound to the first RP it is used with (up=false keeps it alive).
    mc_with_cdh = new_cdh()
    proto, tok = token(ctap2, PERM.MAKE_CREDENTIAL)
    rk_cred = ctap2.make_credential(mc_with_cdh, RP, user("rk"), ES256_PARAMS, options={"rk": True},
                                    pin_uv_param=proto.authenticate(tok, mc_with_cdh),
                                    pin_uv_protocol=2).auth_data.credential_data
    proto, unbound = token(ctap2, PERM.GET_ASSERTION, None)
    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh, [descriptor(rk_cred.credential_id)], options={"up": False},
                            pin_uv_param=proto.authenticate(unbound, cdh), pin_uv_protocol=2)
    assert a.auth_data.is_user_verified() and not a.auth_data.is_user_present()
    a.verify(cdh, rk_cred.public_key)
    cdh = new_cdh()
    expect_ctap_error(ERR.PIN_AUTH_INVALID, ctap2.get_assertion, OTHER_RP["id"], cdh, None,
                      options={"up": False}, pin_uv_param=proto.authenticate(unbound, cdh), pin_uv_protocol=2)
    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh, [descriptor(rk_cred.credential_id)],
                            pin_uv_param=proto.authenticate(unbound, cdh), pin_uv_protocol=2)
    assert a.auth_data.is_user_verified() and a.auth_data.is_user_present()

    # A token without mc, or bound to another RP, does not authorize makeCredential.
    proto, ga_only = token(ctap2, PERM.GET_ASSERTION)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, mc_with, ga_only, proto)
    proto, cm_only = token(ctap2, PERM.CREDENTIAL_MGMT, None)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, mc_with, cm_only, proto)
    proto, other = token(ctap2, PERM.MAKE_CREDENTIAL, OTHER_RP["id"])
    expect_ctap_error(ERR.PIN_AUTH_INVALID, mc_with, other, proto)
    # A MAC made with the wrong key.
    proto, good = token(ctap2, PERM.MAKE_CREDENTIAL)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, mc_with, os.urandom(32), proto)
    # The right token works once; its touch spends the mc permission (CTAP 2.1 §6.1.2 step 14.d).
    assert mc_with(good, proto).auth_data.is_user_verified()
    expect_ctap_error(ERR.PIN_AUTH_INVALID, mc_with, good, proto)


def test_three_wrong_pins_block_until_power_cycle_and_retries_persist(sim):
    ctap2 = Ctap2(sim.device())
    cp = ClientPin(ctap2, PinProtocolV2())
    cp.set_pin(PIN)

    expect_ctap_error(ERR.PIN_INVALID, cp.get_pin_token, "bad-pin-1", PERM.GET_ASSERTION, RP_ID)
    assert retries(ctap2) == 7
    sim.power_cycle()
    ctap2 = Ctap2(sim.device())
    assert retries(ctap2) == 7, "pinRetries must survive a power cycle"
    cp = ClientPin(ctap2, PinProtocolV1())  # protocol 1 this time

    # Only *consecutive* mismatches count towards the block: the right PIN in between resets that count
    # (and pinRetries).
    expect_ctap_error(ERR.PIN_INVALID, cp.get_pin_token, "bad-pin-2", PERM.GET_ASSERTION, RP_ID)
    expect_ctap_error(ERR.PIN_INVALID, cp.get_pin_token, "bad-pin-3", PERM.GET_ASSERTION, RP_ID)
    assert retries(ctap2) == 5
    cp.get_pin_token(PIN, PERM.GET_ASSERTION, RP_ID)
    assert retries(ctap2) == 8
    # A wrong current PIN in changePin counts like one in getPinUvAuthToken.
    expect_ctap_error(ERR.PIN_INVALID, cp.get_pin_token, "bad-pin-4", PERM.GET_ASSERTION, RP_ID)
    expect_ctap_error(ERR.PIN_INVALID, cp.change_pin, "bad-pin-5", "87654321")
    expect_ctap_error(ERR.PIN_AUTH_BLOCKED, cp.get_pin_token, "bad-pin-6", PERM.GET_ASSERTION, RP_ID)
    n, power_cycle_state = cp.get_pin_retries()
    assert n == 5
    assert power_cycle_state in (None, True)  # powerCycleState is optional; if sent it must say True
    # Blocked: even the right PIN is refused, and is not counted.
    expect_ctap_error(ERR.PIN_AUTH_BLOCKED, cp.get_pin_token, PIN, PERM.GET_ASSERTION, RP_ID)
    expect_ctap_error(ERR.PIN_AUTH_BLOCKED, cp.change_pin, PIN, "87654321")
    assert retries(ctap2) == 5

    sim.power_cycle()
    ctap2 = Ctap2(sim.device())
    cp = ClientPin(ctap2, PinProtocolV2())
    n, power_cycle_state = cp.get_pin_retries()
    assert n == 5
    assert power_cycle_state in (None, False)
    assert len(cp.get_pin_token(PIN, PERM.GET_ASSERTION, RP_ID)) == 32
    assert retries(ctap2) == 8


def test_eight_wrong_pins_block_until_reset(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2, PinProtocolV2()).set_pin(PIN)
    att = make_cred_uv(ctap2, user("alice"))

    expected = 8
    for round_ in range(3):
        cp = ClientPin(ctap2, PinProtocolV2() if round_ % 2 == 0 else PinProtocolV1())
        for i in range(3):
            expected -= 1
            if expected == 0:
                code = ERR.PIN_BLOCKED
            elif i == 2:
                code = ERR.PIN_AUTH_BLOCKED
            else:
                code = ERR.PIN_INVALID
            expect_ctap_error(code, cp.get_pin_token, f"wrong-{round_}-{i}", PERM.GET_ASSERTION, RP_ID)
            assert retries(ctap2) == expected
            if expected == 0:
                break
        if expected == 0:
            break
        sim.power_cycle()
        ctap2 = Ctap2(sim.device())
    assert expected == 0

    cp = ClientPin(ctap2, PinProtocolV2())
    expect_ctap_error(ERR.PIN_BLOCKED, cp.get_pin_token, PIN, PERM.GET_ASSERTION, RP_ID)
    sim.power_cycle()  # a power cycle does not help ...
    ctap2 = Ctap2(sim.device())
    cp = ClientPin(ctap2, PinProtocolV2())
    assert retries(ctap2) == 0
    expect_ctap_error(ERR.PIN_BLOCKED, cp.get_pin_token, PIN, PERM.GET_ASSERTION, RP_ID)
    expect_ctap_error(ERR.PIN_BLOCKED, cp.change_pin, PIN, "87654321")

    ctap2.reset()  # ... a reset (within 10 s of power-up) does
    info = ctap2.get_info()
    assert info.options["clientPin"] is False
    assert retries(ctap2) == 8
    expect_ctap_error(ERR.NO_CREDENTIALS, ctap2.get_assertion, RP_ID, new_cdh(),
                      [descriptor(att.auth_data.credential_data.credential_id)])
    cp.set_pin("new-pin-1")
    assert len(cp.get_pin_token("new-pin-1", PERM.GET_ASSERTION, RP_ID)) == 32


def test_reset_clears_pin(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2, PinProtocolV1()).set_pin(PIN)
    assert ctap2.get_info().options["clientPin"] is True
    make_cred_uv(ctap2, user("alice"))
    sim.power_cycle()  # reset only within 10 s of power-up: not counted from the key's start
    ctap2 = Ctap2(sim.device())
    ctap2.reset()
    assert ctap2.get_info().options["clientPin"] is False
    expect_ctap_error(ERR.NO_CREDENTIALS, ctap2.get_assertion, RP_ID, new_cdh())
    # Without a PIN, a discoverable credential needs no token again.
    att = ctap2.make_credential(new_cdh(), RP, user("bob"), ES256_PARAMS, options={"rk": True})
    assert not att.auth_data.is_user_verified()


def test_pin_state_survives_a_restart_from_a_flash_image(tmp_path, image_key):
    s = image_key(tmp_path / "key.img")
    try:
        ctap2 = Ctap2(s.device())
        ClientPin(ctap2, PinProtocolV1()).set_pin(PIN)
        expect_ctap_error(ERR.PIN_INVALID, ClientPin(ctap2).get_pin_token, "wrong-pin", PERM.GET_ASSERTION, RP_ID)
        expect_ctap_error(ERR.PIN_INVALID, ClientPin(ctap2).get_pin_token, "wrong-pin", PERM.GET_ASSERTION, RP_ID)
        assert retries(ctap2) == 6
        cred = make_cred_uv(ctap2, user("alice"), extensions={"credProtect": 3}).auth_data.credential_data
        expect_ctap_error(ERR.PIN_INVALID, ClientPin(ctap2).get_pin_token, "wrong-pin", PERM.GET_ASSERTION, RP_ID)
        assert retries(ctap2) == 7
    finally:
        assert s.close() == 0
    s = image_key(tmp_path / "key.img")
    try:
        ctap2 = Ctap2(s.device())
        info = ctap2.get_info()
        assert info.options["clientPin"] is True
        assert retries(ctap2) == 7
        expect_ctap_error(ERR.PUAT_REQUIRED, ctap2.make_credential, new_cdh(), RP, user("x"), ES256_PARAMS,
                          options={"rk": True})
        expect_ctap_error(ERR.NO_CREDENTIALS, ctap2.get_assertion, RP_ID, new_cdh(), [descriptor(cred.credential_id)])
        cdh = new_cdh()
        a = get_assertion_uv(ctap2, cdh=cdh)  # the PIN still works, and the level-3 credential with it
        a.verify(cdh, cred.public_key)
        assert retries(ctap2) == 8
    finally:
        assert s.close() == 0


def test_reset_only_within_ten_seconds_of_power_up(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)
    time.sleep(10.5)
    expect_ctap_error(ERR.NOT_ALLOWED, ctap2.reset)
    assert ctap2.get_info().options["clientPin"] is True  # nothing was erased
    sim.power_cycle()
    ctap2 = Ctap2(sim.device())
    ctap2.reset()
    assert ctap2.get_info().options["clientPin"] is False


# --------------------------------------------------------------------------
# 2. Fido2Client with a PIN; makeCredUvNotRqd
# --------------------------------------------------------------------------


def test_client_register_and_authenticate_with_pin(sim):
    dev = sim.device()
    ClientPin(Ctap2(dev)).set_pin(PIN)
    server, (client, ui) = make_server(), make_client(dev)
    usr = web_user("alice")

    result, auth_data = register(server, client, usr)
    assert auth_data.is_user_verified() and auth_data.is_user_present()
    assert ui.requests and all(rp == RP_ID for _, rp in ui.requests)
    assert ui.requests[0][0] & PERM.MAKE_CREDENTIAL
    cred = auth_data.credential_data
    assert isinstance(cred.public_key, ES256)
    att = result.response.attestation_object
    assert att.fmt == "packed" and att.att_stmt["alg"] == -7 and len(att.att_stmt["x5c"]) == 1  # the shared batch

    ui.requests.clear()
    selection, response = authenticate(server, client, [cred], allow=False)
    assert ui.requests and ui.requests[0][0] & PERM.GET_ASSERTION
    assert response.raw_id == cred.credential_id
    assert response.response.user_handle == usr.id
    ad = response.response.authenticator_data
    assert ad.is_user_verified() and ad.is_user_present()

    # With an allow list, too; the counter moves on.
    _, again = authenticate(server, client, [cred], allow=True)
    assert again.response.authenticator_data.counter > ad.counter
    assert again.response.authenticator_data.is_user_verified()


def test_make_cred_uv_not_required(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)

    # Non-discoverable without a token: allowed (makeCredUvNotRqd), no UV flag.
    cdh = new_cdh()
    att = ctap2.make_credential(cdh, RP, user("plain"), ES256_PARAMS, options={"rk": False})
    assert att.auth_data.is_user_present()
    assert not att.auth_data.is_user_verified()
    cred = att.auth_data.credential_data
    a = ctap2.get_assertion(RP_ID, (cdh := new_cdh()), [descriptor(cred.credential_id)])
    assert not a.auth_data.is_user_verified()
    a.verify(cdh, cred.public_key)
    att = ctap2.make_credential(new_cdh(), RP, user("plain2"), ES256_PARAMS)  # no options at all
    assert not att.auth_data.is_user_verified()

    # Discoverable without a token: PUAT_REQUIRED.
    expect_ctap_error(ERR.PUAT_REQUIRED, ctap2.make_credential, new_cdh(), RP, user("rk"),
                      ES256_PARAMS, options={"rk": True})
    # And nothing was stored.
    expect_ctap_error(ERR.NO_CREDENTIALS, ctap2.get_assertion, RP_ID, new_cdh())

    # With a token it works, UV set; a getAssertion with a token reports UV.
    rk = make_cred_uv(ctap2, user("rk")).auth_data.credential_data
    cdh = new_cdh()
    a = get_assertion_uv(ctap2, cdh=cdh)
    assert a.auth_data.is_user_verified()
    a.verify(cdh, rk.public_key)
