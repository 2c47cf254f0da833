"""CTAP 2.1 built-in user verification and authenticatorBioEnrollment, checked with python-fido2's own code.

The key runs with the simulated fingerprint sensor (`fidosim serve --uv fingerprint`); `--presence approve` is a
matching finger (or a good enrollment sample), `--presence deny` one that does not match (a poor-quality sample).
Enrollment goes through python-fido2's `FPBioEnrollment` / `FPEnrollmentContext`, UV tokens through
`ClientPin.get_uv_token`, WebAuthn through `Fido2Client` and `Fido2Server`; nothing on the client side comes from
the device. Whether the key waited for a touch or a finger is seen from the CTAPHID KEEPALIVE UPNEEDED it sends
(python-fido2 passes it to `on_keepalive`).

Run:  FIDOSIM_BIN=.build/debug/fidosim python3 -m pytest -p no:cacheprovider -q tools/interop/test_bio_interop.py
"""

from __future__ import annotations

import os

import pytest
from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction
from fido2.ctap import STATUS
from fido2.ctap2 import Ctap2
from fido2.ctap2.bio import BioEnrollment, CaptureError, FPBioEnrollment
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.webauthn import (
    AuthenticatorData,
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from fidosim.testing import (
    ERR,
    ORIGIN,
    PERM,
    PIN,
    RP,
    RP_ID,
    assert_shared_batch,
    descriptor,
    expect_ctap_error,
    make_server,
    new_cdh,
    user,
)

# The sensor on, no 200 ms wait for each simulated touch or finger. Tests with their own sim_args repeat it.
FP = ("--presence-delay", "0", "--uv", "fingerprint")
pytestmark = pytest.mark.sim_args(*FP)

FEEDBACK = FPBioEnrollment.FEEDBACK
RESULT = BioEnrollment.RESULT
FLAG = AuthenticatorData.FLAG
OTHER_RP = {"id": "other.example", "name": "Other"}
ES256_PARAMS = [{"type": "public-key", "alg": -7}]
MAX_UV_RETRIES = 5


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


class Keepalives:
    """An on_keepalive callback that records the statuses; `waited` = the key asked for a touch or finger.

    (Not a list subclass: python-fido2 tests `if on_keepalive`, and an empty list is false.)
    """

    def __init__(self):
        self.statuses: list[STATUS] = []

    def __call__(self, status):
        self.statuses.append(status)

    @property
    def waited(self) -> bool:
        return STATUS.UPNEEDED in self.statuses


def pin_token(ctap2: Ctap2, perms, rp_id: str | None = None, protocol=None):
    """(protocol, pinUvAuthToken) via getPinUvAuthTokenUsingPinWithPermissions."""
    cp = ClientPin(ctap2, protocol or PinProtocolV2())
    return cp.protocol, cp.get_pin_token(PIN, perms, rp_id)


def uv_retries(ctap2: Ctap2) -> int:
    return ClientPin(ctap2).get_uv_retries()


def options(ctap2: Ctap2) -> dict:
    return ctap2.get_info().options


def enroll_finger(bio: FPBioEnrollment, **kwargs) -> bytes:
    """Python-fido2's enrollment loop: capture samples until the context returns the template id."""
    ctx = bio.enroll(**kwargs)
    remaining = []
    for _ in range(10):
        seen = Keepalives()
        template_id = ctx.capture(on_keepalive=seen)
        assert seen.waited, "each sample should wait for a finger (KEEPALIVE UPNEEDED)"
        remaining.append(ctx.remaining)
        if template_id is not None:
            break
    else:
        pytest.fail(f"enrollment did not finish after 10 samples (remaining: {remaining})")
    assert remaining == [2, 1, 0], remaining  # 3 good samples make a template
    assert isinstance(template_id, bytes) and len(template_id) == 2
    return template_id


def listed_templates(bio: FPBioEnrollment) -> dict[bytes, str | None]:
    """enumerateEnrollments through python-fido2's signed call, tolerating templates without a name.

    templateFriendlyName is optional in a templateInfo (CTAP 2.1 §6.7.5), but python-fido2 2.2.1's
    `enumerate_enrollments` indexes it unconditionally (KeyError), so unnamed templates are read here.
    """
    infos = bio._call(FPBioEnrollment.CMD.ENUMERATE_ENROLLMENTS)[RESULT.TEMPLATE_INFOS]
    out = {}
    for t in infos:
        assert set(t) <= {1, 2}, t
        name = t.get(BioEnrollment.TEMPLATE_INFO.NAME)
        assert name is None or isinstance(name, str), t
        out[t[BioEnrollment.TEMPLATE_INFO.ID]] = name
    assert len(out) == len(infos), f"duplicate template ids: {infos}"
    return out


class FingerOnlyInteraction(UserInteraction):
    """Records every request; has no PIN to give."""

    def __init__(self):
        self.pin_requests: list = []
        self.uv_requests: list = []
        self.up_prompts = 0

    def prompt_up(self):
        self.up_prompts += 1

    def request_pin(self, permissions, rp_id):
        self.pin_requests.append((permissions, rp_id))
        return None

    def request_uv(self, permissions, rp_id):
        self.uv_requests.append((permissions, rp_id))
        return True


# --------------------------------------------------------------------------
# 1. getInfo, and a sensor without an enrolled finger
# --------------------------------------------------------------------------


def test_get_info_and_sensor_without_a_finger(sim):
    ctap2 = Ctap2(sim.device())
    info = ctap2.get_info()
    assert info.options.get("uv") is False  # built-in UV supported, not yet configured
    assert info.options.get("bioEnroll") is False
    assert "userVerificationMgmtPreview" in info.options
    assert info.options.get("uvBioEnroll") is True
    assert info.options.get("uvAcfg") is True
    assert info.options.get("pinUvAuthToken") is True
    assert info.preferred_platform_uv_attempts == 3
    assert info.uv_modality == 2  # USER_VERIFY_FINGERPRINT_INTERNAL
    assert BioEnrollment.is_supported(info)

    # getModality through the 2.1 command and its preview; sensor info needs no token (python-fido2's docs).
    assert ctap2.send_cbor(Ctap2.CMD.BIO_ENROLLMENT, {0x06: True}) == {RESULT.MODALITY: 1}
    assert ctap2.send_cbor(Ctap2.CMD.BIO_ENROLLMENT_PRE, {0x06: True}) == {RESULT.MODALITY: 1}
    sensor_info = {0x01: 1, 0x02: FPBioEnrollment.CMD.GET_SENSOR_INFO}
    assert ctap2.send_cbor(Ctap2.CMD.BIO_ENROLLMENT_PRE, sensor_info) == ctap2.send_cbor(
        Ctap2.CMD.BIO_ENROLLMENT, sensor_info)
    bio = FPBioEnrollment(ctap2, None, None)
    assert bio.get_modality() == BioEnrollment.MODALITY.FINGERPRINT
    assert bio.get_fingerprint_sensor_info() == {
        RESULT.MODALITY: 1, RESULT.FINGERPRINT_KIND: 1,
        RESULT.MAX_SAMPLES_REQUIRED: 3, RESULT.MAX_TEMPLATE_FRIENDLY_NAME: 32,
    }

    # No finger yet: UV attempts are full, but there is nothing to verify against.
    cp = ClientPin(ctap2)
    assert cp.get_uv_retries() == MAX_UV_RETRIES
    seen = Keepalives()
    expect_ctap_error(ERR.NOT_ALLOWED, cp.get_uv_token, PERM.MAKE_CREDENTIAL, RP_ID, on_keepalive=seen)
    assert not seen.waited, "no finger should be read without an enrolled one"
    expect_ctap_error(ERR.INVALID_OPTION, ctap2.make_credential, new_cdh(), RP, user("u"), ES256_PARAMS,
                      options={"uv": True})
    assert cp.get_uv_retries() == MAX_UV_RETRIES
    # Not protected yet: a discoverable credential is made with a touch only.
    att = ctap2.make_credential(new_cdh(), RP, user("rk"), ES256_PARAMS, options={"rk": True})
    assert att.auth_data.is_user_present() and not att.auth_data.is_user_verified()

    # With the sensor, a PIN token may carry the be permission.
    cp.set_pin(PIN)
    proto, tok = pin_token(ctap2, PERM.BIO_ENROLL)
    assert FPBioEnrollment(ctap2, proto, tok).enumerate_enrollments() == {}


# --------------------------------------------------------------------------
# 2. Enrollment with FPBioEnrollment
# --------------------------------------------------------------------------


@pytest.mark.parametrize("protocol_cls", [PinProtocolV1, PinProtocolV2], ids=["protocol1", "protocol2"])
def test_fp_bio_enrollment_lifecycle(sim, protocol_cls):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)
    # A token without the be permission is refused (getting the next token replaces this one).
    proto_cm, cm_tok = pin_token(ctap2, PERM.CREDENTIAL_MGMT | PERM.MAKE_CREDENTIAL, RP_ID, protocol_cls())
    expect_ctap_error(ERR.PIN_AUTH_INVALID, FPBioEnrollment(ctap2, proto_cm, cm_tok).enumerate_enrollments)
    proto, tok = pin_token(ctap2, PERM.BIO_ENROLL, protocol=protocol_cls())
    bio = FPBioEnrollment(ctap2, proto, tok)

    # No pinUvAuthParam at all: CTAP2_ERR_PUAT_REQUIRED.
    expect_ctap_error(ERR.PUAT_REQUIRED, bio._call, FPBioEnrollment.CMD.ENUMERATE_ENROLLMENTS, auth=False)

    # Nothing enrolled: enumerateEnrollments is CTAP2_ERR_INVALID_OPTION (python-fido2 turns it into {}).
    expect_ctap_error(ERR.INVALID_OPTION, bio._call, FPBioEnrollment.CMD.ENUMERATE_ENROLLMENTS)
    assert bio.enumerate_enrollments() == {}
    opts = options(ctap2)
    assert (opts["uv"], opts["bioEnroll"]) == (False, False)

    first = enroll_finger(bio)
    opts = options(ctap2)
    assert (opts["uv"], opts["bioEnroll"]) == (True, True)
    assert opts.get("userVerificationMgmtPreview") is True
    assert list(listed_templates(bio)) == [first]

    bio.set_name(first, "Right thumb")
    assert bio.enumerate_enrollments() == {first: "Right thumb"}
    bio.set_name(first, "x" * 32)  # maxTemplateFriendlyName bytes
    assert bio.enumerate_enrollments() == {first: "x" * 32}

    # A second finger, with a capture timeout (python-fido2 sends timeoutMilliseconds).
    second = enroll_finger(bio, timeout=10_000)
    assert second != first
    assert listed_templates(bio).keys() == {first, second}
    bio.set_name(second, "Left index")
    assert bio.enumerate_enrollments() == {first: "x" * 32, second: "Left index"}

    # Unknown template ids: CTAP2_ERR_INVALID_OPTION.
    unknown = bytes(a ^ b ^ 0xFF for a, b in zip(first, second))
    assert unknown not in (first, second)
    expect_ctap_error(ERR.INVALID_OPTION, bio.set_name, unknown, "nobody")
    expect_ctap_error(ERR.INVALID_OPTION, bio.remove_enrollment, unknown)

    bio.remove_enrollment(first)
    assert bio.enumerate_enrollments() == {second: "Left index"}
    assert options(ctap2)["uv"] is True
    bio.remove_enrollment(second)
    assert bio.enumerate_enrollments() == {}
    opts = options(ctap2)
    assert (opts["uv"], opts["bioEnroll"]) == (False, False)
    assert BioEnrollment.is_supported(ctap2.get_info())


