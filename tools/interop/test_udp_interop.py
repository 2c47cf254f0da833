"""python-fido2 (2.x) interop tests against `fidosim serve --transport udp`.

Run:  python3 -m pytest tools/interop -q
Binary: $FIDOSIM_BIN or <repo>/.build/debug/fidosim.
"""

from __future__ import annotations

import os

import pytest
from fido2.client import ClientError
from fido2.cose import ES256
from fido2.ctap import CtapError
from fido2.ctap1 import APDU, Ctap1
from fido2.ctap2 import Ctap2
from fido2.hid import CAPABILITY
from fido2.webauthn import ResidentKeyRequirement

from fidosim.testing import (
    ERR,
    ES256_PARAMS,
    RP,
    RP_ID,
    assert_by_id,
    assert_shared_batch,
    assert_signed,
    descriptor,
    expect_apdu_error,
    expect_ctap_error,
    make_client,
    make_cred,
    make_server,
    new_cdh,
    new_user,
    sha256,
    web_authenticate,
    web_register,
)

APP_ID = "https://example.com/appid.json"


# --------------------------------------------------------------------------
# 1. getInfo
# --------------------------------------------------------------------------


def test_get_info(sim):
    dev = sim.device()
    info = Ctap2(dev).get_info()
    assert "FIDO_2_0" in info.versions
    assert "U2F_V2" in info.versions
    assert isinstance(info.aaguid, bytes) and len(info.aaguid) == 16
    assert bytes(info.aaguid) != b"\0" * 16
    assert info.options.get("rk") is True
    assert info.options.get("up") is True
    assert info.options.get("clientPin") is False  # supported, no PIN set yet
    assert info.pin_uv_protocols == [2, 1]
    assert any(
        a.get("alg") == -7 and a.get("type") == "public-key" for a in info.algorithms
    ), info.algorithms
    assert "usb" in info.transports


# --------------------------------------------------------------------------
# 2. WebAuthn ceremony with Fido2Server/Fido2Client, packed self attestation
# --------------------------------------------------------------------------


def test_register_and_authenticate_non_discoverable(sim):
    dev = sim.device()
    server, client = make_server(), make_client(dev)[0]
    result, auth_data = web_register(
        server, client, new_user(), ResidentKeyRequirement.DISCOURAGED
    )

    # Attestation statement, checked independently of the server.
    att = result.response.attestation_object
    assert att.fmt == "packed"
    assert att.att_stmt["alg"] == -7 and len(att.att_stmt["x5c"]) == 1, "expected fidosim's shared batch"
    assert_shared_batch(att.att_stmt, att.auth_data, result.response.client_data.hash)
    cred = auth_data.credential_data
    assert cred.public_key[3] == -7
    assert cred.aaguid == Ctap2(dev).info.aaguid
    assert not auth_data.is_user_verified()

    # Non-discoverable: an empty allow list finds nothing.
    expect_ctap_error(ERR.NO_CREDENTIALS, Ctap2(dev).get_assertion, RP_ID, new_cdh())

    first = web_authenticate(server, client, [cred])
    second = web_authenticate(server, client, [cred])
    assert first.raw_id == cred.credential_id
    c1 = first.response.authenticator_data.counter
    c2 = second.response.authenticator_data.counter
    assert c2 > c1, (c1, c2)


# --------------------------------------------------------------------------
# 3. Discoverable credentials
# --------------------------------------------------------------------------


def test_discoverable_order_and_get_next(sim):
    dev = sim.device()
    server, client = make_server(), make_client(dev)[0]
    user_a, user_b = new_user("alice"), new_user("bob")
    _, ad_a = web_register(server, client, user_a, ResidentKeyRequirement.REQUIRED)
    _, ad_b = web_register(server, client, user_b, ResidentKeyRequirement.REQUIRED)
    cred_a, cred_b = ad_a.credential_data, ad_b.credential_data

    ctap2 = Ctap2(dev)
    cdh = new_cdh()
    first = ctap2.get_assertion(RP_ID, cdh)
    assert first.number_of_credentials == 2
    assert first.user["id"] == user_b.id  # most recently created first
    assert first.credential["id"] == cred_b.credential_id
    assert_signed(first, cdh, cred_b)

    second = ctap2.get_next_assertion()
    assert second.user["id"] == user_a.id
    assert second.credential["id"] == cred_a.credential_id
    assert_signed(second, cdh, cred_a)


