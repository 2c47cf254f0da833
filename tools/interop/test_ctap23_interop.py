"""CTAP 2.3 (and the 2.2 features it brings that fidosim lacked), checked with python-fido2 2.x's own code.

getInfo FIDO_2_3 and members 0x18 longTouchForReset, 0x1A transportsForReset, 0x1C pinComplexityPolicyURL,
0x1E encCredStoreState (decrypted by python-fido2's Info.get_cred_store_state) and 0x1F
authenticatorConfigCommands; authenticatorConfig enableLongTouchForReset (0x04) and the long touch a reset then
needs, with its keepalives; reset refused over a transport not listed; the pinComplexityPolicy extension; and a
profile that claims an older version shows none of it.

Run:  FIDOSIM_BIN=.build/debug/fidosim python3 -m pytest -p no:cacheprovider -q tools/interop/test_ctap23_interop.py
"""

from __future__ import annotations

import threading
import time

import pytest
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2
from fido2.ctap2.config import Config
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.pin import ClientPin

from fidosim.testing import ERR, PERM, PIN, RP, RP_ID, expect_ctap_error, new_cdh, sha256, token, user

pytestmark = pytest.mark.sim_args("--presence-delay", "0")

ES256_PARAMS = [{"type": "public-key", "alg": -7}]
ENABLE_LONG_TOUCH_FOR_RESET = 0x04


def test_get_info_ctap23_members(sim):
    ctap2 = Ctap2(sim.device())
    info = ctap2.info
    assert info.versions == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1", "FIDO_2_3"]
    assert "FIDO_2_2" not in info.versions  # CTAP 2.3 defines no such string
    assert info.long_touch_for_reset is False
    assert info.transports_for_reset == ["usb"]
    assert info.authenticator_config_commands == [0x01, 0x02, 0x03, 0x04]
    assert info.pin_complexity_policy is False and info.pin_complexity_policy_url is None
    assert "pinComplexityPolicy" in info.extensions
    # No persistent token yet: nothing to encrypt encCredStoreState for... python-fido2 reads what is sent.
    raw = ctap2.send_cbor(Ctap2.CMD.GET_INFO)
    assert raw[0x18] is False and raw[0x1A] == ["usb"] and raw[0x1F] == [1, 2, 3, 4]


@pytest.mark.sim_args("--presence-delay", "0", "--pin-policy-url", "https://example.com/pin-policy",
                      "--reset-transports", "nfc")
def test_a_key_names_its_pin_policy_and_refuses_reset_over_usb_when_told(sim):
    ctap2 = Ctap2(sim.device())
    assert ctap2.info.pin_complexity_policy_url == b"https://example.com/pin-policy"
    assert ctap2.info.transports_for_reset == ["nfc"]
    expect_ctap_error(ERR.OPERATION_DENIED, ctap2.reset)


def cred_store_state(ctap2, pcmr):
    info = ctap2.get_info()
    assert info.enc_cred_store_state is not None and len(info.enc_cred_store_state) == 32
    return info.get_cred_store_state(pcmr), info.enc_cred_store_state


def make_rk(ctap2, usr):
    protocol, mc = token(ctap2, PERM.MAKE_CREDENTIAL)
    cdh = new_cdh()
    return ctap2.make_credential(
        cdh, RP, usr, ES256_PARAMS, options={"rk": True},
        pin_uv_param=protocol.authenticate(mc, cdh), pin_uv_protocol=protocol.VERSION,
    ).auth_data.credential_data.credential_id


def test_enc_cred_store_state_follows_the_discoverable_credentials(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)
    protocol, pcmr = token(ctap2, PERM.PERSISTENT_CREDENTIAL_MGMT, rp_id=None)
    empty, first = cred_store_state(ctap2, pcmr)
    assert len(empty) == 16
    again, second = cred_store_state(ctap2, pcmr)
    assert again == empty and first != second  # a fresh IV each time, the same state

    alice = user("a")
    cred_id = make_rk(ctap2, alice)
    one, _ = cred_store_state(ctap2, pcmr)
    assert one != empty
    # Read-only management (with the persistent token), a non-discoverable credential, an assertion and a power
    # cycle leave it.
    ro = CredentialManagement(ctap2, protocol, pcmr)
    assert len(ro.enumerate_creds(sha256(RP_ID.encode()))) == 1
    ctap2.make_credential(new_cdh(), RP, user("nd"), ES256_PARAMS, options={"rk": False})
    ctap2.get_assertion(RP_ID, new_cdh())
    sim.power_cycle()
    ctap2 = Ctap2(sim.device())
    assert cred_store_state(ctap2, pcmr)[0] == one

    # Updating the user, adding and deleting credentials change it.
    protocol, cm = token(ctap2, PERM.CREDENTIAL_MGMT, rp_id=None)
    CredentialManagement(ctap2, protocol, cm).update_user_info(
        {"id": cred_id, "type": "public-key"}, {"id": alice["id"], "name": "renamed"})
    renamed, _ = cred_store_state(ctap2, pcmr)
    assert renamed != one
    make_rk(ctap2, user("b"))
    two, _ = cred_store_state(ctap2, pcmr)
    assert two not in (one, renamed)
    protocol, cm = token(ctap2, PERM.CREDENTIAL_MGMT, rp_id=None)
    CredentialManagement(ctap2, protocol, cm).delete_cred({"id": cred_id, "type": "public-key"})
    after_delete, _ = cred_store_state(ctap2, pcmr)
    assert after_delete not in (one, two, renamed)


