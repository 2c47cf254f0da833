"""Key profiles (serve --profile): the key presents another model's getInfo, limits and quirks, and python-fido2
treats it as that model (a U2F-only key makes Fido2Client fall back to U2F, for example)."""

from __future__ import annotations

import json
import subprocess

import pytest
from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction
from fido2.ctap import CtapError
from fido2.ctap1 import ApduError, Ctap1
from fido2.ctap2 import Ctap2
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.hid import CAPABILITY, CTAPHID

from fidosim import find_binary
from fidosim.testing import RP, descriptor, expect_ctap_error, make_server, new_cdh, sha256, user

ES256 = [{"type": "public-key", "alg": -7}]
EDDSA = [{"type": "public-key", "alg": -8}]


@pytest.mark.sim_args("--profile", "ctap20", "--presence-delay", "0")
def test_ctap20_profile(sim):
    ctap2 = Ctap2(sim.device())
    info = ctap2.get_info()
    assert info.versions == ["U2F_V2", "FIDO_2_0"]
    assert info.extensions == ["credProtect", "hmac-secret"] or set(info.extensions) == {"credProtect", "hmac-secret"}
    assert info.pin_uv_protocols == [1]
    assert info.max_msg_size == 1200
    assert set(info.options) == {"rk", "up", "plat", "clientPin"}
    raw = ctap2.send_cbor(Ctap2.CMD.GET_INFO)
    assert set(raw) <= set(range(1, 9))  # only the members CTAP 2.0 defines
    # CTAP 2.1 commands do not exist on this key.
    for command in (0x0A, 0x0B, 0x0C, 0x0D, 0x41):
        with pytest.raises(CtapError) as refused:
            ctap2.send_cbor(command, {})
        assert refused.value.code == CtapError.ERR.INVALID_COMMAND
    expect_ctap_error(CtapError.ERR.UNSUPPORTED_ALGORITHM, ctap2.make_credential, new_cdh(), RP, user("a"), EDDSA)
    # A PIN through protocol 1 (python-fido2 picks it from getInfo), then Fido2Client with the PIN.
    pin = ClientPin(ctap2)
    assert pin.protocol.VERSION == 1
    pin.set_pin("12345678")
    with pytest.raises(CtapError) as refused:
        ClientPin(ctap2, protocol=PinProtocolV2()).get_pin_token("12345678")
    assert refused.value.code == CtapError.ERR.PIN_AUTH_INVALID  # CTAP 2.0's status for an unknown protocol

    class Pin(UserInteraction):
        def request_pin(self, permissions, rp_id):
            return "12345678"

    server = make_server()
    client = Fido2Client(sim.device(), DefaultClientDataCollector("https://example.com"), user_interaction=Pin())
    options, state = server.register_begin(user("bob"), resident_key_requirement="required")
    server.register_complete(state, client.make_credential(options.public_key))


def _mc(ctap2, token=None, rp=RP, name="a", protocol=PinProtocolV1(), **kwargs):
    """makeCredential over python-fido2's Ctap2, with pinAuth from `token` (CTAP 2.0: HMAC-SHA-256 of
    clientDataHash, first 16 bytes)."""
    cdh = new_cdh()
    if token is not None:
        kwargs.update(pin_uv_param=protocol.authenticate(token, cdh), pin_uv_protocol=protocol.VERSION)
    return ctap2.make_credential(cdh, rp, user(name), ES256, **kwargs)


