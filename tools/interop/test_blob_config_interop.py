"""CTAP 2.1 authenticatorLargeBlobs (0x0C) and authenticatorConfig (0x0D), checked with python-fido2's own code.

The large-blob array is read and written by python-fido2's `LargeBlobs` (which does the CBOR, the truncated SHA-256
checksum, the per-blob AES-GCM + DEFLATE and the pinUvAuthParam over 32x0xff || 0x0c 0x00 || offset || SHA-256(set));
configuration goes through its `Config`; the WebAuthn largeBlob and minPinLength extensions go through `Fido2Client`,
and the assertions through `Fido2Server`. Nothing on the client side comes from the device.

Run:  FIDOSIM_BIN=.build/debug/fidosim python3 -m pytest -p no:cacheprovider -q \\
          tools/interop/test_blob_config_interop.py
"""

from __future__ import annotations

import os

import pytest
from fido2 import cbor
from fido2.client import ClientError
from fido2.ctap import CtapError
from fido2.ctap1 import Ctap1
from fido2.ctap2 import Ctap2
from fido2.ctap2.blob import LargeBlobs
from fido2.ctap2.config import Config
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.webauthn import ResidentKeyRequirement, UserVerificationRequirement

from fidosim.testing import (
    ERR,
    PERM,
    PIN,
    RP,
    RP_ID,
    authenticate,
    descriptor,
    expect_apdu_error,
    expect_ctap_error,
    make_client,
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

OTHER_RP = {"id": "other.example", "name": "Other"}
ES256_PARAMS = [{"type": "public-key", "alg": -7}]
NEW_PIN = "87654321"
SW_COMMAND_NOT_ALLOWED = 0x6986  # ISO 7816 "command not allowed": U2F while alwaysUv is on
NO_UV = UserVerificationRequirement.DISCOURAGED


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


# The serialized large-blob array of a fresh key: the empty CBOR array 0x80 and left(SHA-256(0x80), 16).
EMPTY_ARRAY = b"\x80" + sha256(b"\x80")[:16]


def raw_array(ctap2: Ctap2) -> bytes:
    """The whole serialized large-blob array, read with raw authenticatorLargeBlobs(get) fragments."""
    step = ctap2.info.max_msg_size - 64
    out, offset = b"", 0
    while True:
        fragment = ctap2.large_blobs(offset, get=step)[1]
        out += fragment
        if len(fragment) < step:
            return out
        offset += step


def signed_write(ctap2: Ctap2, offset: int, fragment: bytes, length: int | None, auth=None):
    """One authenticatorLargeBlobs(set) fragment; `auth` = (protocol, token) signs it like python-fido2 does."""
    kwargs = {}
    if auth is not None:
        proto, tok = auth
        msg = b"\xff" * 32 + b"\x0c\x00" + offset.to_bytes(4, "little") + sha256(fragment)
        kwargs = {"pin_uv_param": proto.authenticate(tok, msg), "pin_uv_protocol": proto.VERSION}
    return ctap2.large_blobs(offset, set=fragment, length=length, **kwargs)


def min_pin_length_output(ctap2: Ctap2, rp=RP, auth=None):
    """makeCredential with the minPinLength extension; the extension output (None if absent)."""
    kwargs = {}
    cdh = new_cdh()
    if auth is not None:
        proto, tok = auth
        kwargs = {"pin_uv_param": proto.authenticate(tok, cdh), "pin_uv_protocol": proto.VERSION}
    att = ctap2.make_credential(cdh, rp, user("mpl"), ES256_PARAMS, extensions={"minPinLength": True}, **kwargs)
    return (att.auth_data.extensions or {}).get("minPinLength")


# --------------------------------------------------------------------------
# 1. authenticatorLargeBlobs through fido2.ctap2.blob.LargeBlobs
# --------------------------------------------------------------------------


def test_get_info_advertises_large_blobs_and_config(sim):
    info = Ctap2(sim.device()).get_info()
    assert LargeBlobs.is_supported(info)
    assert Config.is_supported(info)
    assert info.max_large_blob == 4096
    assert info.options.get("largeBlobs") is True
    assert info.options.get("authnrCfg") is True
    assert info.options.get("alwaysUv") is False
    assert info.options.get("setMinPINLength") is True
    assert info.options.get("makeCredUvNotRqd") is True
    assert "ep" not in info.options  # no attestation certificate: no enterprise attestation (see test_ctap22)
    assert info.max_rpids_for_min_pin == 8
    assert info.force_pin_change is False
    assert info.min_pin_length == 4


def test_large_blobs_without_pin_round_trip_and_power_cycle(sim):
    ctap2 = Ctap2(sim.device())
    lb = LargeBlobs(ctap2)
    assert lb.max_fragment_length == ctap2.info.max_msg_size - 64
    assert lb.read_blob_array() == []
    assert raw_array(ctap2) == EMPTY_ARRAY

    k1, k2, k3 = os.urandom(32), os.urandom(32), os.urandom(32)
    assert lb.get_blob(k1) is None
    lb.put_blob(k1, b"first blob")
    assert lb.get_blob(k1) == b"first blob"
    assert len(lb.read_blob_array()) == 1

    # ~3000 bytes of random data: DEFLATE cannot shrink it, so the array really is that big.
    big = os.urandom(3000)
    lb.put_blob(k2, big)
    lb.put_blob(k3, b"third")
    assert len(lb.read_blob_array()) == 3
    assert len(raw_array(ctap2)) > 3000
    assert (lb.get_blob(k1), lb.get_blob(k2), lb.get_blob(k3)) == (b"first blob", big, b"third")
    assert lb.get_blob(os.urandom(32)) is None  # no entry decrypts under an unknown key

    # Replacing one blob leaves the others alone; so does deleting one.
    lb.put_blob(k1, b"first blob, v2")
    assert len(lb.read_blob_array()) == 3
    lb.delete_blob(k3)
    assert lb.get_blob(k3) is None
    assert (lb.get_blob(k1), lb.get_blob(k2)) == (b"first blob, v2", big)
    before = raw_array(ctap2)

    sim.power_cycle()
    ctap2 = Ctap2(sim.device())
    lb = LargeBlobs(ctap2)
    assert raw_array(ctap2) == before, "the large-blob array must survive a power cycle"
    assert (lb.get_blob(k1), lb.get_blob(k2), lb.get_blob(k3)) == (b"first blob, v2", big, None)


def test_large_blobs_fragmented_write_and_limits(sim):
    ctap2 = Ctap2(sim.device())
    lb = LargeBlobs(ctap2)
    key, other = os.urandom(32), os.urandom(32)
    data = os.urandom(2500)

    # python-fido2 splits writes and reads at max_fragment_length: force several fragments each way.
    lb.max_fragment_length = 700
    lb.put_blob(key, data)
    lb.put_blob(other, b"small")
    assert lb.get_blob(key) == data and lb.get_blob(other) == b"small"
    lb.max_fragment_length = ctap2.info.max_msg_size - 64
    assert lb.get_blob(key) == data
    before = raw_array(ctap2)

    # More than maxSerializedLargeBlobArray (4096): LARGE_BLOB_STORAGE_FULL, the old array stays.
    expect_ctap_error(ERR.LARGE_BLOB_STORAGE_FULL, lb.put_blob, os.urandom(32), os.urandom(1700))
    expect_ctap_error(ERR.LARGE_BLOB_STORAGE_FULL, signed_write, ctap2, 0, b"\x80", 4097)
    assert raw_array(ctap2) == before
    # A fragment longer than maxFragmentLength: INVALID_LENGTH; a read that long, too.
    too_long = ctap2.info.max_msg_size - 63
    expect_ctap_error(ERR.INVALID_LENGTH, signed_write, ctap2, 0, b"\0" * too_long, 5000)
    expect_ctap_error(ERR.INVALID_LENGTH, ctap2.large_blobs, 0, get=too_long)
    # A fragment at an offset other than the next expected one: INVALID_SEQ.
    payload = cbor.encode([]) + b"\0" * 100
    signed_write(ctap2, 0, payload[:50], len(payload))
    expect_ctap_error(ERR.INVALID_SEQ, signed_write, ctap2, 60, payload[60:], None)
    # Exactly 4096 bytes (maxSerializedLargeBlobArray) fits.
    def array_of(n):
        return cbor.encode([{1: os.urandom(n), 2: os.urandom(12), 3: n}])

    n = 4000
    n += 4096 - 16 - len(array_of(n))
    body = array_of(n)
    full = body + sha256(body)[:16]
    assert len(full) == 4096, len(full)
    lb.write_blob_array(cbor.decode(body))
    assert raw_array(ctap2) == full


def test_large_blobs_tampered_checksum_is_refused(sim):
    ctap2 = Ctap2(sim.device())
    lb = LargeBlobs(ctap2)
    key = os.urandom(32)
    lb.put_blob(key, b"keep me")
    before = raw_array(ctap2)

    entries = lb.read_blob_array()
    data = cbor.encode(list(entries) + [{1: os.urandom(40), 2: os.urandom(12), 3: 40}])
    check = bytearray(sha256(data)[:16])
    check[-1] ^= 0x01
    expect_ctap_error(ERR.INTEGRITY_FAILURE, signed_write, ctap2, 0, data + bytes(check), len(data) + 16)
    assert raw_array(ctap2) == before, "a refused write must keep the old array"
    assert lb.get_blob(key) == b"keep me"

    # The same tampering in the last of two fragments: refused once the whole array is in.
    half = len(data) // 2
    signed_write(ctap2, 0, data[:half], len(data) + 16)
    expect_ctap_error(ERR.INTEGRITY_FAILURE, signed_write, ctap2, half, data[half:] + bytes(check), None)
    assert raw_array(ctap2) == before
    # And with the right checksum the very same array is taken.
    signed_write(ctap2, 0, data + sha256(data)[:16], len(data) + 16)
    assert len(lb.read_blob_array()) == 2 and lb.get_blob(key) == b"keep me"


def test_large_blobs_with_pin_need_an_lbw_token(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)
    key = os.urandom(32)

    # Reads never need a token; writes without one: PUAT_REQUIRED.
    reader = LargeBlobs(ctap2)
    assert reader.read_blob_array() == []
    expect_ctap_error(ERR.PUAT_REQUIRED, reader.put_blob, key, b"no token")
    # A token without lbw, a legacy getPinToken token (mc|ga), a MAC under the wrong key: PIN_AUTH_INVALID.
    proto, ga = token(ctap2, PERM.GET_ASSERTION, RP_ID)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, LargeBlobs(ctap2, proto, ga).put_blob, key, b"ga token")
    legacy_cp = ClientPin(ctap2, PinProtocolV2())
    legacy = legacy_cp.get_pin_token(PIN)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, LargeBlobs(ctap2, legacy_cp.protocol, legacy).put_blob, key, b"x")
    proto, lbw = token(ctap2, PERM.LARGE_BLOB_WRITE, rp_id=None)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, LargeBlobs(ctap2, proto, os.urandom(32)).put_blob, key, b"x")
    assert raw_array(ctap2) == EMPTY_ARRAY

    # With an lbw token (either PIN protocol) it works, and the token stays usable for further writes.
    for protocol in (PinProtocolV2(), PinProtocolV1()):
        proto, lbw = token(ctap2, PERM.LARGE_BLOB_WRITE, protocol=protocol, rp_id=None)
        writer = LargeBlobs(ctap2, proto, lbw)
        big = os.urandom(3000)
        writer.put_blob(key, big)
        assert reader.get_blob(key) == big
        other = os.urandom(32)
        writer.put_blob(other, b"second")
        assert len(reader.read_blob_array()) == 2
        writer.delete_blob(other)
        writer.delete_blob(key)
        assert reader.read_blob_array() == []
    # An lbw token combined with other permissions works too.
    proto, both = token(ctap2, PERM.LARGE_BLOB_WRITE | PERM.GET_ASSERTION, RP_ID)
    LargeBlobs(ctap2, proto, both).put_blob(key, b"combined")
    assert reader.get_blob(key) == b"combined"