@pytest.mark.sim_args(*FP, "--enrolled-fingers", "4", "--reset-window", "off")
def test_enroll_cancel_database_full_and_reset(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)
    bio = FPBioEnrollment(ctap2, *pin_token(ctap2, PERM.BIO_ENROLL))
    before = bio.enumerate_enrollments()
    assert len(before) == 4 and all(len(t) == 2 for t in before)

    # One sample, then cancel (no token needed): the template is not stored, and its id is no longer usable.
    ctx = bio.enroll()
    assert ctx.capture() is None and ctx.remaining == 2
    abandoned = ctx.template_id
    FPBioEnrollment(ctap2, None, None).enroll_cancel()
    expect_ctap_error(ERR.INVALID_PARAMETER, bio.enroll_capture_next, abandoned)
    assert bio.enumerate_enrollments() == before

    fifth = enroll_finger(bio)
    assert fifth not in before
    assert listed_templates(bio).keys() == {*before, fifth}
    bio.set_name(fifth, "fifth")
    assert bio.enumerate_enrollments() == {**before, fifth: "fifth"}
    # The sixth: CTAP2_ERR_FP_DATABASE_FULL.
    expect_ctap_error(ERR.FP_DATABASE_FULL, bio.enroll().capture)
    assert len(bio.enumerate_enrollments()) == 5

    # authenticatorReset deletes the fingers (and the PIN).
    ctap2.reset()
    opts = options(ctap2)
    assert (opts["uv"], opts["bioEnroll"], opts["clientPin"]) == (False, False, False)
    expect_ctap_error(ERR.NOT_ALLOWED, ClientPin(ctap2).get_uv_token, PERM.GET_ASSERTION, RP_ID)
    assert uv_retries(ctap2) == MAX_UV_RETRIES