def test_discoverable_user_fields_round_trip(sim):
    ctap2 = Ctap2(sim.device())
    other_id = os.urandom(16)
    user_id = bytes(range(256))[-64:]  # 64 bytes incl. 0xff etc.
    name = ("alice.long.name@" + "x" * 64)[:64]
    display = ("Zoë Ångström – Ω " * 20)[:200]
    assert len(name.encode()) == 64 and len(display) == 200

    make_cred(ctap2, other_id, rk=True, name="other", display_name="Other")
    _, cred = make_cred(ctap2, user_id, rk=True, name=name, display_name=display)

    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh)
    assert a.number_of_credentials == 2
    assert a.user["id"] == user_id
    # CTAP 2.1 §6.2: without user verification only the user id comes back; the stored name and
    # display name are checked byte-exact by the Swift unit tests (and by credential management later).
    assert set(a.user) == {"id"}
    assert_signed(a, cdh, cred)
    b = ctap2.get_next_assertion()
    assert b.user["id"] == other_id


def test_discoverable_same_user_replaces(sim):
    ctap2 = Ctap2(sim.device())
    id_a, id_b = os.urandom(32), os.urandom(32)
    _, old_a = make_cred(ctap2, id_a, rk=True, name="a-old")
    _, cred_b = make_cred(ctap2, id_b, rk=True, name="b")
    _, new_a = make_cred(ctap2, id_a, rk=True, name="a-new")
    assert new_a.credential_id != old_a.credential_id

    cdh = new_cdh()
    assertions = ctap2.get_assertions(RP_ID, cdh)
    assert assertions[0].number_of_credentials == 2
    assert len(assertions) == 2
    ids = [a.credential["id"] for a in assertions]
    assert ids == [new_a.credential_id, cred_b.credential_id]
    assert [a.user["id"] for a in assertions] == [id_a, id_b]
    assert old_a.credential_id not in ids
    assert_signed(assertions[0], cdh, new_a)
    assert_signed(assertions[1], cdh, cred_b)


def test_discoverable_client_flow_empty_allow_list(sim):
    dev = sim.device()
    server, client = make_server(), make_client(dev)[0]
    user = new_user("carol")
    _, auth_data = web_register(server, client, user, ResidentKeyRequirement.REQUIRED)
    cred = auth_data.credential_data

    response = web_authenticate(server, client, [cred], allow=False)
    assert response.raw_id == cred.credential_id
    assert response.response.user_handle == user.id


# --------------------------------------------------------------------------
# 4. excludeList
# --------------------------------------------------------------------------


def test_exclude_list(sim):
    ctap2 = Ctap2(sim.device())
    _, cred = make_cred(ctap2, os.urandom(16), rk=False)
    # Unknown ids in the exclude list do not block.
    make_cred(ctap2, os.urandom(16), rk=False,
              exclude=[descriptor(os.urandom(len(cred.credential_id)))])
    expect_ctap_error(
        ERR.CREDENTIAL_EXCLUDED, make_cred, ctap2, os.urandom(16), rk=False,
        exclude=[descriptor(os.urandom(40)), descriptor(cred.credential_id)],
    )


def test_exclude_list_via_client(sim):
    dev = sim.device()
    server, client = make_server(), make_client(dev)[0]
    user = new_user()
    _, auth_data = web_register(server, client, user, ResidentKeyRequirement.DISCOURAGED)
    with pytest.raises(ClientError) as info:
        web_register(server, client, user, ResidentKeyRequirement.DISCOURAGED,
                     exclude=[auth_data.credential_data])
    assert info.value.code == ClientError.ERR.DEVICE_INELIGIBLE
    assert isinstance(info.value.cause, CtapError)
    assert info.value.cause.code == ERR.CREDENTIAL_EXCLUDED


# --------------------------------------------------------------------------
# 5. Tampered / truncated credential ids
# --------------------------------------------------------------------------