def test_reset_empties_the_large_blob_array(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)
    lb = LargeBlobs(ctap2, *token(ctap2, PERM.LARGE_BLOB_WRITE, rp_id=None))
    lb.put_blob(os.urandom(32), os.urandom(500))
    assert len(lb.read_blob_array()) == 1

    sim.power_cycle()  # authenticatorReset only within 10 s of power-up
    ctap2 = Ctap2(sim.device())
    assert len(LargeBlobs(ctap2).read_blob_array()) == 1
    ctap2.reset()
    assert LargeBlobs(ctap2).read_blob_array() == []
    assert raw_array(ctap2) == EMPTY_ARRAY
    # No PIN any more: writes need no token again.
    LargeBlobs(ctap2).put_blob(os.urandom(32), b"after reset")
    assert len(LargeBlobs(ctap2).read_blob_array()) == 1


def test_large_blobs_and_config_survive_a_restart_from_a_flash_image(tmp_path, image_key):
    def start():
        return image_key(tmp_path / "key.img")

    key, data = os.urandom(32), os.urandom(2000)
    s = start()
    try:
        ctap2 = Ctap2(s.device())
        Config(ctap2).set_min_pin_length(min_pin_length=6, rp_ids=[RP_ID])
        Config(ctap2).toggle_always_uv()
        ClientPin(ctap2).set_pin(PIN)
        LargeBlobs(ctap2, *token(ctap2, PERM.LARGE_BLOB_WRITE, rp_id=None)).put_blob(key, data)
        before = raw_array(ctap2)
    finally:
        assert s.close() == 0
    s = start()
    try:
        ctap2 = Ctap2(s.device())
        assert raw_array(ctap2) == before
        assert LargeBlobs(ctap2).get_blob(key) == data
        info = ctap2.get_info()
        assert info.min_pin_length == 6
        assert info.options["alwaysUv"] is True and info.options["makeCredUvNotRqd"] is False
        proto, tok = token(ctap2, PERM.MAKE_CREDENTIAL, RP_ID)
        assert min_pin_length_output(ctap2, auth=(proto, tok)) == 6
    finally:
        assert s.close() == 0