@pytest.mark.sim_args("--profile", "ctap20", "--presence-delay", "0")
def test_ctap20_behaves_as_ctap20_says(sim):
    """Request by request, the CTAP 2.0 rules the ctap20 profile claims (profiles.md, commands.md)."""
    ctap2 = Ctap2(sim.device())
    # Options: up in makeCredential and rk in getAssertion are not 2.0 options (INVALID_OPTION, any value).
    for up in (True, False):
        expect_ctap_error(CtapError.ERR.INVALID_OPTION, _mc, ctap2, options={"up": up})
    made = _mc(ctap2)
    expect_ctap_error(CtapError.ERR.INVALID_OPTION, ctap2.get_assertion, "example.com", new_cdh(),
                      [descriptor(made.auth_data.credential_data.credential_id)], options={"rk": True})
    pin = ClientPin(ctap2, protocol=PinProtocolV1())
    pin.set_pin("12345678")
    # With a PIN, every credential needs pinAuth: CTAP2_ERR_PIN_REQUIRED (0x36).
    expect_ctap_error(0x36, _mc, ctap2)
    # One pinToken per power-up: every getPinToken (0x05; python-fido2 uses it on a 2.0 key) returns it, and it
    # serves any number of requests for any RP.
    token = pin.get_pin_token("12345678")
    assert pin.get_pin_token("12345678") == token
    for rp_id in ("example.com", "example.com", "other.example"):
        assert _mc(ctap2, token, rp={"id": rp_id}).auth_data.is_user_verified()
    # clientPIN has subcommands 1 to 5; 0x09 is unknown (INVALID_PARAMETER: 0x3E is a 2.1 code).
    expect_ctap_error(CtapError.ERR.INVALID_PARAMETER, ctap2.client_pin, 1, 0x09)
    # pinProtocol is required in every subcommand, getPINRetries included (2.0 §5.5; 2.1 made it optional there).
    expect_ctap_error(CtapError.ERR.MISSING_PARAMETER, ctap2.send_cbor, 0x06, {2: 1})
    assert ctap2.send_cbor(0x06, {1: 1, 2: 1})[3] == 8
    # A protocol the key lacks, with pinAuth: PIN_AUTH_INVALID (2.0 §5.1).
    expect_ctap_error(CtapError.ERR.PIN_AUTH_INVALID, ctap2.make_credential, new_cdh(), RP, user("p"), ES256,
                      pin_uv_param=b"\0" * 32, pin_uv_protocol=2)
    # A power cycle makes a new token; the old one is refused.
    sim.power_cycle()
    ctap2 = Ctap2(sim.device())
    expect_ctap_error(CtapError.ERR.PIN_AUTH_INVALID, _mc, ctap2, token)
    pin = ClientPin(ctap2, protocol=PinProtocolV1())
    fresh = pin.get_pin_token("12345678")
    assert fresh != token and _mc(ctap2, fresh).auth_data.is_user_verified()
    # So does a PIN change.
    pin.change_pin("12345678", "87654321")
    expect_ctap_error(CtapError.ERR.PIN_AUTH_INVALID, _mc, ctap2, fresh)
    assert pin.get_pin_token("87654321") != fresh


@pytest.mark.sim_args("--profile", "ctap21pre", "--presence-delay", "0")
def test_ctap21pre_authorises_preview_credential_management_with_get_pin_token(sim):
    from fido2.ctap2.credman import CredentialManagement

    ctap2 = Ctap2(sim.device())
    info = ctap2.get_info()
    assert info.versions == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE"]
    assert info.options.get("credentialMgmtPreview") is True and "credMgmt" not in info.options
    pin = ClientPin(ctap2)
    pin.set_pin("12345678")
    token = pin.get_pin_token("12345678")  # 0x05: the key has no pinUvAuthToken option
    assert _mc(ctap2, token, options={"rk": True}).auth_data.is_user_verified()
    assert _mc(ctap2, token, rp={"id": "other.example"}, options={"rk": True}).auth_data.is_user_verified()
    # python-fido2's CredentialManagement sends 0x41 to this key, with the same token: no permissions needed.
    credman = CredentialManagement(ctap2, pin.protocol, token)
    assert credman.get_metadata()[CredentialManagement.RESULT.EXISTING_CRED_COUNT] == 2
    assert {rp[CredentialManagement.RESULT.RP]["id"] for rp in credman.enumerate_rps()} == {
        "example.com", "other.example"}
    expect_ctap_error(CtapError.ERR.INVALID_COMMAND, ctap2.send_cbor, 0x0A, {1: 1})
    # The next getPinToken replaces the token.
    pin.get_pin_token("12345678")
    expect_ctap_error(CtapError.ERR.PIN_AUTH_INVALID, credman.get_metadata)