@pytest.mark.sim_args(*FP, "--presence", "deny")
def test_poor_sample_raises_capture_error(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)
    bio = FPBioEnrollment(ctap2, *pin_token(ctap2, PERM.BIO_ENROLL))
    with pytest.raises(CaptureError) as info:
        bio.enroll().capture()
    assert info.value.code == FEEDBACK.FP_POOR_QUALITY == 0x07
    # Nothing was enrolled.
    assert bio.enumerate_enrollments() == {}
    assert options(ctap2)["bioEnroll"] is False


# --------------------------------------------------------------------------
# 3. getPinUvAuthTokenUsingUvWithPermissions
# --------------------------------------------------------------------------


@pytest.mark.sim_args(*FP, "--enrolled-fingers", "1")
@pytest.mark.parametrize("protocol_cls", [PinProtocolV1, PinProtocolV2], ids=["protocol1", "protocol2"])
def test_uv_token_for_make_credential_and_get_assertion(sim, protocol_cls):
    ctap2 = Ctap2(sim.device())
    opts = options(ctap2)
    assert (opts["uv"], opts["bioEnroll"], opts["clientPin"]) == (True, True, False)
    cp = ClientPin(ctap2, protocol_cls())
    proto = cp.protocol

    seen = Keepalives()
    tok = cp.get_uv_token(PERM.MAKE_CREDENTIAL, RP_ID, on_keepalive=seen)
    assert seen.waited, "getPinUvAuthTokenUsingUvWithPermissions should read a finger"
    assert len(tok) == 32
    assert cp.get_uv_retries() == MAX_UV_RETRIES

    # The finger counted as presence: makeCredential with the token waits for nothing and sets UP and UV.
    cdh, seen = new_cdh(), Keepalives()
    att = ctap2.make_credential(cdh, RP, user("fp"), ES256_PARAMS, options={"rk": True},
                                pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=proto.VERSION,
                                on_keepalive=seen)
    assert not seen.waited, "a UV token should carry user presence"
    assert att.auth_data.flags & (FLAG.UP | FLAG.UV) == FLAG.UP | FLAG.UV
    assert_shared_batch(att.att_stmt, att.auth_data, cdh)
    cred = att.auth_data.credential_data
    # The touch spent the token's mc permission.
    cdh = new_cdh()
    expect_ctap_error(ERR.PIN_AUTH_INVALID, ctap2.make_credential, cdh, RP, user("again"), ES256_PARAMS,
                      options={"rk": True}, pin_uv_param=proto.authenticate(tok, cdh),
                      pin_uv_protocol=proto.VERSION)

    # A ga token bound to another RP does not work here.
    other = cp.get_uv_token(PERM.GET_ASSERTION, OTHER_RP["id"])
    cdh = new_cdh()
    expect_ctap_error(ERR.PIN_AUTH_INVALID, ctap2.get_assertion, RP_ID, cdh, [descriptor(cred.credential_id)],
                      pin_uv_param=proto.authenticate(other, cdh), pin_uv_protocol=proto.VERSION)

    tok = cp.get_uv_token(PERM.GET_ASSERTION, RP_ID)
    cdh, seen = new_cdh(), Keepalives()
    a = ctap2.get_assertion(RP_ID, cdh, [descriptor(cred.credential_id)],
                            pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=proto.VERSION,
                            on_keepalive=seen)
    assert not seen.waited
    assert a.auth_data.flags & (FLAG.UP | FLAG.UV) == FLAG.UP | FLAG.UV
    a.verify(cdh, cred.public_key)
    assert a.credential["id"] == cred.credential_id

    # uvBioEnroll: a UV token may carry be, and manage the fingers.
    bio = FPBioEnrollment(ctap2, proto, cp.get_uv_token(PERM.BIO_ENROLL))
    enrolled = bio.enumerate_enrollments()
    assert len(enrolled) == 1 and len(next(iter(enrolled))) == 2