def test_a_key_with_always_uv_from_the_factory_keeps_a_toggle_until_reset(tmp_path, image_key):
    """The always-uv profile is a model whose alwaysUv is on from the factory: on at the first start; toggled off it
    stays off when the key starts again from its flash; a reset (CTAP 2.1 §6.6) brings it back on."""
    def start():
        return image_key(tmp_path / "key.img", "--profile", "always-uv")

    s = start()
    try:
        ctap2 = Ctap2(s.device())
        assert ctap2.get_info().options["alwaysUv"] is True
        Config(ctap2).toggle_always_uv()  # no PIN yet: no token needed
        assert ctap2.get_info().options["alwaysUv"] is False
    finally:
        assert s.close() == 0
    s = start()
    try:
        ctap2 = Ctap2(s.device())
        assert ctap2.get_info().options["alwaysUv"] is False, "the toggle stands across a restart"
        ctap2.reset()
        info = ctap2.get_info()
        assert info.options["alwaysUv"] is True and info.options["makeCredUvNotRqd"] is False
        expect_ctap_error(ERR.PUAT_REQUIRED, ctap2.make_credential, os.urandom(32), RP, {"id": b"u", "name": "u"},
                          [{"type": "public-key", "alg": -7}])
    finally:
        assert s.close() == 0


