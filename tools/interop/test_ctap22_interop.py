"""CTAP 2.2 features, checked with python-fido2 2.x's own code.

Persistent pinUvAuthToken (pcmr) and read-only credential management, the encrypted device identifier
(getInfo 0x19), hmac-secret-mc (PRF results at registration), thirdPartyPayment, and the new getInfo
members (0x16 attestationFormats, 0x1D maxPINLength). Everything on the client side (key agreement,
PIN protocols, PRF salts, identifier decryption, payment client data) comes from python-fido2.

Run:  FIDOSIM_BIN=.build/debug/fidosim python3 -m pytest -p no:cacheprovider -q tools/interop/test_ctap22_interop.py
"""

from __future__ import annotations

import os

import pytest
from fido2.client import DefaultClientDataCollector, Fido2Client
from fido2.ctap2 import Ctap2
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.extensions import HmacSecretExtension, ThirdPartyPaymentExtension, _prf_salt
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.payment import PaymentClientDataCollector
from fido2.webauthn import (
    AuthenticatorAttachment,
    PublicKeyCredentialDescriptor,
    PublicKeyCredentialRequestOptions,
    PublicKeyCredentialType,
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
    PinInteraction,
    descriptor,
    expect_ctap_error,
    make_server,
    new_cdh,
    register,
    sha256,
    token,
    user,
    web_user,
)

# No 200 ms wait for each simulated touch.
pytestmark = pytest.mark.sim_args("--presence-delay", "0")

PCMR = PERM.PERSISTENT_CREDENTIAL_MGMT
CM = CredentialManagement
OTHER_RP = {"id": "other.example", "name": "Other"}
ES256_PARAMS = [{"type": "public-key", "alg": -7}]
NEW_PIN = "87654321"


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def persistent(ctap2: Ctap2, protocol=None, pin: str = PIN):
    """(protocol, persistentPinUvAuthToken): permissions exactly pcmr, no RP ID."""
    return token(ctap2, PCMR, None, protocol, pin)


def make_cred_uv(ctap2: Ctap2, usr: dict, *, rp=RP, rk=True, extensions=None):
    proto, tok = token(ctap2, PERM.MAKE_CREDENTIAL, rp["id"])
    cdh = new_cdh()
    att = ctap2.make_credential(
        cdh, rp, usr, ES256_PARAMS, extensions=extensions, options={"rk": rk},
        pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=proto.VERSION,
    )
    assert att.auth_data.is_user_verified()
    return att


def get_assertion_uv(ctap2: Ctap2, allow=None, extensions=None, rp_id=RP_ID):
    proto, tok = token(ctap2, PERM.GET_ASSERTION, rp_id)
    cdh = new_cdh()
    return ctap2.get_assertion(
        rp_id, cdh, allow, extensions=extensions,
        pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=proto.VERSION,
    )


def identifier(ctap2: Ctap2, persistent_token: bytes) -> bytes:
    """The device identifier, decrypted by python-fido2 from a fresh getInfo."""
    info = ctap2.get_info()
    assert info.enc_identifier is not None, "getInfo has no encIdentifier (0x19)"
    ident = info.get_identifier(persistent_token)
    assert ident is not None and len(ident) == 16
    return ident


def hmac_secret_input(ctap2: Ctap2, protocol, salts: list[bytes]):
    """An hmac-secret / hmac-secret-mc input built with python-fido2's key agreement: (input, shared)."""
    key_agreement, shared = ClientPin(ctap2, protocol)._get_shared_secret()
    salt_enc = protocol.encrypt(shared, b"".join(salts))
    return {1: key_agreement, 2: salt_enc, 3: protocol.authenticate(shared, salt_enc), 4: protocol.VERSION}, shared


def prf_assert(server, client, cred, uv, values):
    options, state = server.authenticate_begin([cred], user_verification=uv,
                                               extensions={"prf": {"eval": values}})
    response = client.get_assertion(options.public_key).get_response(0)
    server.authenticate_complete(state, [cred], response)
    ad = response.response.authenticator_data
    assert ad.is_user_verified() == (uv == UserVerificationRequirement.REQUIRED)
    return response.client_extension_results.prf.results


# --------------------------------------------------------------------------
# getInfo
# --------------------------------------------------------------------------


