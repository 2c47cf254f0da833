"""CTAP 2.1 PIN/UV, credential management, extensions and EdDSA, checked with python-fido2's own code.

Everything on the client side (ECDH key agreement, PIN protocols 1 and 2, PRF salt derivation, COSE keys,
attestation and signature checks) comes from python-fido2 2.x and `cryptography`, not from the device.

Run:  FIDOSIM_BIN=.build/debug/fidosim python3 -m pytest -p no:cacheprovider -q tools/interop/test_pin_interop.py
"""

from __future__ import annotations

import hashlib
import os
import struct
import time

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from fido2 import cbor
from fido2.attestation import AttestationType, PackedAttestation
from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction
from fido2.cose import EdDSA, ES256
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.extensions import HmacSecretExtension, _prf_salt
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.server import Fido2Server
from fido2.webauthn import (
    AttestationConveyancePreference,
    AuthenticatorData,
    PublicKeyCredentialParameters,
    PublicKeyCredentialRpEntity,
    PublicKeyCredentialType,
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from conftest import Simulator
from ctap_helpers import descriptor, expect_ctap_error, new_cdh, sha256  # noqa: E402

# No 200 ms wait for each simulated touch: keeps the file fast. Tests with their own sim_args repeat it.
pytestmark = pytest.mark.sim_args("--presence-delay", "0")

ERR = CtapError.ERR
PERM = ClientPin.PERMISSION
CM = CredentialManagement
RP_ID = "example.com"
RP = {"id": RP_ID, "name": "Example"}
OTHER_RP = {"id": "other.example", "name": "Other"}
ORIGIN = "https://example.com"
ES256_PARAMS = [{"type": "public-key", "alg": -7}]
EDDSA_PARAMS = [{"type": "public-key", "alg": -8}]
PIN = "12345678"
PROTOCOLS = [PinProtocolV1, PinProtocolV2]
PROTOCOL_IDS = ["pinUvAuthProtocol1", "pinUvAuthProtocol2"]


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def user(name: str, user_id: bytes | None = None) -> dict:
    return {"id": user_id or os.urandom(16), "name": name, "displayName": name.title()}


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


def token(ctap2: Ctap2, perms, rp_id: str | None = RP_ID, protocol=None, pin: str = PIN):
    """(protocol, pinUvAuthToken) via getPinUvAuthTokenUsingPinWithPermissions."""
    cp = ClientPin(ctap2, protocol or PinProtocolV2())
    return cp.protocol, cp.get_pin_token(pin, perms, rp_id)


def make_cred_uv(ctap2: Ctap2, usr: dict, *, rp=RP, rk=True, extensions=None,
                 params=ES256_PARAMS, protocol=None, pin: str = PIN):
    """makeCredential with a fresh mc token (a token is spent by the touch, CTAP 2.1 §6.1.2)."""
    proto, tok = token(ctap2, PERM.MAKE_CREDENTIAL, rp["id"], protocol, pin)
    cdh = new_cdh()
    att = ctap2.make_credential(
        cdh, rp, usr, params, extensions=extensions, options={"rk": rk},
        pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=proto.VERSION,
    )
    assert att.auth_data.is_user_present()
    assert att.auth_data.is_user_verified()
    assert att.auth_data.rp_id_hash == sha256(rp["id"].encode())
    return att


def get_assertion_uv(ctap2: Ctap2, rp_id=RP_ID, allow=None, extensions=None, protocol=None,
                     cdh=None):
    proto, tok = token(ctap2, PERM.GET_ASSERTION, rp_id, protocol)
    cdh = cdh or new_cdh()
    return ctap2.get_assertion(
        rp_id, cdh, allow, extensions=extensions,
        pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=proto.VERSION,
    )


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


def retries(ctap2: Ctap2, protocol=None) -> int:
    n, power_cycle_state = ClientPin(ctap2, protocol or PinProtocolV2()).get_pin_retries()
    return n


class PinInteraction(UserInteraction):
    """Answers every PIN request with `pin` and records what was asked for."""

    def __init__(self, pin: str = PIN):
        self.pin = pin
        self.requests: list[tuple[int, str | None]] = []

    def request_pin(self, permissions, rp_id):
        self.requests.append((permissions, rp_id))
        return self.pin


def make_client(dev, pin: str | None = PIN, extensions=None) -> tuple[Fido2Client, PinInteraction]:
    ui = PinInteraction(pin)
    kwargs = {"extensions": extensions} if extensions is not None else {}
    return Fido2Client(dev, DefaultClientDataCollector(ORIGIN), user_interaction=ui, **kwargs), ui


def make_server(algs=None) -> Fido2Server:
    def verify_packed(attestation_object, client_data_hash):
        assert attestation_object.fmt == "packed"
        result = PackedAttestation().verify(
            attestation_object.att_stmt, attestation_object.auth_data, client_data_hash
        )
        assert result.attestation_type == AttestationType.SELF

    server = Fido2Server(
        PublicKeyCredentialRpEntity(id=RP_ID, name="Example"),
        attestation=AttestationConveyancePreference.DIRECT,
        verify_attestation=verify_packed,
    )
    if algs is not None:
        server.allowed_algorithms = [
            PublicKeyCredentialParameters(type=PublicKeyCredentialType.PUBLIC_KEY, alg=a)
            for a in algs
        ]
    return server


def web_user(name: str) -> PublicKeyCredentialUserEntity:
    return PublicKeyCredentialUserEntity(id=os.urandom(32), name=name, display_name=name.title())


def register(server, client, usr, *, rk=ResidentKeyRequirement.REQUIRED,
             uv=UserVerificationRequirement.REQUIRED, extensions=None):
    options, state = server.register_begin(
        usr, resident_key_requirement=rk, user_verification=uv, extensions=extensions
    )
    result = client.make_credential(options.public_key)
    auth_data = server.register_complete(state, result)
    assert result.raw_id == auth_data.credential_data.credential_id
    return result, auth_data


def authenticate(server, client, creds, *, allow=True, uv=UserVerificationRequirement.REQUIRED,
                 extensions=None, index=0):
    options, state = server.authenticate_begin(
        creds if allow else None, user_verification=uv, extensions=extensions
    )
    selection = client.get_assertion(options.public_key)
    response = selection.get_response(index)
    server.authenticate_complete(state, creds, response)
    return selection, response


# --------------------------------------------------------------------------
# 1. getInfo and clientPIN
# --------------------------------------------------------------------------


def test_get_info_advertises_ctap21_pin_features(sim):
    info = Ctap2(sim.device()).get_info()
    assert info.versions == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1"]
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
    for refused in (PERM.BIO_ENROLL, PERM.MAKE_CREDENTIAL | PERM.BIO_ENROLL, PERM.MAKE_CREDENTIAL | ClientPin.PERMISSION(0x40)):
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


def test_pin_state_survives_a_restart_from_a_flash_image(tmp_path):
    def start():
        s = Simulator(["--flash", str(tmp_path / "key.img"), "--presence-delay", "0"])
        s.start()
        return s

    def stop(s):
        code = s.stop()
        s._stdout.close()
        s._stderr.close()
        return code

    s = start()
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
        assert stop(s) == 0
    s = start()
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
        assert stop(s) == 0


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
    assert att.fmt == "packed" and att.att_stmt["alg"] == -7 and "x5c" not in att.att_stmt

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


# --------------------------------------------------------------------------
# 3. Credential management
# --------------------------------------------------------------------------


def cm_call_raw(ctap2, cmd, sub_cmd, proto, tok, params=None):
    """A credentialManagement request sent with an explicit command byte (0x0A or the preview 0x41)."""
    msg = struct.pack(">B", sub_cmd) + (cbor.encode(params) if params is not None else b"")
    req = {1: sub_cmd, 3: proto.VERSION, 4: proto.authenticate(tok, msg)}
    if params is not None:
        req[2] = params
    return ctap2.send_cbor(cmd, req)


@pytest.mark.parametrize("protocol_cls", PROTOCOLS, ids=PROTOCOL_IDS)
def test_credential_management(sim, protocol_cls):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2, protocol_cls()).set_pin(PIN)

    alice, bob, carol = user("alice"), user("bob"), user("carol")
    att_a = make_cred_uv(ctap2, alice, extensions={"largeBlobKey": True}, protocol=protocol_cls())
    att_b = make_cred_uv(ctap2, bob, extensions={"credProtect": 2})
    att_c = make_cred_uv(ctap2, carol, rp=OTHER_RP, extensions={"credProtect": 3},
                         params=EDDSA_PARAMS)
    make_cred_uv(ctap2, user("nrk"), rk=False)  # non-discoverable: not managed
    assert att_b.auth_data.extensions == {"credProtect": 2}
    assert att_c.auth_data.extensions == {"credProtect": 3}
    assert att_a.large_blob_key is not None and len(att_a.large_blob_key) == 32
    creds = {u["id"]: att.auth_data.credential_data for u, att in
             ((alice, att_a), (bob, att_b), (carol, att_c))}

    protocol, cm_token = token(ctap2, PERM.CREDENTIAL_MGMT, None, protocol_cls())
    cm = CredentialManagement(ctap2, protocol, cm_token)

    # Without pinUvAuthParam: PUAT_REQUIRED. "Next" without a "begin": NOT_ALLOWED.
    expect_ctap_error(ERR.PUAT_REQUIRED, ctap2.credential_mgmt, CM.CMD.GET_CREDS_METADATA)
    expect_ctap_error(ERR.NOT_ALLOWED, cm.enumerate_rps_next)
    expect_ctap_error(ERR.NOT_ALLOWED, cm.enumerate_creds_next)

    meta = cm.get_metadata()
    assert meta[CM.RESULT.EXISTING_CRED_COUNT] == 3
    remaining = meta[CM.RESULT.MAX_REMAINING_COUNT]
    assert remaining == ctap2.get_info().remaining_disc_creds

    rps = cm.enumerate_rps()
    assert len(rps) == 2
    assert rps[0][CM.RESULT.TOTAL_RPS] == 2
    assert {r[CM.RESULT.RP]["id"] for r in rps} == {RP_ID, OTHER_RP["id"]}
    for r in rps:
        assert r[CM.RESULT.RP_ID_HASH] == sha256(r[CM.RESULT.RP]["id"].encode())

    def by_user(rp_id):
        entries = cm.enumerate_creds(sha256(rp_id.encode()))
        return {e[CM.RESULT.USER]["id"]: e for e in entries}

    listed = by_user(RP_ID)
    assert set(listed) == {alice["id"], bob["id"]}
    for u in (alice, bob):
        e = listed[u["id"]]
        assert e[CM.RESULT.USER] == u
        assert e[CM.RESULT.CREDENTIAL_ID]["id"] == creds[u["id"]].credential_id
        assert e[CM.RESULT.CREDENTIAL_ID]["type"] == "public-key"
        assert dict(e[CM.RESULT.PUBLIC_KEY]) == dict(creds[u["id"]].public_key)
    assert listed[alice["id"]][CM.RESULT.CRED_PROTECT] == 1
    assert listed[bob["id"]][CM.RESULT.CRED_PROTECT] == 2
    assert listed[alice["id"]][CM.RESULT.LARGE_BLOB_KEY] == att_a.large_blob_key
    assert CM.RESULT.LARGE_BLOB_KEY not in listed[bob["id"]]
    other = by_user(OTHER_RP["id"])
    assert set(other) == {carol["id"]}
    assert other[carol["id"]][CM.RESULT.CRED_PROTECT] == 3
    assert other[carol["id"]][CM.RESULT.PUBLIC_KEY][3] == -8
    assert cm.enumerate_creds(sha256(b"unknown.example")) == []

    # updateUserInformation: a new name and display name; an absent field is removed.
    cm.update_user_info(descriptor(creds[alice["id"]].credential_id),
                        {"id": alice["id"], "name": "alice.renamed", "displayName": "Alice Renamed"})
    cm.update_user_info(descriptor(creds[bob["id"]].credential_id), {"id": bob["id"], "name": "bob2"})
    listed = by_user(RP_ID)
    assert listed[alice["id"]][CM.RESULT.USER] == {
        "id": alice["id"], "name": "alice.renamed", "displayName": "Alice Renamed"}
    assert listed[bob["id"]][CM.RESULT.USER] == {"id": bob["id"], "name": "bob2"}
    expect_ctap_error(ERR.NOT_ALLOWED, cm.enumerate_creds_next)  # that enumeration is finished
    expect_ctap_error(ERR.NO_CREDENTIALS, cm.update_user_info, descriptor(os.urandom(48)),
                      {"id": alice["id"], "name": "nobody"})
    # The user id must stay the same.
    expect_ctap_error(ERR.INVALID_PARAMETER, cm.update_user_info,
                      descriptor(creds[alice["id"]].credential_id), {"id": os.urandom(16), "name": "x"})
    # With UV and more than one account, getAssertion returns the (new) user fields.
    first = get_assertion_uv(ctap2)
    assertions = [first] + [ctap2.get_next_assertion() for _ in range(1, first.number_of_credentials or 1)]
    users = {a.user["id"]: a.user for a in assertions}
    assert users[alice["id"]].get("name") == "alice.renamed"
    assert users[alice["id"]].get("displayName") == "Alice Renamed"

    # Errors: a wrong pinUvAuthParam, a token without cm, a cm token bound to an RP.
    bad = CredentialManagement(ctap2, protocol, os.urandom(32))
    expect_ctap_error(ERR.PIN_AUTH_INVALID, bad.get_metadata)
    p2, ga_tok = token(ctap2, PERM.GET_ASSERTION, RP_ID, protocol_cls())
    expect_ctap_error(ERR.PIN_AUTH_INVALID, CredentialManagement(ctap2, p2, ga_tok).get_metadata)
    p3, bound = token(ctap2, PERM.CREDENTIAL_MGMT, OTHER_RP["id"], protocol_cls())
    cm_bound = CredentialManagement(ctap2, p3, bound)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, cm_bound.get_metadata)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, cm_bound.enumerate_rps_begin)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, cm_bound.enumerate_creds_begin, sha256(RP_ID.encode()))
    assert set(e[CM.RESULT.USER]["id"] for e in cm_bound.enumerate_creds(sha256(OTHER_RP["id"].encode()))) \
        == {carol["id"]}

    # A new cm token (getting one resets the previous token).
    protocol, cm_token = token(ctap2, PERM.CREDENTIAL_MGMT, None, protocol_cls())
    cm = CredentialManagement(ctap2, protocol, cm_token)

    # The preview command 0x41 gives the same answers for metadata and RP enumeration.
    pre = cm_call_raw(ctap2, Ctap2.CMD.CREDENTIAL_MGMT_PRE, CM.CMD.GET_CREDS_METADATA, protocol, cm_token)
    assert pre[CM.RESULT.EXISTING_CRED_COUNT] == 3
    assert pre[CM.RESULT.MAX_REMAINING_COUNT] == remaining
    pre = cm_call_raw(ctap2, Ctap2.CMD.CREDENTIAL_MGMT_PRE, CM.CMD.ENUMERATE_RPS_BEGIN, protocol, cm_token)
    assert pre[CM.RESULT.TOTAL_RPS] == 2
    pre = cm_call_raw(ctap2, Ctap2.CMD.CREDENTIAL_MGMT_PRE, CM.CMD.ENUMERATE_CREDS_BEGIN, protocol, cm_token,
                      {CM.PARAM.RP_ID_HASH: sha256(OTHER_RP["id"].encode())})
    assert pre[CM.RESULT.USER]["id"] == carol["id"]

    # deleteCredential: gone from enumeration and from getAssertion.
    cm.delete_cred(descriptor(creds[alice["id"]].credential_id))
    assert cm.get_metadata()[CM.RESULT.EXISTING_CRED_COUNT] == 2
    assert set(by_user(RP_ID)) == {bob["id"]}
    expect_ctap_error(ERR.NO_CREDENTIALS, cm.delete_cred, descriptor(creds[alice["id"]].credential_id))
    expect_ctap_error(ERR.NO_CREDENTIALS, get_assertion_uv, ctap2, RP_ID,
                      [descriptor(creds[alice["id"]].credential_id)])
    # (Getting that ga token ended the cm token: get a new one.)
    protocol, cm_token = token(ctap2, PERM.CREDENTIAL_MGMT, None, protocol_cls())
    cm = CredentialManagement(ctap2, protocol, cm_token)
    # Deleting the last credential of an RP removes the RP.
    cm.delete_cred(descriptor(creds[carol["id"]].credential_id))
    rps = cm.enumerate_rps()
    assert [r[CM.RESULT.RP]["id"] for r in rps] == [RP_ID]
    assert cm.enumerate_creds(sha256(OTHER_RP["id"].encode())) == []
    expect_ctap_error(ERR.NO_CREDENTIALS, get_assertion_uv, ctap2, OTHER_RP["id"])
    # bob is still usable.
    a = get_assertion_uv(ctap2, cdh=(cdh := new_cdh()))
    assert a.user["id"] == bob["id"]
    a.verify(cdh, creds[bob["id"]].public_key)