# --------------------------------------------------------------------------
# 2. The WebAuthn largeBlob extension end to end (Fido2Client + Fido2Server)
# --------------------------------------------------------------------------


def test_large_blob_extension_with_fido2_client(sim):
    dev = sim.device()
    ctap2 = Ctap2(dev)
    ClientPin(ctap2).set_pin(PIN)
    server, (client, ui) = make_server(), make_client(dev)

    result, auth_data = register(server, client, web_user("blob"),
                                 extensions={"largeBlob": {"support": "required"}})
    assert result.client_extension_results.large_blob.supported is True
    assert auth_data.is_user_verified()
    cred = auth_data.credential_data
    result2, auth_data2 = register(server, client, web_user("blob2"),
                                   extensions={"largeBlob": {"support": "required"}})
    assert result2.client_extension_results.large_blob.supported is True
    cred2 = auth_data2.credential_data

    data, data2 = os.urandom(1200), b"the second credential's blob"
    ui.requests.clear()
    _, response = authenticate(server, client, [cred], extensions={"largeBlob": {"write": data}})
    assert response.client_extension_results.large_blob.written is True
    assert response.raw_id == cred.credential_id
    assert response.response.authenticator_data.is_user_verified()
    # The client asked for a token with ga and lbw (the write happens after the getAssertion's touch).
    assert any(p & PERM.LARGE_BLOB_WRITE and p & PERM.GET_ASSERTION for p, _ in ui.requests), ui.requests
    _, response = authenticate(server, client, [cred2], extensions={"largeBlob": {"write": data2}})
    assert response.client_extension_results.large_blob.written is True

    _, response = authenticate(server, client, [cred], extensions={"largeBlob": {"read": True}})
    assert response.client_extension_results.large_blob.blob == data
    _, response = authenticate(server, client, [cred2], extensions={"largeBlob": {"read": True}})
    assert response.client_extension_results.large_blob.blob == data2

    # Cross-check at the CTAP level: the raw largeBlobKey of the credential decrypts the same blob.
    proto, tok = token(ctap2, PERM.GET_ASSERTION, RP_ID)
    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh, [descriptor(cred.credential_id)], extensions={"largeBlobKey": True},
                            pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=proto.VERSION)
    a.verify(cdh, cred.public_key)
    assert len(a.large_blob_key) == 32
    lb = LargeBlobs(ctap2)
    assert len(lb.read_blob_array()) == 2
    assert lb.get_blob(a.large_blob_key) == data

    # Overwriting replaces the credential's entry (still two entries).
    _, response = authenticate(server, client, [cred], extensions={"largeBlob": {"write": b"v2"}})
    assert response.client_extension_results.large_blob.written is True
    _, response = authenticate(server, client, [cred], extensions={"largeBlob": {"read": True}})
    assert response.client_extension_results.large_blob.blob == b"v2"
    assert len(lb.read_blob_array()) == 2

    # A credential made without largeBlob has no largeBlobKey: the read gives nothing.
    _, auth_data3 = register(server, client, web_user("plain"))
    _, response = authenticate(server, client, [auth_data3.credential_data],
                            extensions={"largeBlob": {"read": True}})
    assert response.client_extension_results.large_blob is None