def test_get_info_ctap22_members(sim):
    ctap2 = Ctap2(sim.device())
    info = ctap2.get_info()
    assert info.versions == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1", "FIDO_2_3"]
    assert info.attestation_formats == ["packed"]
    assert info.max_pin_length == 63
    assert info.options.get("perCredMgmtRO") is True
    assert CredentialManagement.is_readonly_supported(info)
    assert {"hmac-secret", "hmac-secret-mc", "thirdPartyPayment"} <= set(info.extensions)
    assert info.enc_identifier is not None and len(info.enc_identifier) == 32  # 16-byte IV + one AES block

    # python-fido2 fills in defaults (["packed"], 63) for absent members: check they are really sent.
    raw = ctap2.send_cbor(Ctap2.CMD.GET_INFO)
    assert raw.get(0x16) == ["packed"]  # "none" is implied and must be omitted (CTAP 2.2 §6.4)
    assert raw.get(0x1D) == 63
    assert isinstance(raw.get(0x19), bytes) and len(raw[0x19]) == 32

    # "none" is implied, so attestationFormatsPreference (0x0B) ["none"] gives a "none" attestation;
    # ["packed"] (and no preference) a packed one.
    def mc_raw(pref):
        req = {1: new_cdh(), 2: RP, 3: user("fmt"), 4: ES256_PARAMS}
        if pref is not None:
            req[0x0B] = pref
        return ctap2.send_cbor(Ctap2.CMD.MAKE_CREDENTIAL, req)

    r = mc_raw(["none"])
    assert (r[1], r[3]) == ("none", {})
    assert mc_raw(["packed"])[1] == "packed"
    assert mc_raw(None)[1] == "packed"


# --------------------------------------------------------------------------
# persistent pinUvAuthToken and the device identifier
# --------------------------------------------------------------------------


def test_persistent_token_gives_read_only_credential_management(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)
    alice, bob, carol = user("alice"), user("bob"), user("carol")
    att_a = make_cred_uv(ctap2, alice)
    make_cred_uv(ctap2, bob, extensions={"credProtect": 2})
    att_c = make_cred_uv(ctap2, carol, rp=OTHER_RP)

    # pcmr only comes alone.
    cp = ClientPin(ctap2)
    for refused in (PCMR | PERM.CREDENTIAL_MGMT, PCMR | PERM.GET_ASSERTION):
        expect_ctap_error(ERR.UNAUTHORIZED_PERMISSION, cp.get_pin_token, PIN, refused, None)

    proto, ptok = persistent(ctap2)
    assert len(ptok) == 32
    assert persistent(ctap2)[1] == ptok, "the persistent token is the same on every request"
    cm = CredentialManagement(ctap2, proto, ptok)

    meta = cm.get_metadata()
    assert meta[CM.RESULT.EXISTING_CRED_COUNT] == 3
    rps = cm.enumerate_rps()
    assert {r[CM.RESULT.RP]["id"] for r in rps} == {RP_ID, OTHER_RP["id"]}
    listed = {e[CM.RESULT.USER]["id"]: e for e in cm.enumerate_creds(sha256(RP_ID.encode()))}
    assert set(listed) == {alice["id"], bob["id"]}
    assert listed[alice["id"]][CM.RESULT.CREDENTIAL_ID]["id"] == att_a.auth_data.credential_data.credential_id
    assert listed[bob["id"]][CM.RESULT.CRED_PROTECT] == 2

    # Read-only: no delete, no update.
    cred_a = descriptor(att_a.auth_data.credential_data.credential_id)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, cm.delete_cred, cred_a)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, cm.update_user_info, cred_a, {"id": alice["id"], "name": "x"})
    assert cm.get_metadata()[CM.RESULT.EXISTING_CRED_COUNT] == 3

    # Not a makeCredential / getAssertion token.
    cdh = new_cdh()
    expect_ctap_error(ERR.PIN_AUTH_INVALID, ctap2.make_credential, cdh, RP, user("p"), ES256_PARAMS,
                      options={"rk": True}, pin_uv_param=proto.authenticate(ptok, cdh),
                      pin_uv_protocol=proto.VERSION)
    cdh = new_cdh()
    expect_ctap_error(ERR.PIN_AUTH_INVALID, ctap2.get_assertion, RP_ID, cdh, None,
                      pin_uv_param=proto.authenticate(ptok, cdh), pin_uv_protocol=proto.VERSION)

    # Regular tokens come and go (each new one ends the last); the persistent one stays usable.
    a = get_assertion_uv(ctap2)
    assert a.auth_data.is_user_verified()
    cm_proto, cm_tok = token(ctap2, PERM.CREDENTIAL_MGMT, None)
    CredentialManagement(ctap2, cm_proto, cm_tok).delete_cred(
        descriptor(att_c.auth_data.credential_data.credential_id))
    assert cm.get_metadata()[CM.RESULT.EXISTING_CRED_COUNT] == 2
    assert [r[CM.RESULT.RP]["id"] for r in cm.enumerate_rps()] == [RP_ID]

    # Under PIN protocol 1 too.
    p1, ptok1 = persistent(ctap2, PinProtocolV1())
    assert CredentialManagement(ctap2, p1, ptok1).get_metadata()[CM.RESULT.EXISTING_CRED_COUNT] == 2