@pytest.mark.sim_args("--profile", "solo1", "--presence-delay", "0")
def test_solo1_names_credential_management_credMgmt_and_serves_it_as_solo_1_does(sim):
    """What a suite written for Solo keys checks (python-fido2's CredentialManagement: metadata, enumerate, delete):
    getInfo says credMgmt on a FIDO_2_1_PRE key, python-fido2 then sends 0x0A, and 0x41 answers the same; a
    getPinToken token authorises it; 50 discoverable credentials."""
    from fido2.ctap2.credman import CredentialManagement

    ctap2 = Ctap2(sim.device())
    info = ctap2.get_info()
    assert info.versions == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE"]
    assert info.aaguid == bytes.fromhex("8876631bd4a0427f57730ec71c9e0279")
    assert info.options == {"rk": True, "up": True, "plat": False, "clientPin": False, "credMgmt": True}
    assert info.extensions == ["credProtect", "hmac-secret"] and info.pin_uv_protocols == [1]
    assert info.max_msg_size == 1200 and info.max_creds_in_list == 20 and info.max_cred_id_length == 128
    assert CredentialManagement.is_supported(info)
    pin = ClientPin(ctap2)
    pin.set_pin("12345678")
    token = pin.get_pin_token("12345678")
    # With nothing stored, every credential-management subcommand but metadata answers success with no data
    # (python-fido2's enumerate_rps, written against the CTAP text, cannot read that).
    credman = CredentialManagement(ctap2, pin.protocol, token)
    assert credman.get_metadata()[CredentialManagement.RESULT.EXISTING_CRED_COUNT] == 0
    assert credman.enumerate_rps_begin() == {}
    with pytest.raises(KeyError):
        credman.enumerate_rps()
    assert ctap2.send_cbor(0x0A, {1: 3}) == {}  # enumerateRPsGetNextRP
    # Solo's choices: setPIN again is NOT_ALLOWED; a clientPIN request without PIN protocol 1, or with an unknown
    # subcommand, is CTAP1_ERR_OTHER.
    expect_ctap_error(CtapError.ERR.NOT_ALLOWED, pin.set_pin, "87654321")
    expect_ctap_error(CtapError.ERR.OTHER, ctap2.client_pin, None, 1)
    expect_ctap_error(CtapError.ERR.OTHER, ctap2.client_pin, 2, 1)
    expect_ctap_error(CtapError.ERR.OTHER, ctap2.client_pin, 1, 9)
    assert ctap2.client_pin(1, 1)[3] == 8
    assert pin.get_pin_token("12345678") == token  # one pinToken per power-up
    for rp, name in [(RP, "a"), (RP, "b"), ({"id": "other.example"}, "c")]:
        assert _mc(ctap2, token, rp=rp, name=name, options={"rk": True}).auth_data.is_user_verified()
    credman = CredentialManagement(ctap2, pin.protocol, token)  # python-fido2 sends 0x0A: the key says credMgmt
    metadata = credman.get_metadata()
    assert metadata[CredentialManagement.RESULT.EXISTING_CRED_COUNT] == 3
    assert metadata[CredentialManagement.RESULT.MAX_REMAINING_COUNT] == 47
    assert {rp[CredentialManagement.RESULT.RP]["id"] for rp in credman.enumerate_rps()} == {
        "example.com", "other.example"}
    creds = credman.enumerate_creds(sha256(b"example.com"))
    assert sorted(c[CredentialManagement.RESULT.USER]["name"] for c in creds) == ["a", "b"]
    credman.delete_cred(creds[0][CredentialManagement.RESULT.CREDENTIAL_ID])
    # The same request on 0x41 answers the same.
    params = {1: 1, 3: 1, 4: pin.protocol.authenticate(token, b"\x01")}
    assert ctap2.send_cbor(0x41, params)[1] == 2
    assert ctap2.send_cbor(0x0A, params)[1] == 2