# --------------------------------------------------------------------------
# 3. authenticatorConfig through fido2.ctap2.config.Config
# --------------------------------------------------------------------------


def test_set_min_pin_length_without_and_with_pin(sim):
    ctap2 = Ctap2(sim.device())
    assert Config.is_supported(ctap2.get_info())

    # No PIN: no token needed.
    Config(ctap2).set_min_pin_length(min_pin_length=6)
    info = ctap2.get_info()
    assert info.min_pin_length == 6 and info.force_pin_change is False
    # The minimum can only grow (until a reset).
    expect_ctap_error(ERR.PIN_POLICY_VIOLATION, Config(ctap2).set_min_pin_length, min_pin_length=5)
    assert ctap2.get_info().min_pin_length == 6

    cp = ClientPin(ctap2)
    expect_ctap_error(ERR.PIN_POLICY_VIOLATION, cp.set_pin, "12345")
    assert ctap2.get_info().options["clientPin"] is False
    cp.set_pin("123456")
    assert ctap2.get_info().options["clientPin"] is True
    assert ctap2.get_info().force_pin_change is False

    # With a PIN: no token -> PUAT_REQUIRED; a token without acfg or a bad MAC -> PIN_AUTH_INVALID.
    expect_ctap_error(ERR.PUAT_REQUIRED, Config(ctap2).set_min_pin_length, min_pin_length=7)
    proto, ga = token(ctap2, PERM.GET_ASSERTION, RP_ID, pin="123456")
    expect_ctap_error(ERR.PIN_AUTH_INVALID, Config(ctap2, proto, ga).set_min_pin_length, min_pin_length=7)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, Config(ctap2, proto, os.urandom(32)).set_min_pin_length,
                      min_pin_length=7)
    assert ctap2.get_info().min_pin_length == 6

    for protocol in (PinProtocolV1(), PinProtocolV2()):
        proto, acfg = token(ctap2, PERM.AUTHENTICATOR_CFG, pin="123456", protocol=protocol, rp_id=None)
        cfg = Config(ctap2, proto, acfg)
        expect_ctap_error(ERR.PIN_POLICY_VIOLATION, cfg.set_min_pin_length, min_pin_length=4)
        cfg.set_min_pin_length(min_pin_length=6)  # the same value, PIN still long enough
        info = ctap2.get_info()
        assert info.min_pin_length == 6 and info.force_pin_change is False
    # A PIN change must honour the new minimum too.
    expect_ctap_error(ERR.PIN_POLICY_VIOLATION, cp.change_pin, "123456", "98765")
    cp.change_pin("123456", "987654")
    assert len(cp.get_pin_token("987654", PERM.GET_ASSERTION, RP_ID)) == 32

    # enableEnterpriseAttestation needs the acfg token too, then turns ep on (once the key can attest for an
    # enterprise: a provisioned batch attestation).
    sim.provision_attestation()
    expect_ctap_error(ERR.PUAT_REQUIRED, Config(ctap2).enable_enterprise_attestation)
    assert ctap2.get_info().options.get("ep") is False
    proto, acfg = token(ctap2, PERM.AUTHENTICATOR_CFG, pin="987654", rp_id=None)
    Config(ctap2, proto, acfg).enable_enterprise_attestation()
    assert ctap2.get_info().options.get("ep") is True