def test_persistent_token_and_identifier_survive_power_cycles_and_flash_restarts(tmp_path, image_key):
    image = tmp_path / "key.img"

    def count(ctap2, proto, tok):
        return CredentialManagement(ctap2, proto, tok).get_metadata()[CM.RESULT.EXISTING_CRED_COUNT]

    s = image_key(image)
    try:
        ctap2 = Ctap2(s.device())
        ClientPin(ctap2).set_pin(PIN)
        make_cred_uv(ctap2, user("alice"))
        proto, ptok = persistent(ctap2)
        cm_proto, cm_tok = token(ctap2, PERM.CREDENTIAL_MGMT, None)
        ident = identifier(ctap2, ptok)
        assert count(ctap2, proto, ptok) == 1

        s.power_cycle()
        ctap2 = Ctap2(s.device())
        # An ordinary token ends with the power; the persistent one does not.
        expect_ctap_error(ERR.PIN_AUTH_INVALID, CredentialManagement(ctap2, cm_proto, cm_tok).get_metadata)
        assert count(ctap2, proto, ptok) == 1
        assert identifier(ctap2, ptok) == ident
        assert persistent(ctap2)[1] == ptok
    finally:
        assert s.close() == 0

    s = image_key(image)
    try:
        ctap2 = Ctap2(s.device())
        assert count(ctap2, proto, ptok) == 1
        assert identifier(ctap2, ptok) == ident
        assert persistent(ctap2)[1] == ptok
    finally:
        assert s.close() == 0


def test_change_pin_and_reset_replace_persistent_token(sim):
    ctap2 = Ctap2(sim.device())
    cp = ClientPin(ctap2)
    cp.set_pin(PIN)
    make_cred_uv(ctap2, user("alice"))
    proto, p1 = persistent(ctap2)
    ident = identifier(ctap2, p1)

    cp.change_pin(PIN, NEW_PIN)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, CredentialManagement(ctap2, proto, p1).get_metadata)
    proto, p2 = persistent(ctap2, pin=NEW_PIN)
    assert p2 != p1
    assert CredentialManagement(ctap2, proto, p2).get_metadata()[CM.RESULT.EXISTING_CRED_COUNT] == 1
    assert identifier(ctap2, p2) == ident, "changePIN must not change the device identifier"
    assert ctap2.get_info().get_identifier(p1) != ident  # the old token no longer decrypts it

    sim.power_cycle()  # reset only within 10 s of power-up
    ctap2 = Ctap2(sim.device())
    ctap2.reset()
    ClientPin(ctap2).set_pin(PIN)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, CredentialManagement(ctap2, proto, p2).get_metadata)
    proto, p3 = persistent(ctap2)
    assert p3 not in (p1, p2)
    assert CredentialManagement(ctap2, proto, p3).get_metadata()[CM.RESULT.EXISTING_CRED_COUNT] == 0
    new_ident = identifier(ctap2, p3)
    assert new_ident != ident, "reset must give the device a new identifier"
    sim.power_cycle()
    assert identifier(Ctap2(sim.device()), p3) == new_ident


# --------------------------------------------------------------------------
# hmac-secret-mc
# --------------------------------------------------------------------------