@pytest.mark.sim_args("--presence-delay", "0")
def test_ctap21_credential_management_needs_the_permission(sim):
    """The default (CTAP 2.1) profile: neither 0x0A nor 0x41 takes a getPinToken token, as trussed, OpenSK and
    canokey; a token with the cm permission works on both."""
    from fido2.ctap2.credman import CredentialManagement

    ctap2 = Ctap2(sim.device())
    pin = ClientPin(ctap2)
    pin.set_pin("12345678")
    legacy = pin.get_pin_token("12345678")  # no permissions asked: python-fido2 sends 0x05
    message = b"\x01"
    for command in (0x0A, 0x41):
        expect_ctap_error(CtapError.ERR.PIN_AUTH_INVALID, ctap2.send_cbor, command,
                          {1: 1, 3: pin.protocol.VERSION, 4: pin.protocol.authenticate(legacy, message)})
    cm = pin.get_pin_token("12345678", ClientPin.PERMISSION.CREDENTIAL_MGMT)
    for command in (0x0A, 0x41):
        ctap2.send_cbor(command, {1: 1, 3: pin.protocol.VERSION, 4: pin.protocol.authenticate(cm, message)})
    assert CredentialManagement(ctap2, pin.protocol, cm).get_metadata()[
        CredentialManagement.RESULT.EXISTING_CRED_COUNT] == 0


@pytest.mark.sim_args("--profile", "yubikey5", "--presence-delay", "0")
def test_yubikey5_profile_makes_yubicos_choices(sim):
    ctap2 = Ctap2(sim.device())
    info = ctap2.get_info()
    assert info.aaguid == bytes.fromhex("a25342c03cdc44148e46f4807fca511c")
    assert info.max_msg_size == 1280
    pin = ClientPin(ctap2)
    expect_ctap_error(CtapError.ERR.PIN_NOT_SET, pin.get_pin_retries)
    pin.set_pin("12345678")
    assert pin.get_pin_retries()[0] == 8


def test_behaviour_choices_in_a_profile_file(tmp_path, start_sim):
    profile = tmp_path / "choices.json"
    profile.write_text(json.dumps({"name": "choices", "behaviour": {
        "setPinWhenSet": "notAllowed", "pinRetriesWithoutPin": "pinNotSet", "makeCredUvNotRqd": False}}))
    key = start_sim("--profile", str(profile), "--presence-delay", "0")
    try:
        ctap2 = Ctap2(key.device())
        pin = ClientPin(ctap2)
        expect_ctap_error(CtapError.ERR.PIN_NOT_SET, pin.get_pin_retries)
        pin.set_pin("12345678")
        expect_ctap_error(CtapError.ERR.NOT_ALLOWED, pin.set_pin, "12345678")
        assert ctap2.get_info().options.get("makeCredUvNotRqd") is False
        expect_ctap_error(CtapError.ERR.PUAT_REQUIRED, _mc, ctap2)
    finally:
        key.finish()


def test_openSK_like_choices_credblob_in_the_id_and_no_next_from_another_channel(tmp_path, start_sim):
    """The two OpenSK choices as profile members: a non-discoverable credential's credBlob kept in its id (getInfo's
    maxCredentialIdLength 33 bytes longer), and getNextAssertion from another channel refused."""
    profile = tmp_path / "opensk-like.json"
    profile.write_text(json.dumps({"name": "opensk-like", "behaviour": {
        "credBlobNonDiscoverable": "inCredentialId", "nextFromAnotherChannel": "notAllowed"}}))
    key = start_sim("--profile", str(profile), "--presence-delay", "0")
    default_key = start_sim("--presence-delay", "0")
    try:
        ctap2 = Ctap2(key.device())
        default = Ctap2(default_key.device())
        assert ctap2.get_info().max_cred_id_length == default.get_info().max_cred_id_length + 33
        blob = b"kept in the credential id, 32 b."
        made = _mc(ctap2, extensions={"credBlob": blob}, options={"rk": False})
        assert made.auth_data.extensions == {"credBlob": True}
        cred_id = made.auth_data.credential_data.credential_id
        assert len(cred_id) <= ctap2.get_info().max_cred_id_length
        got = ctap2.get_assertion(RP["id"], new_cdh(), [descriptor(cred_id)], extensions={"credBlob": True})
        assert got.auth_data.extensions == {"credBlob": blob}
        assert _mc(default, extensions={"credBlob": blob}, options={"rk": False}).auth_data.extensions == {
            "credBlob": False}
        # Two discoverable credentials, a getAssertion on one channel, the next from another.
        for name, target in (("one", ctap2), ("two", ctap2), ("one", default), ("two", default)):
            target.make_credential(new_cdh(), RP, user(name), ES256, options={"rk": True})
        for target, other_channel, refused in ((ctap2, key, True), (default, default_key, False)):
            other = Ctap2(other_channel.device())  # its getInfo first: any other command ends the state
            assert target.get_assertion(RP["id"], new_cdh()).number_of_credentials == 2
            if refused:
                expect_ctap_error(CtapError.ERR.NOT_ALLOWED, other.get_next_assertion)
            else:
                assert other.get_next_assertion().credential["id"]
    finally:
        key.finish()
        default_key.finish()


