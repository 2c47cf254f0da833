"""fidosim as a card in a PC/SC reader (`serve --transport pcsc`): pcscd with vsmartcard's vpcd driver presents the
key to every PC/SC client, and python-fido2's CtapPcscDevice, pcsc-tools and OpenSC reach it unmodified.

A pcscd of the test's own runs for the module (fidosim.pcsc.PcscDaemon): its vpcd reader listens on a free port, so a
desktop's reader.conf is not touched. `make interop` sets FIDOSIM_REQUIRE_PCSC=1: then a missing pcscd is a failure,
not a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest
from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction
from fido2.ctap import STATUS, CtapError
from fido2.ctap1 import Ctap1
from fido2.ctap2 import Ctap2
from fido2.ctap2.blob import LargeBlobs
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.pin import ClientPin
from fido2.server import Fido2Server
from fido2.utils import sha256
from fido2.webauthn import (
    AttestationConveyancePreference,
    PublicKeyCredentialRpEntity,
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from fidosim import FidosimServer, find_binary
from fidosim.pcsc import PcscDaemon, PcscUnavailable

smartcard = pytest.importorskip("smartcard", reason="pyscard is needed for python-fido2's PC/SC device")

RP = PublicKeyCredentialRpEntity(id="example.com", name="Example")
ORIGIN = "https://example.com"
PIN = "4711pcsc"


@pytest.fixture(scope="module")
def pcsc():
    try:
        daemon = PcscDaemon().start()
    except PcscUnavailable as error:
        if os.environ.get("FIDOSIM_REQUIRE_PCSC") == "1":
            pytest.fail(f"PC/SC tests required (FIDOSIM_REQUIRE_PCSC=1): {error}")
        pytest.skip(str(error))
    yield daemon
    daemon.stop()


@pytest.fixture
def card(pcsc, request):
    """A fidosim key that is only a card (NFC), in the first vpcd reader."""
    marker = request.node.get_closest_marker("card_args")
    args = list(marker.args) if marker else []
    server = FidosimServer(binary=find_binary(), transport="pcsc", pcsc=pcsc, args=args)
    server.start()
    yield server.key
    code = server.stop()
    assert code == 0, f"fidosim exited with {code}:\n{server.stderr()}"


class PinEntry(UserInteraction):
    def __init__(self, pin: str | None = None):
        self.pin = pin

    def request_pin(self, permissions, rp_id):
        return self.pin

    def request_uv(self, permissions, rp_id):
        return True


def client(dev, pin: str | None = None) -> Fido2Client:
    return Fido2Client(dev, client_data_collector=DefaultClientDataCollector(ORIGIN), user_interaction=PinEntry(pin))


def register_and_sign(dev, pin=None, resident=False):
    """A registration and an assertion through Fido2Client, each checked by Fido2Server."""
    server = Fido2Server(RP, attestation=AttestationConveyancePreference.DIRECT)
    user = PublicKeyCredentialUserEntity(id=os.urandom(16), name="nfc-user", display_name="NFC user")
    options, state = server.register_begin(
        user,
        resident_key_requirement=ResidentKeyRequirement.REQUIRED if resident else ResidentKeyRequirement.DISCOURAGED,
        user_verification=UserVerificationRequirement.DISCOURAGED,
    )
    fido = client(dev, pin)
    made = fido.make_credential(options.public_key)
    auth_data = server.register_complete(state, made)
    request, state = server.authenticate_begin(
        [auth_data.credential_data], user_verification=UserVerificationRequirement.DISCOURAGED)
    got = fido.get_assertion(request.public_key).get_response(0)
    server.authenticate_complete(state, [auth_data.credential_data], got)
    return auth_data


def test_card_atr_and_select_seen_by_pcsc_tools_and_opensc(card, pcsc):
    dev = card.device()  # waits until the card is in the reader
    atr = dev.get_atr()
    # A contactless card's ATR as PC/SC part 3 builds it: 3B 8n 80 01, the historical bytes, the check byte.
    assert atr[:4] == bytes([0x3B, 0x8C, 0x80, 0x01])
    assert atr[-1] == _xor(atr[1:-1])
    assert b"fidosim" in atr
    dev.close()
    listed = subprocess.run(["pcsc_scan", "-r"], capture_output=True, text=True, timeout=30)
    assert pcsc.reader(0) in listed.stdout, listed.stdout + listed.stderr
    readers = subprocess.run(["opensc-tool", "--list-readers"], capture_output=True, text=True, timeout=30)
    index = next(line.split()[0] for line in readers.stdout.splitlines() if pcsc.reader(0) in line)
    shown = subprocess.run(["opensc-tool", "--reader", index, "--atr"], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    assert atr.hex(":") in shown.stdout.lower(), shown.stdout
    # OpenSC's APDU tool as a second, independent client of the binding: SELECT, then a chained getInfo.
    select = "00:A4:04:00:08:A0:00:00:06:47:2F:00:01:00"
    sent = subprocess.run(["opensc-tool", "--reader", index, "-c", "default", "-s", select,
                           "-s", "80:10:00:00:01:04:00", "-s", "80:CB:00:00:00"],
                          capture_output=True, text=True, timeout=30)
    out = sent.stdout
    assert "SW1=0x90, SW2=0x00" in out, out + sent.stderr
    assert "U2F_V2" in out, out  # the version string of a key that speaks U2F and CTAP2
    assert "SW1=0x6D, SW2=0x00" in out, out  # an instruction the applet does not have


def _xor(data: bytes) -> int:
    value = 0
    for b in data:
        value ^= b
    return value


def test_get_info_over_nfc_lists_nfc(card):
    info = Ctap2(card.device()).get_info()
    assert info.transports == ["nfc"]
    assert info.transports_for_reset == ["nfc"]
    assert "FIDO_2_1" in info.versions


def test_fido2_client_registers_and_signs_over_nfc(card):
    register_and_sign(card.device())
    register_and_sign(card.device(), resident=True)


def test_u2f_over_nfc_with_ctap1(card):
    ctap1 = Ctap1(card.device())
    assert ctap1.get_version() == "U2F_V2"
    app = sha256(b"https://u2f.example.com")
    challenge = os.urandom(32)
    registration = ctap1.register(challenge, app)
    registration.verify(app, challenge)
    challenge = os.urandom(32)
    signature = ctap1.authenticate(challenge, app, registration.key_handle)
    signature.verify(app, challenge, registration.public_key)
    with pytest.raises(Exception):
        ctap1.authenticate(challenge, sha256(b"https://other.example"), registration.key_handle)


def test_pin_credential_management_and_large_blobs_over_nfc(card):
    dev = card.device()
    ctap = Ctap2(dev)
    ClientPin(ctap).set_pin(PIN)
    assert Ctap2(dev).get_info().options["clientPin"] is True
    register_and_sign(dev, pin=PIN, resident=True)
    # Credential management, with answers long enough to need GET RESPONSE (61XX) at Ne 256.
    for i in range(3):
        register_and_sign(dev, pin=PIN, resident=True)
    pin = ClientPin(ctap)
    token = pin.get_pin_token(PIN, ClientPin.PERMISSION.CREDENTIAL_MGMT)
    credman = CredentialManagement(ctap, pin.protocol, token)
    assert credman.get_metadata()[CredentialManagement.RESULT.EXISTING_CRED_COUNT] == 4
    rps = credman.enumerate_rps()
    assert [rp[CredentialManagement.RESULT.RP]["id"] for rp in rps] == ["example.com"]
    creds = credman.enumerate_creds(rps[0][CredentialManagement.RESULT.RP_ID_HASH])
    assert len(creds) == 4
    credman.delete_cred(creds[0][CredentialManagement.RESULT.CREDENTIAL_ID])
    assert credman.get_metadata()[CredentialManagement.RESULT.EXISTING_CRED_COUNT] == 3
    # Large blobs: a write longer than one short APDU goes out as a command chain (CLA 0x90).
    token = pin.get_pin_token(PIN, ClientPin.PERMISSION.LARGE_BLOB_WRITE)
    blobs = LargeBlobs(ctap, pin.protocol, token)
    key = os.urandom(32)
    data = os.urandom(1200)
    blobs.put_blob(key, data)
    assert LargeBlobs(ctap).get_blob(key) == data
    # A wrong PIN is counted as over USB.
    with pytest.raises(CtapError) as wrong:
        ClientPin(ctap).get_pin_token("wrong-pin")
    assert wrong.value.code == CtapError.ERR.PIN_INVALID
    assert ClientPin(ctap).get_pin_retries()[0] == 7


@pytest.mark.card_args("--presence", "prompt")
def test_in_prompt_mode_the_tap_is_not_the_touch(card):
    """Whoever drives the reader does not sign in the owner's name: in prompt mode a request over NFC waits for the
    person (here the control plane's touch), and one the person refuses is refused."""
    ctap = Ctap2(card.device())
    events = card.events
    result = {}

    def make():
        try:
            result["made"] = ctap.make_credential(
                sha256(b"x"), {"id": "example.com"}, {"id": b"u", "name": "u"}, [{"type": "public-key", "alg": -7}])
        except CtapError as error:
            result["error"] = error.code

    waiting = threading.Thread(target=make)
    waiting.start()
    assert events.wait_for("prompt", command="makeCredential")
    waiting.join(1.5)
    assert waiting.is_alive() and not result, "answered without the person"
    card.control.touch()
    waiting.join(15)
    assert result["made"].auth_data.flags & 0x01  # UP
    # The person says no: OPERATION_DENIED, as over USB.
    refused = threading.Thread(target=make)
    result.clear()
    refused.start()
    assert events.wait_for("prompt", command="makeCredential")
    card.control.refuse()
    refused.join(15)
    assert result["error"] == CtapError.ERR.OPERATION_DENIED


@pytest.mark.card_args("--presence-delay", "600")
def test_status_updates_while_the_key_waits(card):
    """NFCCTAP_MSG with P1 0x80: while the key waits, the reader polls NFCCTAP_GETRESPONSE and hears UPNEEDED."""
    seen = []
    Ctap2(card.device()).make_credential(
        sha256(b"x"), {"id": "example.com"}, {"id": b"u", "name": "u"}, [{"type": "public-key", "alg": -7}],
        on_keepalive=seen.append)
    assert STATUS.UPNEEDED in seen


@pytest.mark.card_args("--presence-delay", "10000")
def test_cancel_over_nfc(card):
    """NFCCTAP_GETRESPONSE with P1 0x11 cancels the request in flight: KEEPALIVE_CANCEL, as over HID."""
    event = threading.Event()
    threading.Timer(0.5, event.set).start()
    started = time.monotonic()
    with pytest.raises(CtapError) as cancelled:
        Ctap2(card.device()).make_credential(
            sha256(b"x"), {"id": "example.com"}, {"id": b"u", "name": "u"}, [{"type": "public-key", "alg": -7}],
            event=event)
    assert cancelled.value.code == CtapError.ERR.KEEPALIVE_CANCEL
    # Generous bound a loaded machine meets: before the 10 s presence delay would have approved it.
    assert time.monotonic() - started < 9


def test_reset_over_nfc_and_the_tap_that_starts_the_reset_window(card):
    dev = card.device()
    ClientPin(Ctap2(dev)).set_pin(PIN)
    register_and_sign(dev, pin=PIN, resident=True)
    dev.close()
    # A tap (the control plane's power cycle takes the card out of the reader and puts it back) starts the window.
    card.power_cycle()
    ctap = Ctap2(card.device(timeout=15))
    ctap.reset()
    info = ctap.get_info()
    assert info.options["clientPin"] is False


@pytest.mark.card_args("--reset-transports", "usb")
def test_reset_refused_over_nfc_when_transports_for_reset_says_usb(card):
    ctap = Ctap2(card.device())
    assert ctap.get_info().transports_for_reset == ["usb"]
    with pytest.raises(CtapError) as denied:
        ctap.reset()
    assert denied.value.code == CtapError.ERR.OPERATION_DENIED


def test_power_cycle_is_a_tap_volatile_state_goes_credentials_stay(card):
    dev = card.device()
    ctap = Ctap2(dev)
    ClientPin(ctap).set_pin(PIN)
    made = register_and_sign(dev, pin=PIN, resident=True)
    events = card.events
    card.power_cycle()
    assert events.wait_for("powerCycle", timeout=10)
    # The card left the reader and came back; pcscd saw it and powered it again.
    assert events.wait_for("field", on=True, timeout=15)
    dev = card.device(timeout=15)
    server = Fido2Server(RP)
    request, state = server.authenticate_begin(
        [made.credential_data], user_verification=UserVerificationRequirement.DISCOURAGED)
    got = client(dev, PIN).get_assertion(request.public_key).get_response(0)
    server.authenticate_complete(state, [made.credential_data], got)


def test_the_card_comes_back_when_pcscd_restarts(card, pcsc):
    """pcscd restarting (an update, a crash) takes the reader away; the card reconnects and keeps its state."""
    dev = card.device()
    ClientPin(Ctap2(dev)).set_pin(PIN)
    card.close_devices()
    pcsc.restart()
    ctap = Ctap2(card.device(timeout=20))
    assert ctap.get_info().options["clientPin"] is True
    # The reader powered the card anew: a card-only key starts over (a new PIN token is needed, and works).
    ClientPin(ctap).get_pin_token(PIN)


def test_one_key_on_usb_and_nfc(pcsc):
    """`--transport udp --transport pcsc`: a dual-interface key. A credential made over USB signs over NFC."""
    server = FidosimServer(binary=find_binary(), transport="udp", args=["--transport", "pcsc", "--vpcd-port",
                                                                           str(pcsc.port)])
    server.pcsc = pcsc
    with server:
        key = server.key
        usb = key.device()
        info = Ctap2(usb).get_info()
        assert info.transports == ["nfc", "usb"]
        assert info.transports_for_reset == ["nfc", "usb"]
        made = register_and_sign(usb, resident=True)
        key.transport = "pcsc"
        nfc = key.device()
        server_rp = Fido2Server(RP)
        request, state = server_rp.authenticate_begin(
            [made.credential_data], user_verification=UserVerificationRequirement.DISCOURAGED)
        got = client(nfc).get_assertion(request.public_key).get_response(0)
        server_rp.authenticate_complete(state, [made.credential_data], got)
        assert Ctap2(nfc).get_info().transports == ["nfc", "usb"]
    assert server.process.returncode == 0, server.stderr()


def test_conform_runs_every_check_of_the_nfc_binding_hands_free(card, pcsc, tmp_path):
    """`fidosim conform --device pcsc:READER`: the NFC group and every CTAP2 and U2F group, 0 failures, driven
    through the control socket (a power cycle takes the card off the reader and puts it back)."""
    binary = str(find_binary())
    listed = subprocess.run([binary, "conform", "--list-devices"], capture_output=True, text=True, timeout=60)
    assert f"pcsc:{pcsc.reader(0)}" in listed.stdout, listed.stdout
    out = subprocess.run([binary, "conform", "--device", f"pcsc:{pcsc.reader(0)}", "--control", card.control_path,
                          "--allow-destructive", "--report", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    every = subprocess.run([binary, "conform", "--list"], capture_output=True, text=True, check=True)
    expected = [line.split("\t")[0] for line in every.stdout.splitlines() if not line.startswith("hid.")]
    ids = [check["id"] for check in report["checks"]]
    assert ids == expected, "every check but CTAPHID's ran, in --list order"
    assert report["totals"] == {"passed": len(ids), "failed": 0, "skipped": 0}
    nfc = [check for check in report["checks"] if check["group"] == "nfc"]
    assert len(nfc) >= 9 and all(check["status"] == "passed" for check in nfc)
    # What the runner saw is what python-fido2 reads from the card.
    info = Ctap2(card.device()).get_info()
    assert report["device"]["aaguid"].replace("-", "") == bytes(info.aaguid).hex()


def test_conform_asks_a_person_to_keep_a_card_on_the_reader(card, pcsc):
    """Without a control socket the runner asks the person: for a card, no touch, the card stays on the reader."""
    out = subprocess.run([str(find_binary()), "conform", "--device", f"pcsc:{pcsc.reader(0)}", "--no-control",
                          "--only", "nfc,make-credential"],
                         capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout + out.stderr
    assert ">>> keep the key on the reader" in out.stderr
    assert ">>> touch the key" not in out.stderr
    assert "0 failed" in out.stdout


def test_conform_names_a_reader_that_is_not_there(pcsc):
    out = subprocess.run([str(find_binary()), "conform", "--device", "pcsc:no such reader", "--no-control"],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "no reader's name contains 'no such reader'" in out.stderr