def test_prf_at_registration_without_pin(sim):
    dev = sim.device()
    server = make_server(attestation="none")
    ui = PinInteraction(None)
    client = Fido2Client(dev, DefaultClientDataCollector(ORIGIN), user_interaction=ui)
    first, second = b"first PRF input", b"second PRF input"
    no_uv = UserVerificationRequirement.DISCOURAGED

    result, auth_data = register(server, client, web_user("prf"), rk=ResidentKeyRequirement.DISCOURAGED,
                                 uv=no_uv, extensions={"prf": {"eval": {"first": first, "second": second}}})
    assert ui.requests == []
    assert not auth_data.is_user_verified()
    assert auth_data.extensions.get("hmac-secret") is True
    enc = auth_data.extensions.get("hmac-secret-mc")
    assert isinstance(enc, bytes) and len(enc) == 16 + 64  # PIN protocol 2: IV + two outputs
    prf = result.client_extension_results.prf
    assert prf.enabled is True
    assert prf.results is not None, "no PRF results at registration"
    assert len(prf.results.first) == 32 and len(prf.results.second) == 32
    assert prf.results.first != prf.results.second

    cred = auth_data.credential_data
    later = prf_assert(server, client, cred, no_uv, {"first": first, "second": second})
    assert (later.first, later.second) == (prf.results.first, prf.results.second)
    assert prf_assert(server, client, cred, no_uv, {"first": b"other"}).first != prf.results.first


def test_prf_at_registration_with_pin_and_raw_protocol_1(sim):
    dev = sim.device()
    ctap2 = Ctap2(dev)
    ClientPin(ctap2).set_pin(PIN)
    server = make_server(attestation="none")
    client = Fido2Client(dev, DefaultClientDataCollector(ORIGIN), user_interaction=PinInteraction())
    uv, no_uv = UserVerificationRequirement.REQUIRED, UserVerificationRequirement.DISCOURAGED
    first = b"PRF input with UV"

    result, auth_data = register(server, client, web_user("prf-uv"), extensions={"prf": {"eval": {"first": first}}})
    assert auth_data.is_user_verified()
    assert len(auth_data.extensions.get("hmac-secret-mc", b"")) == 16 + 32
    at_mc = result.client_extension_results.prf.results
    assert at_mc is not None and len(at_mc.first) == 32 and not at_mc.second
    cred = auth_data.credential_data
    # Made with UV: the UV secret (CredRandomWithUV), as a UV assertion gives; without UV it differs.
    assert prf_assert(server, client, cred, uv, {"first": first}).first == at_mc.first
    assert prf_assert(server, client, cred, no_uv, {"first": first}).first != at_mc.first

    # Raw, PIN protocol 1, no token (non-discoverable, makeCredUvNotRqd): the no-UV secrets.
    p1 = PinProtocolV1()
    salts = [_prf_salt(b"raw one"), _prf_salt(b"raw two")]
    mc_in, shared = hmac_secret_input(ctap2, p1, salts)
    att = ctap2.make_credential(new_cdh(), RP, user("raw"), ES256_PARAMS, options={"rk": False},
                                extensions={"hmac-secret": True, "hmac-secret-mc": mc_in})
    assert not att.auth_data.is_user_verified()
    assert att.auth_data.extensions.get("hmac-secret") is True
    enc = att.auth_data.extensions.get("hmac-secret-mc")
    assert isinstance(enc, bytes) and len(enc) == 64  # protocol 1: no IV
    at_mc_raw = p1.decrypt(shared, enc)
    raw_cred = att.auth_data.credential_data
    ga_in, shared = hmac_secret_input(ctap2, p1, salts)
    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh, [descriptor(raw_cred.credential_id)], extensions={"hmac-secret": ga_in})
    a.verify(cdh, raw_cred.public_key)
    assert p1.decrypt(shared, a.auth_data.extensions["hmac-secret"]) == at_mc_raw

    # hmac-secret-mc with a saltAuth that does not verify: refused (as for hmac-secret in getAssertion).
    bad, _ = hmac_secret_input(ctap2, PinProtocolV2(), salts[:1])
    bad[3] = bytes(b ^ 0xFF for b in bad[3])
    expect_ctap_error(ERR.PIN_AUTH_INVALID, ctap2.make_credential, new_cdh(), RP, user("bad"), ES256_PARAMS,
                      options={"rk": False}, extensions={"hmac-secret": True, "hmac-secret-mc": bad})