@pytest.mark.sim_args("--profile", "u2f-only", "--presence-delay", "0")
def test_u2f_only_profile_makes_fido2_client_fall_back_to_u2f(sim):
    dev = sim.device()
    assert not dev.capabilities & CAPABILITY.CBOR
    with pytest.raises(Exception):
        dev.call(CTAPHID.CBOR, b"\x04")  # ERR_INVALID_CMD at the transport
    assert Ctap1(sim.device()).get_version() == "U2F_V2"
    from fido2.attestation import FidoU2FAttestation
    from fido2.server import Fido2Server
    from fido2.webauthn import AttestationConveyancePreference, PublicKeyCredentialRpEntity

    checked = []

    def verify_u2f(attestation_object, client_data_hash):
        assert attestation_object.fmt == "fido-u2f"
        FidoU2FAttestation().verify(attestation_object.att_stmt, attestation_object.auth_data, client_data_hash)
        checked.append(True)

    server = Fido2Server(PublicKeyCredentialRpEntity(id="example.com", name="Example"),
                         attestation=AttestationConveyancePreference.DIRECT, verify_attestation=verify_u2f)
    client = Fido2Client(sim.device(), DefaultClientDataCollector("https://example.com"),
                         user_interaction=UserInteraction())
    options, state = server.register_begin(user("carol"), user_verification="discouraged")
    auth_data = server.register_complete(state, client.make_credential(options.public_key))
    assert checked == [True]
    request, state = server.authenticate_begin([auth_data.credential_data], user_verification="discouraged")
    response = client.get_assertion(request.public_key).get_response(0)
    server.authenticate_complete(state, [auth_data.credential_data], response)


@pytest.mark.sim_args("--profile", "tiny-storage", "--presence-delay", "0")
def test_tiny_storage_profile(sim):
    ctap2 = Ctap2(sim.device())
    assert ctap2.get_info().remaining_disc_creds == 3
    for i in range(3):
        ctap2.make_credential(new_cdh(), RP, user(f"u{i}"), ES256, options={"rk": True})
    assert ctap2.get_info().remaining_disc_creds == 0
    expect_ctap_error(CtapError.ERR.KEY_STORE_FULL, ctap2.make_credential, new_cdh(), RP, user("u3"), ES256,
                      options={"rk": True})


@pytest.mark.sim_args("--profile", "always-uv", "--presence-delay", "0")
def test_always_uv_profile(sim):
    ctap2 = Ctap2(sim.device())
    assert ctap2.get_info().options["alwaysUv"] is True
    with pytest.raises(ApduError) as refused:
        Ctap1(sim.device()).register(new_cdh(), sha256(b"https://example.com"))
    assert refused.value.code == 0x6986
    with sim.control() as ctl:
        assert ctl.status()["profile"] == "always-uv"


