"""CTAP 2.1 credential management over both PIN protocols, checked with python-fido2's CredentialManagement.

Everything on the client side comes from python-fido2 2.x and `cryptography`, not from the device.

Run:  FIDOSIM_BIN=.build/debug/fidosim python3 -m pytest -p no:cacheprovider -q tools/interop/test_credman_interop.py
"""

from __future__ import annotations

import os
import struct

import pytest
from fido2 import cbor
from fido2.ctap2 import Ctap2
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.pin import ClientPin

from fidosim.testing import (
    CM,
    EDDSA_PARAMS,
    ERR,
    OTHER_RP,
    PERM,
    PIN,
    PROTOCOL_IDS,
    PROTOCOLS,
    RP_ID,
    descriptor,
    expect_ctap_error,
    get_assertion_uv,
    make_cred_uv,
    new_cdh,
    sha256,
    token,
    user,
)

# No 200 ms wait for each simulated touch: keeps the file fast. Tests with their own sim_args repeat it.
pytestmark = pytest.mark.sim_args("--presence-delay", "0")

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