def test_enable_enterprise_attestation_without_pin(sim):
    ctap2 = Ctap2(sim.device())
    assert "ep" not in ctap2.get_info().options
    expect_ctap_error(ERR.INVALID_PARAMETER, Config(ctap2).enable_enterprise_attestation)
    sim.provision_attestation()
    assert ctap2.get_info().options.get("ep") is False
    Config(ctap2).enable_enterprise_attestation()
    assert ctap2.get_info().options.get("ep") is True
    Config(ctap2).enable_enterprise_attestation()  # again: no change, no error
    assert ctap2.get_info().options.get("ep") is True


def test_force_change_pin(sim):
    ctap2 = Ctap2(sim.device())
    cp = ClientPin(ctap2)
    cp.set_pin(PIN)
    Config(ctap2, *token(ctap2, PERM.AUTHENTICATOR_CFG, rp_id=None)).set_min_pin_length(force_change_pin=True)
    info = ctap2.get_info()
    assert info.force_pin_change is True
    assert info.min_pin_length == 4  # unchanged

    # The right PIN: getPinUvAuthTokenUsingPinWithPermissions (0x09) -> PIN_POLICY_VIOLATION,
    # legacy getPinToken (0x05, what python-fido2 sends when permissions is None) -> PIN_INVALID.
    for protocol in (PinProtocolV2(), PinProtocolV1()):
        cpp = ClientPin(ctap2, protocol)
        expect_ctap_error(ERR.PIN_POLICY_VIOLATION, cpp.get_pin_token, PIN, PERM.GET_ASSERTION, RP_ID)
        expect_ctap_error(ERR.PIN_POLICY_VIOLATION, cpp.get_pin_token, PIN, PERM.AUTHENTICATOR_CFG)
        expect_ctap_error(ERR.PIN_INVALID, cpp.get_pin_token, PIN)
    assert retries(ctap2) == 8, "the right PIN must not use up a retry"
    # A wrong PIN is still a wrong PIN (and counted).
    expect_ctap_error(ERR.PIN_INVALID, cp.get_pin_token, "00000000", PERM.GET_ASSERTION, RP_ID)
    assert retries(ctap2) == 7
    # Fido2Client cannot get a token either.
    server, (client, _) = make_server(), make_client(sim.device())
    with pytest.raises(ClientError) as failure:
        register(server, client, web_user("forced"))
    assert isinstance(failure.value.cause, CtapError), failure.value
    assert failure.value.cause.code == ERR.PIN_POLICY_VIOLATION, failure.value
    assert retries(ctap2) == 8

    # changePIN to the same PIN does not clear it; to a new PIN it does.
    expect_ctap_error(ERR.PIN_POLICY_VIOLATION, cp.change_pin, PIN, PIN)
    assert ctap2.get_info().force_pin_change is True
    cp.change_pin(PIN, NEW_PIN)
    info = ctap2.get_info()
    assert info.force_pin_change is False
    assert retries(ctap2) == 8
    assert len(cp.get_pin_token(NEW_PIN, PERM.GET_ASSERTION, RP_ID)) == 32
    assert len(cp.get_pin_token(NEW_PIN)) == 32
    _, auth_data = register(server, make_client(sim.device(), NEW_PIN)[0], web_user("after"))
    assert auth_data.is_user_verified()

    # Raising the minimum above the current PIN's length forces a change as well.
    Config(ctap2, *token(ctap2, PERM.AUTHENTICATOR_CFG, pin=NEW_PIN, rp_id=None)).set_min_pin_length(min_pin_length=10)
    info = ctap2.get_info()
    assert info.min_pin_length == 10 and info.force_pin_change is True
    expect_ctap_error(ERR.PIN_POLICY_VIOLATION, cp.get_pin_token, NEW_PIN, PERM.GET_ASSERTION, RP_ID)
    expect_ctap_error(ERR.PIN_POLICY_VIOLATION, cp.change_pin, NEW_PIN, "123456789")  # 9 < 10
    cp.change_pin(NEW_PIN, "1234567890")
    assert ctap2.get_info().force_pin_change is False
    assert len(cp.get_pin_token("1234567890", PERM.GET_ASSERTION, RP_ID)) == 32