@pytest.mark.sim_args("--profile", "legacy-quirks", "--presence-delay", "0")
def test_legacy_quirks_profile(sim):
    ctap2 = Ctap2(sim.device())
    assert ctap2.get_info().max_creds_in_list == 1
    made = [ctap2.make_credential(new_cdh(), RP, user(f"u{i}"), ES256).auth_data.credential_data for i in range(2)]
    expect_ctap_error(CtapError.ERR.LIMIT_EXCEEDED, ctap2.get_assertion, "example.com", new_cdh(),
                      [descriptor(c.credential_id) for c in made])
    expect_ctap_error(CtapError.ERR.UNSUPPORTED_ALGORITHM, ctap2.make_credential, new_cdh(), RP, user("e"), EDDSA)
    # Fido2Client sends one credential at a time, as a platform must for this key.
    server = make_server()
    client = Fido2Client(sim.device(), DefaultClientDataCollector("https://example.com"),
                         user_interaction=UserInteraction())
    request, state = server.authenticate_begin(made, user_verification="discouraged")
    server.authenticate_complete(state, made, client.get_assertion(request.public_key).get_response(0))
    # displayName is not kept with a discoverable credential.
    ctap2.make_credential(new_cdh(), RP, {"id": b"dn", "name": "dana", "displayName": "Dana D."}, ES256,
                          options={"rk": True})
    with sim.control() as ctl:
        stored = [c for c in ctl.get_credentials() if c.get("userName") == "dana"]
    assert stored and "userDisplayName" not in stored[0]


def test_a_profile_file_of_ones_own(sim, tmp_path, start_sim):
    profile = tmp_path / "broken-key.json"
    profile.write_text(json.dumps({
        "name": "broken-key", "aaguid": "00112233-4455-6677-8899-aabbccddeeff",
        "quirks": {"forcedStatus": {"getAssertion": 0x31}},
    }))
    key = start_sim("--profile", str(profile), "--presence-delay", "0")
    try:
        ctap2 = Ctap2(key.device())
        assert ctap2.get_info().aaguid == bytes.fromhex("00112233445566778899aabbccddeeff")
        made = ctap2.make_credential(new_cdh(), RP, user("a"), ES256)
        expect_ctap_error(CtapError.ERR.PIN_INVALID, ctap2.get_assertion, "example.com", new_cdh(),
                          [descriptor(made.auth_data.credential_data.credential_id)])
    finally:
        key.finish()


@pytest.mark.parametrize("content, message", [
    ('{"description": "x"}', "\"name\" is missing"),
    ('{"name": "x", "versions": ["FIDO_3"]}', "unknown version FIDO_3"),
    ('{"name": "x", "versions": ["U2F_V2", "FIDO_2_0"]}', "PIN/UV auth protocol 2 needs FIDO_2_1"),
    ('{"name": "x", "extensions": ["teleport"]}', "unknown extension"),
    ('{"name": "x", "algorithms": ["RS1"]}', "unknown algorithm"),
    ('{"name": "x", "quirks": {"forcedStatus": {"reboot": 1}}}', "unknown command"),
    ('{"name": "x", "colour": "blue"}', "unknown member"),
    ('not json', "is not JSON"),
    ('{"name": "x", "behaviour": {"pinToken": "forever"}}', 'behaviour "pinToken" must be one of'),
    ('{"name": "x", "behaviour": {"tokens": 1}}', 'unknown behaviour "tokens"'),
    ('{"name": "x", "behaviour": {"clientPinSubcommands": [1, 2, 3]}}', "clientPinSubcommands must contain 1 to 5"),
    ('{"name": "x", "versions": ["FIDO_2_0"], "pinUvAuthProtocols": [1], "behaviour": {"pinToken": "permissions"}}',
     "needs FIDO_2_1 or FIDO_2_1_PRE"),
])
def test_bad_profiles_are_clear_errors(tmp_path, content, message):
    profile = tmp_path / "p.json"
    profile.write_text(content)
    out = subprocess.run([str(find_binary()), "serve", "--transport", "udp", "--port", "0", "--flash", "memory",
                          "--profile", str(profile)], capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert message in out.stderr
    unknown = subprocess.run([str(find_binary()), "serve", "--transport", "udp", "--profile", "no-such-key"],
                             capture_output=True, text=True, timeout=30)
    assert unknown.returncode != 0 and "no profile named no-such-key" in unknown.stderr