def reset_in_background(ctap2):
    statuses, outcome = [], {}

    def run():
        try:
            ctap2.reset(on_keepalive=statuses.append)
            outcome["ok"] = True
        except CtapError as e:
            outcome["error"] = e.code

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, statuses, outcome


def test_long_touch_for_reset(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)
    protocol, acfg = token(ctap2, PERM.AUTHENTICATOR_CFG, rp_id=None)
    config = Config(ctap2, protocol, acfg)
    # python-fido2 has no method for it yet: its generic call checks authenticatorConfigCommands.
    config._call(ENABLE_LONG_TOUCH_FOR_RESET)
    assert ctap2.get_info().long_touch_for_reset is True

    sim.power_cycle()  # reset only within 10 s of power-up
    ctap2 = Ctap2(sim.device())
    with sim.control() as ctl:
        ctl.presence("prompt")
        thread, statuses, outcome = reset_in_background(ctap2)
        deadline = time.monotonic() + 5
        while ctl.status().get("pending") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ctl.status()["pending"]["gesture"] == "long touch"
        short = ctl.request("touch")
        assert short["answered"] is False and "long touch" in short["reason"]
        short = ctl.request("touch", durationMs=1000)
        assert short["answered"] is False
        assert ctl.request("touch", durationMs=5000)["answered"] is True
        thread.join(10)
    assert outcome == {"ok": True}
    # UPNEEDED while the person held the key, then PROCESSING once the long touch counted.
    assert statuses[0] == 2 and statuses[-1] == 1 and set(statuses) == {1, 2}
    info = Ctap2(sim.device()).get_info()
    assert info.long_touch_for_reset is False  # reset restores the default
    assert info.options.get("clientPin") is False


def test_the_automatic_user_holds_a_long_touch_for_five_seconds(sim):
    ctap2 = Ctap2(sim.device())
    Config(ctap2)._call(ENABLE_LONG_TOUCH_FOR_RESET)  # no PIN: no token needed
    sim.power_cycle()
    ctap2 = Ctap2(sim.device())
    statuses = []
    started = time.monotonic()
    ctap2.reset(on_keepalive=statuses.append)
    assert time.monotonic() - started >= 5.0  # the key's own clock: the hold lasts 5 s; no upper bound
    assert statuses[0] == 2 and statuses[-1] == 1


@pytest.mark.sim_args("--presence-delay", "0", "--min-pin-length-rp", RP_ID)
def test_pin_complexity_policy_extension(sim):
    ctap2 = Ctap2(sim.device())
    ext = {"pinComplexityPolicy": True}

    def made(rp):
        return ctap2.make_credential(new_cdh(), rp, user("p"), ES256_PARAMS, extensions=ext).auth_data.extensions

    assert made(RP) == {"pinComplexityPolicy": False}
    assert not (made({"id": "other.example", "name": "Other"}) or {})  # an RP not allowed gets no output
    Config(ctap2).set_min_pin_length(pin_complexity_policy=True)
    assert Ctap2(sim.device()).info.pin_complexity_policy is True
    assert made(RP) == {"pinComplexityPolicy": True}
    expect_ctap_error(ERR.CBOR_UNEXPECTED_TYPE, ctap2.make_credential, new_cdh(), RP, user("p"), ES256_PARAMS,
                      extensions={"pinComplexityPolicy": 1})


@pytest.mark.sim_args("--presence-delay", "0", "--profile", "yubikey5")
def test_a_ctap21_profile_shows_none_of_it(sim):
    ctap2 = Ctap2(sim.device())
    info = ctap2.info
    assert "FIDO_2_3" not in info.versions
    raw = ctap2.send_cbor(Ctap2.CMD.GET_INFO)
    assert not {0x18, 0x1A, 0x1C, 0x1E, 0x1F} & set(raw)
    assert "pinComplexityPolicy" not in info.extensions
    expect_ctap_error(ERR.INVALID_SUBCOMMAND, ctap2.config, ENABLE_LONG_TOUCH_FOR_RESET)
    att = ctap2.make_credential(new_cdh(), RP, user("y"), ES256_PARAMS, extensions={"pinComplexityPolicy": True})
    assert not att.auth_data.extensions