def test_min_pin_length_rp_ids_and_extension(sim):
    dev = sim.device()
    ctap2 = Ctap2(dev)
    # Fresh key: no RP is allowed to see the minimum.
    assert min_pin_length_output(ctap2) is None

    Config(ctap2).set_min_pin_length(rp_ids=[RP_ID, "third.example"])
    assert min_pin_length_output(ctap2) == 4
    assert min_pin_length_output(ctap2, OTHER_RP) is None
    assert ctap2.get_info().min_pin_length == 4

    # A new minimum without rp_ids keeps the list.
    Config(ctap2).set_min_pin_length(min_pin_length=6)
    assert min_pin_length_output(ctap2) == 6
    assert min_pin_length_output(ctap2, OTHER_RP) is None

    # Through Fido2Client + Fido2Server (python-fido2's MinPinLengthExtension passes it on).
    server, (client, _) = make_server(), make_client(dev, pin=None)
    _, auth_data = register(server, client, web_user("mpl"), rk=ResidentKeyRequirement.DISCOURAGED, uv=NO_UV,
                            extensions={"minPinLength": True})
    assert auth_data.extensions == {"minPinLength": 6}
    _, auth_data = register(server, client, web_user("no-mpl"), rk=ResidentKeyRequirement.DISCOURAGED, uv=NO_UV)
    assert "minPinLength" not in (auth_data.extensions or {})

    # A new list replaces the old one; up to maxRPIDsForSetMinPINLength (8) are taken.
    eight = [OTHER_RP["id"]] + [f"rp{i}.example" for i in range(7)]
    Config(ctap2).set_min_pin_length(rp_ids=eight)
    assert min_pin_length_output(ctap2, OTHER_RP) == 6
    assert min_pin_length_output(ctap2) is None
    # Nine: refused, the list stays as it was.
    with pytest.raises(CtapError) as info:
        Config(ctap2).set_min_pin_length(rp_ids=eight + [RP_ID])
    assert info.value.code in (ERR.KEY_STORE_FULL, ERR.INVALID_PARAMETER), info.value.code
    assert min_pin_length_output(ctap2) is None
    assert min_pin_length_output(ctap2, OTHER_RP) == 6

    # With a PIN: the same output, and setting the list needs an acfg token.
    ClientPin(ctap2).set_pin(PIN)
    expect_ctap_error(ERR.PUAT_REQUIRED, Config(ctap2).set_min_pin_length, rp_ids=[RP_ID])
    Config(ctap2, *token(ctap2, PERM.AUTHENTICATOR_CFG, rp_id=None)).set_min_pin_length(rp_ids=[RP_ID])
    assert min_pin_length_output(ctap2, auth=token(ctap2, PERM.MAKE_CREDENTIAL, RP_ID)) == 6
    assert min_pin_length_output(ctap2, OTHER_RP, auth=token(ctap2, PERM.MAKE_CREDENTIAL, OTHER_RP["id"])) is None