# --------------------------------------------------------------------------
# thirdPartyPayment
# --------------------------------------------------------------------------


def test_third_party_payment_raw_and_credential_management(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)
    pay_user, plain_user = user("pay"), user("plain")
    pay = make_cred_uv(ctap2, pay_user, extensions={"thirdPartyPayment": True})
    assert pay.auth_data.extensions == {"thirdPartyPayment": True}
    plain = make_cred_uv(ctap2, plain_user)
    assert "thirdPartyPayment" not in (plain.auth_data.extensions or {})
    pay_id = pay.auth_data.credential_data.credential_id
    plain_id = plain.auth_data.credential_data.credential_id

    # getAssertion: asked for -> true/false per credential; not asked for -> no output.
    for cred_id, expected in ((pay_id, True), (plain_id, False)):
        a = get_assertion_uv(ctap2, [descriptor(cred_id)], extensions={"thirdPartyPayment": True})
        assert a.auth_data.extensions == {"thirdPartyPayment": expected}, cred_id.hex()
        a = get_assertion_uv(ctap2, [descriptor(cred_id)])
        assert "thirdPartyPayment" not in (a.auth_data.extensions or {})
    # Without UV (and no allow list) as well: the flag belongs to the credential.
    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh, [descriptor(pay_id)], extensions={"thirdPartyPayment": True})
    assert not a.auth_data.is_user_verified()
    assert a.auth_data.extensions == {"thirdPartyPayment": True}
    a.verify(cdh, pay.auth_data.credential_data.public_key)

    # Credential management (with a cm token and with the persistent token) reports it (0x0C).
    for proto, tok in (token(ctap2, PERM.CREDENTIAL_MGMT, None), persistent(ctap2)):
        entries = CredentialManagement(ctap2, proto, tok).enumerate_creds(sha256(RP_ID.encode()))
        by_user = {e[CM.RESULT.USER]["id"]: e for e in entries}
        assert by_user[pay_user["id"]].get(CM.RESULT.THIRD_PARTY_PAYMENT) is True
        assert by_user[plain_user["id"]].get(CM.RESULT.THIRD_PARTY_PAYMENT) is False


def test_payment_extension_with_fido2_client(sim):
    dev = sim.device()
    ClientPin(Ctap2(dev)).set_pin(PIN)
    server = make_server(attestation="none")
    client = Fido2Client(dev, PaymentClientDataCollector(ORIGIN), user_interaction=PinInteraction(),
                         extensions=[ThirdPartyPaymentExtension(), HmacSecretExtension()])

    # Registration: WebAuthn "payment" extension with isPayment -> CTAP thirdPartyPayment true.
    _, auth_data = register(server, client, web_user("payer"), extensions={"payment": {"isPayment": True}},
                            attachment=AuthenticatorAttachment.CROSS_PLATFORM)
    assert auth_data.extensions == {"thirdPartyPayment": True}
    cred = auth_data.credential_data
    _, plain_data = register(server, client, web_user("plain"))
    assert not plain_data.extensions
    plain = plain_data.credential_data

    payment = {
        "isPayment": True, "rpId": RP_ID, "topOrigin": "https://merchant.example",
        "payeeOrigin": "https://merchant.example", "total": {"currency": "EUR", "value": "12.34"},
        "instrument": {"displayName": "Card 1234", "icon": "https://example.com/card.png"},
    }
    for c, expected in ((cred, True), (plain, False)):
        options = PublicKeyCredentialRequestOptions(
            challenge=os.urandom(32), rp_id=RP_ID,
            allow_credentials=[PublicKeyCredentialDescriptor(type=PublicKeyCredentialType.PUBLIC_KEY,
                                                             id=c.credential_id)],
            user_verification=UserVerificationRequirement.REQUIRED, extensions={"payment": payment},
        )
        response = client.get_assertion(options).get_response(0)
        client_data = response.response.client_data
        assert client_data.type == "payment.get"
        assert client_data.challenge == options.challenge
        ad = response.response.authenticator_data
        assert ad.rp_id_hash == sha256(RP_ID.encode())
        assert ad.is_user_verified()
        assert ad.extensions == {"thirdPartyPayment": expected}
        c.public_key.verify(bytes(ad) + client_data.hash, response.response.signature)