@pytest.mark.sim_args(*FP, "--enrolled-fingers", "1", "--presence", "deny")
def test_uv_token_mismatch_counts_down_to_blocked_and_pin_restores(sim):
    ctap2 = Ctap2(sim.device())
    cp = ClientPin(ctap2)
    cp.set_pin(PIN)
    assert cp.get_uv_retries() == MAX_UV_RETRIES

    for left in range(MAX_UV_RETRIES - 1, 0, -1):
        seen = Keepalives()
        expect_ctap_error(ERR.UV_INVALID, cp.get_uv_token, PERM.GET_ASSERTION, RP_ID, on_keepalive=seen)
        assert seen.waited
        assert cp.get_uv_retries() == left
    # The 5th consecutive mismatch: CTAP2_ERR_UV_BLOCKED.
    expect_ctap_error(ERR.UV_BLOCKED, cp.get_uv_token, PERM.GET_ASSERTION, RP_ID)
    assert cp.get_uv_retries() == 0
    # Blocked: refused without reading a finger.
    seen = Keepalives()
    expect_ctap_error(ERR.UV_BLOCKED, cp.get_uv_token, PERM.MAKE_CREDENTIAL, RP_ID, on_keepalive=seen)
    assert not seen.waited, "a blocked sensor should not ask for a finger"
    assert cp.get_uv_retries() == 0

    # A correct PIN restores the UV attempts; a wrong one does not.
    expect_ctap_error(ERR.PIN_INVALID, cp.get_pin_token, "00000000", PERM.GET_ASSERTION, RP_ID)
    assert cp.get_uv_retries() == 0
    assert len(cp.get_pin_token(PIN, PERM.GET_ASSERTION, RP_ID)) == 32
    assert cp.get_uv_retries() == MAX_UV_RETRIES
    expect_ctap_error(ERR.UV_INVALID, cp.get_uv_token, PERM.GET_ASSERTION, RP_ID)
    assert cp.get_uv_retries() == MAX_UV_RETRIES - 1