def test_tampered_credential_id(sim):
    ctap2 = Ctap2(sim.device())
    _, cred = make_cred(ctap2, os.urandom(16), rk=False)
    cid = cred.credential_id
    assert_by_id(ctap2, cred)  # control: the genuine id works

    for pos in (0, len(cid) // 2, len(cid) - 1):
        bad = bytearray(cid)
        bad[pos] ^= 0x01
        expect_ctap_error(
            ERR.NO_CREDENTIALS, ctap2.get_assertion, RP_ID, new_cdh(), [descriptor(bytes(bad))]
        )
    expect_ctap_error(
        ERR.NO_CREDENTIALS, ctap2.get_assertion, RP_ID, new_cdh(), [descriptor(cid[:-1])]
    )
    # The right id for a different RP is also unknown.
    expect_ctap_error(
        ERR.NO_CREDENTIALS, ctap2.get_assertion, "other.example", new_cdh(), [descriptor(cid)]
    )


# --------------------------------------------------------------------------
# 6. uv option without built-in UV / PIN
# --------------------------------------------------------------------------


def test_uv_option_rejected(sim):
    ctap2 = Ctap2(sim.device())
    expect_ctap_error(
        ERR.INVALID_OPTION, ctap2.make_credential, new_cdh(), RP,
        {"id": os.urandom(16), "name": "u", "displayName": "U"}, ES256_PARAMS,
        options={"uv": True},
    )


# --------------------------------------------------------------------------
# 7. U2F (CTAP1) and CTAP1 key handles in CTAP2
# --------------------------------------------------------------------------


def test_u2f_register_authenticate(sim):
    dev = sim.device()
    ctap1 = Ctap1(dev)
    assert ctap1.get_version() == "U2F_V2"

    app_param = sha256(APP_ID.encode())
    client_param = new_cdh()
    reg = ctap1.register(client_param, app_param)
    assert len(reg.public_key) == 65 and reg.public_key[0] == 0x04
    reg.verify(app_param, client_param)  # cert parses; attestation signature valid

    counters = []
    for _ in range(2):
        cp = new_cdh()
        sig = ctap1.authenticate(cp, app_param, reg.key_handle)
        assert sig.user_presence & 0x01
        sig.verify(app_param, cp, reg.public_key)
        counters.append(sig.counter)
    assert counters[1] > counters[0], counters

    expect_apdu_error(
        APDU.USE_NOT_SATISFIED, ctap1.authenticate, new_cdh(), app_param,
        reg.key_handle, check_only=True,
    )
    bad = bytearray(reg.key_handle)
    bad[len(bad) // 2] ^= 0x01
    expect_apdu_error(APDU.WRONG_DATA, ctap1.authenticate, new_cdh(), app_param, bytes(bad))
    expect_apdu_error(
        APDU.WRONG_DATA, ctap1.authenticate, new_cdh(), app_param, bytes(bad), check_only=True
    )
    # A valid handle presented for another application is rejected too.
    expect_apdu_error(
        APDU.WRONG_DATA, ctap1.authenticate, new_cdh(), sha256(b"https://other.example"),
        reg.key_handle,
    )


def test_u2f_key_handle_in_ctap2(sim):
    dev = sim.device()
    ctap1 = Ctap1(dev)
    app_param = sha256(APP_ID.encode())
    reg = ctap1.register(new_cdh(), app_param)
    u2f_sig = ctap1.authenticate(new_cdh(), app_param, reg.key_handle)

    ctap2 = Ctap2(dev)
    cdh = new_cdh()
    a = ctap2.get_assertion(APP_ID, cdh, [descriptor(reg.key_handle)])
    assert a.auth_data.rp_id_hash == app_param
    assert a.auth_data.is_user_present()
    assert a.auth_data.counter > u2f_sig.counter
    key = ES256.from_ctap1(reg.public_key)
    key.verify(a.auth_data + cdh, a.signature)


# --------------------------------------------------------------------------
# 8. Power cycle keeps credentials and the counter
# --------------------------------------------------------------------------


def test_power_cycle_persists(sim):
    ctap2 = Ctap2(sim.device())
    rk_user = os.urandom(32)
    _, rk = make_cred(ctap2, rk_user, rk=True)
    _, nrk = make_cred(ctap2, os.urandom(32), rk=False)
    before_rk = assert_by_id(ctap2, rk).auth_data.counter
    before_nrk = assert_by_id(ctap2, nrk).auth_data.counter

    sim.power_cycle()
    ctap2 = Ctap2(sim.device())

    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh)  # discovered without an allow list
    assert a.user["id"] == rk_user
    assert a.number_of_credentials in (None, 1)
    assert_signed(a, cdh, rk)
    assert a.auth_data.counter > before_rk, (before_rk, a.auth_data.counter)

    after_nrk = assert_by_id(ctap2, nrk).auth_data.counter
    assert after_nrk > before_nrk, (before_nrk, after_nrk)

    # And it keeps increasing after the reboot.
    again = assert_by_id(ctap2, rk).auth_data.counter
    assert again > a.auth_data.counter


# --------------------------------------------------------------------------
# 9. authenticatorReset
# --------------------------------------------------------------------------


def test_reset_erases_credentials(sim):
    dev = sim.device()
    ctap2 = Ctap2(dev)
    _, rk = make_cred(ctap2, os.urandom(16), rk=True)
    _, nrk = make_cred(ctap2, os.urandom(16), rk=False)
    app_param = sha256(APP_ID.encode())
    reg = Ctap1(dev).register(new_cdh(), app_param)

    sim.power_cycle()  # reset only within 10 s of power-up: not counted from the key's start
    ctap2 = Ctap2(sim.device())
    ctap2.reset()

    expect_ctap_error(ERR.NO_CREDENTIALS, ctap2.get_assertion, RP_ID, new_cdh())
    for cred in (rk, nrk):
        expect_ctap_error(
            ERR.NO_CREDENTIALS, ctap2.get_assertion, RP_ID, new_cdh(),
            [descriptor(cred.credential_id)],
        )
    expect_apdu_error(
        APDU.WRONG_DATA, Ctap1(sim.device()).authenticate, new_cdh(), app_param,
        reg.key_handle, check_only=True,
    )
    # Still a working key afterwards.
    _, fresh = make_cred(ctap2, os.urandom(16), rk=False)
    assert_by_id(ctap2, fresh)


@pytest.mark.sim_args("--presence", "deny")
def test_presence_denied(sim):
    dev = sim.device()
    ctap2 = Ctap2(dev)
    expect_ctap_error(ERR.OPERATION_DENIED, ctap2.reset)
    expect_ctap_error(
        ERR.OPERATION_DENIED, ctap2.make_credential, new_cdh(), RP,
        {"id": os.urandom(16), "name": "u", "displayName": "U"}, ES256_PARAMS,
    )
    # U2F: test-of-user-presence not satisfied.
    expect_apdu_error(
        APDU.USE_NOT_SATISFIED, Ctap1(dev).register, new_cdh(), sha256(APP_ID.encode())
    )


# --------------------------------------------------------------------------
# 10. authenticatorSelection
# --------------------------------------------------------------------------


def test_selection(sim):
    ctap2 = Ctap2(sim.device())
    assert ctap2.selection() is None


# --------------------------------------------------------------------------
# 11. CTAPHID transport
# --------------------------------------------------------------------------


def test_ctaphid_ping_wink_capabilities(sim):
    dev = sim.device()
    assert dev.version == 2  # CTAPHID protocol version
    assert dev.capabilities & CAPABILITY.CBOR
    assert dev.capabilities & CAPABILITY.WINK
    assert not dev.capabilities & CAPABILITY.NMSG  # U2F over CTAPHID_MSG is offered

    # Over uhid the kernel queues at most 32 reports for the simulator and drops the rest (uhid has no flow
    # control), and python-fido2 writes a message without pausing: keep the echo within 31 reports there.
    size = 7000 if os.environ.get("FIDOSIM_TRANSPORT", "udp") == "udp" else 57 + 30 * 59
    data = os.urandom(size)
    assert dev.ping(data) == data
    assert dev.ping(b"") == b""
    dev.wink()
    assert dev.ping(b"still alive") == b"still alive"  # channel usable after WINK