# --------------------------------------------------------------------------
# Enterprise attestation (CTAP 2.1 §6.1.2 step 9), checked with python-fido2's packed verifier and
# the `cryptography` package's X.509 parser
# --------------------------------------------------------------------------


@pytest.mark.sim_args("--presence-delay", "0", "--ep-rp", "corp.example")
def test_enterprise_attestation(sim):
    from cryptography import x509
    from fido2.attestation import PackedAttestation
    from fido2.ctap2.config import Config

    ctap2 = Ctap2(sim.device())
    # No attestation certificate: no enterprise attestation, and serve said why.
    assert "ep" not in ctap2.info.options
    assert "--ep-rp: this key has no batch attestation" in sim.stderr()
    expect_ctap_error(ERR.INVALID_PARAMETER, Config(ctap2).enable_enterprise_attestation)
    root = x509.load_pem_x509_certificate(sim.provision_attestation())
    ctap2 = Ctap2(sim.device())
    assert ctap2.info.options.get("ep") is False
    expect_ctap_error(ERR.INVALID_PARAMETER, ctap2.make_credential, new_cdh(), RP, user("a"), ES256_PARAMS,
                      enterprise_attestation=2)
    Config(ctap2).enable_enterprise_attestation()
    assert Ctap2(sim.device()).info.options.get("ep") is True
    expect_ctap_error(ERR.INVALID_OPTION, ctap2.make_credential, new_cdh(), RP, user("a"), ES256_PARAMS,
                      enterprise_attestation=3)

    certs, batch = [], []
    for rp, mode, expected in (({"id": "corp.example"}, 1, True), (RP, 1, False), (RP, 2, True)):
        cdh = new_cdh()
        att = ctap2.make_credential(cdh, rp, user("e"), ES256_PARAMS, enterprise_attestation=mode)
        assert bool(att.ep_att) is expected, (rp, mode)
        # python-fido2's own packed verifier: signature by the certificate's key, the certificate rules.
        result = PackedAttestation().verify(att.att_stmt, att.auth_data, cdh)
        assert result.trust_path and result.trust_path[0] == att.att_stmt["x5c"][0]
        cert = x509.load_der_x509_certificate(att.att_stmt["x5c"][0])
        # Every attestation chains to the provisioned root (OpenSSL through cryptography checks the signature).
        cert.verify_directly_issued_by(root)
        if not expected:
            batch.append(att.att_stmt["x5c"][0])
            continue
        cn = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
        assert cn.startswith("fidosim enterprise attestation "), cn
        ou = cert.subject.get_attributes_for_oid(x509.NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value
        assert ou == "Authenticator Attestation"
        assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
        aaguid_ext = cert.extensions.get_extension_for_oid(x509.ObjectIdentifier("1.3.6.1.4.1.45724.1.1.4"))
        assert aaguid_ext.value.value[2:] == bytes(att.auth_data.credential_data.aaguid)
        certs.append(att.att_stmt["x5c"][0])
    assert certs[0] == certs[1]  # one enterprise attestation key per device
    assert batch[0] != certs[0]  # the usual attestation is the batch leaf, which names no device


def test_pin_complexity_policy_with_python_fido2_config(sim):
    from fido2.ctap2.config import Config

    ctap2 = Ctap2(sim.device())
    assert ctap2.info.pin_complexity_policy is False
    Config(ctap2).set_min_pin_length(pin_complexity_policy=True)
    assert Ctap2(sim.device()).info.pin_complexity_policy is True
    cp = ClientPin(ctap2)
    for simple in ("1111", "12345678", "87654321", "abcdef"):
        expect_ctap_error(ERR.PIN_POLICY_VIOLATION, cp.set_pin, simple)
    cp.set_pin("13572468")
    expect_ctap_error(ERR.PIN_POLICY_VIOLATION, cp.change_pin, "13572468", "2222")
    cp.change_pin("13572468", "24681357")
    assert len(cp.get_pin_token("24681357", PERM.GET_ASSERTION, RP_ID)) == 32