# --------------------------------------------------------------------------
# 4. Fido2Client with the finger only
# --------------------------------------------------------------------------


@pytest.mark.sim_args(*FP, "--enrolled-fingers", "1")
def test_fido2_client_uses_the_finger_and_never_asks_for_a_pin(sim):
    dev = sim.device()
    assert options(Ctap2(dev))["clientPin"] is False
    ui = FingerOnlyInteraction()
    client = Fido2Client(dev, DefaultClientDataCollector(ORIGIN), user_interaction=ui)
    server = make_server()

    usr = PublicKeyCredentialUserEntity(id=os.urandom(32), name="finger", display_name="Finger")
    reg_options, state = server.register_begin(
        usr, resident_key_requirement=ResidentKeyRequirement.REQUIRED,
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    result = client.make_credential(reg_options.public_key)
    auth_data = server.register_complete(state, result)  # checks the attestation signature and the UV flag
    assert auth_data.is_user_verified() and auth_data.is_user_present()
    cred = auth_data.credential_data

    auth_options, state = server.authenticate_begin(user_verification=UserVerificationRequirement.REQUIRED)
    assert not auth_options.public_key.allow_credentials  # discoverable: empty allow list
    selection = client.get_assertion(auth_options.public_key)
    response = selection.get_response(0)
    server.authenticate_complete(state, [cred], response)  # raises if the signature does not verify
    assert response.raw_id == cred.credential_id
    assert response.response.user_handle == usr.id
    ad = response.response.authenticator_data
    assert ad.is_user_verified() and ad.is_user_present()

    assert ui.pin_requests == [], f"request_pin was called: {ui.pin_requests}"
    assert ui.uv_requests, "python-fido2 should have chosen built-in UV"


# --------------------------------------------------------------------------
# 5. The uv option: a finger instead of a token
# --------------------------------------------------------------------------


@pytest.mark.sim_args(*FP, "--enrolled-fingers", "1")
def test_uv_option_reads_a_finger(sim):
    ctap2 = Ctap2(sim.device())

    # Protected by the finger: a discoverable credential needs UV (a token or the uv option).
    expect_ctap_error(ERR.PUAT_REQUIRED, ctap2.make_credential, new_cdh(), RP, user("rk"), ES256_PARAMS,
                      options={"rk": True})
    # makeCredUvNotRqd: a non-discoverable one is made with a touch, without UV.
    att = ctap2.make_credential(new_cdh(), RP, user("nrk"), ES256_PARAMS)
    assert att.auth_data.flags & (FLAG.UP | FLAG.UV) == FLAG.UP

    cdh, seen = new_cdh(), Keepalives()
    att = ctap2.make_credential(cdh, RP, user("uv"), ES256_PARAMS, options={"rk": True, "uv": True},
                                on_keepalive=seen)
    assert seen.waited
    assert att.auth_data.flags & (FLAG.UP | FLAG.UV) == FLAG.UP | FLAG.UV
    assert_shared_batch(att.att_stmt, att.auth_data, cdh)
    cred = att.auth_data.credential_data

    cdh, seen = new_cdh(), Keepalives()
    a = ctap2.get_assertion(RP_ID, cdh, options={"uv": True}, on_keepalive=seen)
    assert seen.waited
    assert a.auth_data.flags & (FLAG.UP | FLAG.UV) == FLAG.UP | FLAG.UV
    assert a.credential["id"] == cred.credential_id
    a.verify(cdh, cred.public_key)

    # Without uv: presence only.
    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh, [descriptor(cred.credential_id)])
    assert a.auth_data.flags & (FLAG.UP | FLAG.UV) == FLAG.UP
    a.verify(cdh, cred.public_key)
    assert uv_retries(ctap2) == MAX_UV_RETRIES