def test_toggle_always_uv(sim):
    dev = sim.device()
    ctap2 = Ctap2(dev)
    ctap1 = Ctap1(dev)
    app_param = sha256(b"https://u2f.example")
    u2f = ctap1.register(new_cdh(), app_param)
    plain = ctap2.make_credential(new_cdh(), RP, user("plain"), ES256_PARAMS).auth_data.credential_data

    # No PIN: toggling needs no token.
    Config(ctap2).toggle_always_uv()
    info = ctap2.get_info()
    assert info.options["alwaysUv"] is True
    assert info.options["makeCredUvNotRqd"] is False

    # Without a token: makeCredential and getAssertion (up) -> PUAT_REQUIRED; U2F -> SW 6986.
    expect_ctap_error(ERR.PUAT_REQUIRED, ctap2.make_credential, new_cdh(), RP, user("x"), ES256_PARAMS,
                      options={"rk": False})
    expect_ctap_error(ERR.PUAT_REQUIRED, ctap2.get_assertion, RP_ID, new_cdh(), [descriptor(plain.credential_id)])
    expect_apdu_error(SW_COMMAND_NOT_ALLOWED, ctap1.register, new_cdh(), app_param)
    expect_apdu_error(SW_COMMAND_NOT_ALLOWED, ctap1.authenticate, new_cdh(), app_param, u2f.key_handle)
    assert ctap1.get_version() == "U2F_V2"  # VERSION still answers
    # Other config subcommands need a token while alwaysUv is on, even without a PIN.
    expect_ctap_error(ERR.PUAT_REQUIRED, Config(ctap2).set_min_pin_length, min_pin_length=6)

    # Set a PIN: Fido2Client then verifies the user even when the RP discourages it.
    ClientPin(ctap2).set_pin(PIN)
    server, (client, ui) = make_server(), make_client(dev)
    _, auth_data = register(server, client, web_user("always"), rk=ResidentKeyRequirement.DISCOURAGED, uv=NO_UV)
    assert ui.requests, "alwaysUv: Fido2Client should have asked for the PIN"
    assert auth_data.is_user_verified() and auth_data.is_user_present()
    cred = auth_data.credential_data
    _, response = authenticate(server, client, [cred], uv=NO_UV)
    assert response.response.authenticator_data.is_user_verified()
    # The older credential, too, with a token.
    proto, tok = token(ctap2, PERM.GET_ASSERTION, RP_ID)
    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh, [descriptor(plain.credential_id)],
                            pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=proto.VERSION)
    a.verify(cdh, plain.public_key)
    assert a.auth_data.is_user_verified()

    # Toggling back with a PIN set: no token -> PUAT_REQUIRED, a token without acfg -> PIN_AUTH_INVALID.
    expect_ctap_error(ERR.PUAT_REQUIRED, Config(ctap2).toggle_always_uv)
    proto, ga = token(ctap2, PERM.GET_ASSERTION, RP_ID)
    expect_ctap_error(ERR.PIN_AUTH_INVALID, Config(ctap2, proto, ga).toggle_always_uv)
    assert ctap2.get_info().options["alwaysUv"] is True
    Config(ctap2, *token(ctap2, PERM.AUTHENTICATOR_CFG, rp_id=None)).toggle_always_uv()
    info = ctap2.get_info()
    assert info.options["alwaysUv"] is False
    assert info.options["makeCredUvNotRqd"] is True

    # Back to normal: a non-discoverable credential without a token, U2F works again.
    att = ctap2.make_credential(new_cdh(), RP, user("y"), ES256_PARAMS, options={"rk": False})
    assert not att.auth_data.is_user_verified()
    cdh = new_cdh()
    a = ctap2.get_assertion(RP_ID, cdh, [descriptor(plain.credential_id)])
    a.verify(cdh, plain.public_key)
    assert not a.auth_data.is_user_verified()
    client_param = new_cdh()
    reg = ctap1.register(client_param, app_param)
    reg.verify(app_param, client_param)
    client_param = new_cdh()
    ctap1.authenticate(client_param, app_param, u2f.key_handle).verify(app_param, client_param, u2f.public_key)

    # Other config subcommands still need the acfg token.
    sim.provision_attestation()
    expect_ctap_error(ERR.PUAT_REQUIRED, Config(ctap2).enable_enterprise_attestation)
    Config(ctap2, *token(ctap2, PERM.AUTHENTICATOR_CFG, rp_id=None)).enable_enterprise_attestation()


def test_reset_restores_config_defaults(sim):
    ctap2 = Ctap2(sim.device())
    Config(ctap2).set_min_pin_length(min_pin_length=8, rp_ids=[RP_ID])
    Config(ctap2).toggle_always_uv()
    ClientPin(ctap2).set_pin(PIN)
    Config(ctap2, *token(ctap2, PERM.AUTHENTICATOR_CFG, rp_id=None)).set_min_pin_length(force_change_pin=True)
    info = ctap2.get_info()
    assert (info.min_pin_length, info.options["alwaysUv"], info.force_pin_change) == (8, True, True)

    sim.power_cycle()
    ctap2 = Ctap2(sim.device())
    ctap2.reset()
    info = ctap2.get_info()
    assert info.min_pin_length == 4
    assert info.force_pin_change is False
    assert info.options["alwaysUv"] is False
    assert info.options["makeCredUvNotRqd"] is True
    assert info.options["clientPin"] is False
    assert min_pin_length_output(ctap2) is None  # the RP list is gone
    ClientPin(ctap2).set_pin("1234")  # 4 is the minimum again