# --------------------------------------------------------------------------
# 4. Extensions
# --------------------------------------------------------------------------


def test_cred_protect(sim):
    dev = sim.device()
    ctap2 = Ctap2(dev)
    ClientPin(ctap2).set_pin(PIN)
    server, (client, ui) = make_server(), make_client(dev)
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
    server, (client, ui) = make_server(), make_client(dev, pin=None)
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


# --------------------------------------------------------------------------
# 5. EdDSA
# --------------------------------------------------------------------------


def test_eddsa_raw_verified_with_cryptography(sim):
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
    att = ctap2.make_credential(new_cdh(), RP, user("c"), [{"type": "public-key", "alg": -257}] + EDDSA_PARAMS)
    assert att.auth_data.credential_data.public_key[3] == -8
    expect_ctap_error(ERR.UNSUPPORTED_ALGORITHM, ctap2.make_credential, new_cdh(), RP, user("d"),
                      [{"type": "public-key", "alg": -257}])


def test_eddsa_with_fido2_server_and_pin(sim):
    dev = sim.device()
    ClientPin(Ctap2(dev)).set_pin(PIN)
    server, (client, ui) = make_server(algs=[-8]), make_client(dev)
    usr = web_user("eddsa")
    result, auth_data = register(server, client, usr)
    cred = auth_data.credential_data
    assert isinstance(cred.public_key, EdDSA)
    assert result.response.attestation_object.att_stmt["alg"] == -8
    assert auth_data.is_user_verified()

    _, response = authenticate(server, client, [cred], allow=False)
    assert response.response.user_handle == usr.id
    ad = response.response.authenticator_data
    assert ad.is_user_verified()
    Ed25519PublicKey.from_public_bytes(cred.public_key[-2]).verify(
        response.response.signature, bytes(ad) + response.response.client_data.hash)
    assert ad.flags & AuthenticatorData.FLAG.UP