@pytest.mark.sim_args(*FP, "--enrolled-fingers", "1")
def test_uv_option_get_assertion_reads_the_finger_before_looking_for_credentials(sim):
    """CTAP 2.1 §6.2.2: built-in UV is step 6, locating the credentials step 7 (whose credProtect filter reads
    the "uv" bit that step 6 set), so uv=true for an RP without credentials reads a finger, then answers
    CTAP2_ERR_NO_CREDENTIALS."""
    ctap2 = Ctap2(sim.device())
    seen = Keepalives()
    expect_ctap_error(ERR.NO_CREDENTIALS, ctap2.get_assertion, OTHER_RP["id"], new_cdh(), options={"uv": True},
                      on_keepalive=seen)
    assert seen.waited, "getAssertion(uv=true) answered NO_CREDENTIALS without reading a finger"


@pytest.mark.sim_args(*FP, "--enrolled-fingers", "1", "--presence", "deny")
def test_uv_option_with_a_finger_that_does_not_match(sim):
    ctap2 = Ctap2(sim.device())
    # No PIN: CTAP2_ERR_OPERATION_DENIED; the attempt is counted.
    expect_ctap_error(ERR.OPERATION_DENIED, ctap2.make_credential, new_cdh(), RP, user("u"), ES256_PARAMS,
                      options={"rk": True, "uv": True})
    after_first = uv_retries(ctap2)
    assert after_first < MAX_UV_RETRIES
    # With a PIN: CTAP2_ERR_PUAT_REQUIRED (the platform should fall back to the PIN).
    ClientPin(ctap2).set_pin(PIN)
    expect_ctap_error(ERR.PUAT_REQUIRED, ctap2.make_credential, new_cdh(), RP, user("u"), ES256_PARAMS,
                      options={"rk": True, "uv": True})
    assert uv_retries(ctap2) < after_first


# --------------------------------------------------------------------------
# 6. Without the sensor
# --------------------------------------------------------------------------


@pytest.mark.sim_args("--presence-delay", "0")
def test_without_a_sensor(sim):
    ctap2 = Ctap2(sim.device())
    info = ctap2.get_info()
    for name in ("uv", "bioEnroll", "userVerificationMgmtPreview", "uvBioEnroll", "uvAcfg"):
        assert name not in info.options, name
    assert not info.uv_modality and not info.preferred_platform_uv_attempts
    assert not BioEnrollment.is_supported(info)
    with pytest.raises(ValueError):
        FPBioEnrollment(ctap2, None, None)

    expect_ctap_error(ERR.INVALID_COMMAND, ctap2.send_cbor, Ctap2.CMD.BIO_ENROLLMENT, {0x06: True})
    expect_ctap_error(ERR.INVALID_COMMAND, ctap2.send_cbor, Ctap2.CMD.BIO_ENROLLMENT,
                      {0x01: 1, 0x02: FPBioEnrollment.CMD.GET_SENSOR_INFO})
    expect_ctap_error(ERR.INVALID_COMMAND, ctap2.send_cbor, Ctap2.CMD.BIO_ENROLLMENT_PRE, {0x06: True})
    expect_ctap_error(ERR.INVALID_SUBCOMMAND, ctap2.client_pin, 2, ClientPin.CMD.GET_UV_RETRIES)
    expect_ctap_error(ERR.INVALID_SUBCOMMAND, ClientPin(ctap2).get_uv_retries)

    expect_ctap_error(ERR.INVALID_OPTION, ctap2.make_credential, new_cdh(), RP, user("u"), ES256_PARAMS,
                      options={"uv": True})
    cred = ctap2.make_credential(new_cdh(), RP, user("rk"), ES256_PARAMS,
                                 options={"rk": True}).auth_data.credential_data
    expect_ctap_error(ERR.INVALID_OPTION, ctap2.get_assertion, RP_ID, new_cdh(),
                      [descriptor(cred.credential_id)], options={"uv": True})


# --------------------------------------------------------------------------
# 7. Persistence
# --------------------------------------------------------------------------


def test_fingers_and_uv_retries_survive_a_restart(tmp_path, start_sim):
    image = str(tmp_path / "key.img")

    def start(*extra):
        return start_sim(*FP, "--flash", image, *extra)

    def stop(s):
        code = s.close()
        assert code == 0, f"fidosim exited with {code}"

    s = start("--enrolled-fingers", "1", "--presence", "deny")
    try:
        ctap2 = Ctap2(s.device())
        cp = ClientPin(ctap2)
        for _ in range(2):
            expect_ctap_error(ERR.UV_INVALID, cp.get_uv_token, PERM.GET_ASSERTION, RP_ID)
        assert cp.get_uv_retries() == MAX_UV_RETRIES - 2
    finally:
        stop(s)

    # --enrolled-fingers only enrolls on a key without fingers: still one.
    s = start("--enrolled-fingers", "3")
    try:
        ctap2 = Ctap2(s.device())
        assert options(ctap2)["uv"] is True
        cp = ClientPin(ctap2)
        assert cp.get_uv_retries() == MAX_UV_RETRIES - 2  # persisted
        tok = cp.get_uv_token(PERM.BIO_ENROLL)
        assert cp.get_uv_retries() == MAX_UV_RETRIES  # a match restores them
        assert len(FPBioEnrollment(ctap2, cp.protocol, tok).enumerate_enrollments()) == 1
    finally:
        stop(s)
