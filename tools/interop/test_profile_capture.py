"""`fidosim profile capture` and `serve --profile captured.json`, read back by python-fido2 (an independent client):
the capture holds what python-fido2 reads from the key, a copy served from it shows the same, a replayed probe
answers what the capture says, and the round trip (tools/profile-roundtrip/roundtrip.py) finds no difference for
the built-in profiles with the most distinct choices and a quirky profile file (make profile-roundtrip runs them
all with the destructive checks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fido2 import cbor
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2

from fidosim import FidosimServer, find_binary

ROUNDTRIP = Path(__file__).resolve().parent.parent / "profile-roundtrip"


def capture(server: FidosimServer, out: Path) -> dict:
    key = server.keys[0]
    run = subprocess.run([str(find_binary()), "profile", "capture", "--device", f"udp:127.0.0.1:{key.port}",
                          "-o", str(out), "--name", "copy"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(out.read_text())


def test_the_capture_holds_what_python_fido2_reads_and_a_copy_shows_the_same(tmp_path):
    with FidosimServer(binary=find_binary(), profile="yubikey5") as original:
        document = capture(original, tmp_path / "key.json")
        device = original.keys[0].device()
        info = Ctap2(device).send_cbor(0x04)
        version, capabilities = device.device_version, device.capabilities
    captured = document["capture"]
    assert captured["version"] == 1
    # encIdentifier (0x19) is encrypted afresh at each request: the capture says the key has one.
    stable = {k: v for k, v in info.items() if k not in (0x19, 0x1E)}
    assert cbor.decode(bytes.fromhex(captured["getInfo"])[1:]) == stable
    assert captured["getInfoPerRequest"] == [0x19]
    assert tuple(captured["ctaphid"]["deviceVersion"]) == version
    assert captured["ctaphid"]["capabilities"] == capabilities
    assert "usb" not in captured  # over UDP a key has no USB identity
    assert document["aaguid"] == "a25342c03cdc44148e46f4807fca511c"
    assert document["behaviour"] == {"pinRetriesWithoutPin": "pinNotSet"}
    assert {probe["name"] for probe in captured["probes"]} >= {"unknown command 0x3f",
                                                                "getNextAssertion with nothing pending"}
    assert captured["timing"]["getInfoMs"] > 0
    with FidosimServer(binary=find_binary(), profile=str(tmp_path / "key.json")) as copy:
        device = copy.keys[0].device()
        copied = Ctap2(device).send_cbor(0x04)
        assert {k: v for k, v in copied.items() if k != 0x19} == stable and len(copied[0x19]) == 32
        assert (device.device_version, device.capabilities) == (version, capabilities)
        assert copy.keys[0].control.status()["profile"] == "copy"


def test_a_replayed_probe_answers_what_the_capture_says(tmp_path):
    """A real key's answer to an unknown command differs from fidosim's: the copy answers as the capture says."""
    with FidosimServer(binary=find_binary()) as original:
        document = capture(original, tmp_path / "key.json")
    for probe in document["capture"]["probes"]:
        if probe["name"] == "unknown command 0x3f":
            assert probe["response"] == "01" and probe["replay"] is True  # CTAP1_ERR_INVALID_COMMAND
            probe["response"] = "7f"  # what the imagined real key answered (CTAP2_ERR_VENDOR_FIRST)
    (tmp_path / "quirky.json").write_text(json.dumps(document))
    with FidosimServer(binary=find_binary(), profile=str(tmp_path / "quirky.json")) as copy:
        ctap = Ctap2(copy.keys[0].device())
        with pytest.raises(CtapError) as error:
            ctap.send_cbor(0x3F)
        assert error.value.code == 0x7F
        with pytest.raises(CtapError) as error:
            ctap.send_cbor(0x3E)  # not a probe: fidosim's own answer
        assert error.value.code == CtapError.ERR.INVALID_COMMAND


def test_a_u2f_only_key_is_captured_and_copied(tmp_path):
    with FidosimServer(binary=find_binary(), profile="u2f-only") as original:
        document = capture(original, tmp_path / "key.json")
    assert document["versions"] == ["U2F_V2"] and "getInfo" not in document["capture"]
    assert document["capture"]["probes"] == [] and len(document["capture"]["u2f"]) == 7
    with FidosimServer(binary=find_binary(), profile=str(tmp_path / "key.json")) as copy:
        device = copy.keys[0].device()
        assert device.capabilities == document["capture"]["ctaphid"]["capabilities"]


@pytest.mark.parametrize("profile", ["fidosim", "ctap20", "yubikey5", "legacy-quirks", "tiny-storage",
                                     str(ROUNDTRIP / "quirky.json")])
def test_the_round_trip_finds_no_difference(profile):
    run = subprocess.run([sys.executable, str(ROUNDTRIP / "roundtrip.py"), "--quick", profile],
                         capture_output=True, text=True, timeout=600, env={**__import__("os").environ,
                                                                              "FIDOSIM_BIN": str(find_binary())})
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("same  ")


def test_bad_captures_are_refused_with_the_member_named(tmp_path):
    base = {"name": "x", "capture": {"version": 1, "getInfo": "00a0", "probes": [], "u2f": []}}
    cases = [
        ({"version": 2}, "capture \"version\" must be 1"),
        ({"getInfo": "2e"}, "capture \"getInfo\" must be the hex of a successful answer"),
        ({"getInfo": "0081"}, "is not a CBOR map"),
        ({"probes": [{"request": "3f"}]}, "each capture probe needs"),
        ({"ctaphid": {"deviceVersion": [1, 2], "capabilities": 5}}, "capture \"ctaphid\" needs"),
        ({"usb": {"vendorId": 70000, "productId": 1}}, "capture \"usb\" needs"),
        ({"bogus": 1}, "unknown capture member \"bogus\""),
    ]
    for change, message in cases:
        document = json.loads(json.dumps(base))
        document["capture"].update(change)
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(document))
        out = subprocess.run([str(find_binary()), "serve", "--transport", "udp", "--port", "0", "--flash",
                              "memory", "--control", "off", "--profile", str(path)], capture_output=True, text=True,
                             timeout=30)
        assert out.returncode != 0 and message in out.stderr, (change, out.stderr)


def test_a_slower_key_is_copied_with_its_timing(tmp_path):
    """A capture says the key took 20 ms for INIT and 30 ms for getInfo: the copy is no faster (the capture of the
    copy measures it, less a tolerance of 25% or 2 ms), and not many times slower."""
    with FidosimServer(binary=find_binary()) as original:
        document = capture(original, tmp_path / "key.json")
    document["capture"]["timing"] = {"initMs": 20.0, "getInfoMs": 30.0}
    (tmp_path / "slow.json").write_text(json.dumps(document))
    with FidosimServer(binary=find_binary(), profile=str(tmp_path / "slow.json")) as copy:
        timing = capture(copy, tmp_path / "copy.json")["capture"]["timing"]
    for name, want in (("initMs", 20.0), ("getInfoMs", 30.0)):
        # The copy's wait is the key's own clock; the upper bound is generous, one a loaded machine meets.
        assert want - max(2.0, want * 0.25) <= timing[name] < want * 5, timing


def capture_with_touch(server: FidosimServer, out: Path) -> dict:
    key = server.keys[0]
    run = subprocess.run([str(find_binary()), "profile", "capture", "--device", f"udp:127.0.0.1:{key.port}",
                          "-o", str(out), "--touch", "--touch-command", "true"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(out.read_text())


def test_the_keepalive_cadence_during_a_touch_is_captured_and_copied(tmp_path):
    """The key approves after 600 ms (a person who takes that long): its keepalives come every 75 ms (fidosim's
    cadence); a capture that says 150 ms makes a copy whose keepalives come every 150 ms."""
    with FidosimServer(binary=find_binary(), presence_delay_ms=600) as original:
        document = capture_with_touch(original, tmp_path / "key.json")
    # The key's own cadence, a median of gaps, has a floor; the upper bounds are generous, ones a loaded machine meets.
    assert 60 <= document["capture"]["timing"]["keepaliveMs"] <= 75 * 4, document["capture"]["timing"]
    document["capture"]["timing"]["keepaliveMs"] = 150.0
    (tmp_path / "slow.json").write_text(json.dumps(document))
    with FidosimServer(binary=find_binary(), presence_delay_ms=600, profile=str(tmp_path / "slow.json")) as copy:
        timing = capture_with_touch(copy, tmp_path / "copy.json")["capture"]["timing"]
    assert 150 * 0.75 <= timing["keepaliveMs"] <= 150 * 4, timing


def capture_destructive(server: FidosimServer, out: Path, *extra: str, control: bool = True) -> tuple[dict, str]:
    key = server.keys[0]
    args = [str(find_binary()), "profile", "capture", "--device", f"udp:127.0.0.1:{key.port}", "-o", str(out),
            "--allow-destructive", *extra]
    if control:
        args += ["--control", key.control_path]
    run = subprocess.run(args, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr
    return json.loads(out.read_text()), run.stderr


def test_a_destructive_capture_records_what_python_fido2_finds_on_the_key(tmp_path):
    """`--allow-destructive` records PIN, token, credential management and capacity rules; python-fido2, doing the
    same on the same key afterwards (the capture leaves it blank), finds the same answers."""
    from fido2.ctap2 import ClientPin, CredentialManagement
    from fido2.ctap2.pin import PinProtocolV2

    with FidosimServer(binary=find_binary(), profile="tiny-storage") as key:
        document, _ = capture_destructive(key, tmp_path / "key.json")
        record = document["capture"]["destructive"]
        assert record["reset"] == "00" and record["resetAtEnd"] == "00"
        assert document["maxResidentCredentials"] == 3
        ctap = Ctap2(key.keys[0].device())
        assert not ctap.get_info().options["clientPin"], "left blank"
        pin = ClientPin(ctap, PinProtocolV2())
        pin.set_pin("31415926")
        assert pin.get_pin_retries()[0] == record["pin"]["retries"] == 8
        with pytest.raises(CtapError) as error:
            pin.set_pin("27182818")
        assert error.value.code == int(record["pin"]["setAgain"], 16) == CtapError.ERR.PIN_AUTH_INVALID
        wrong = []
        for _ in range(3):
            with pytest.raises(CtapError) as error:
                pin.get_pin_token("00000000")
            wrong.append(f"{error.value.code:02x}")
        assert wrong == record["pin"]["wrong"] == ["31", "31", "34"]
        key.keys[0].control.power_cycle()
        ctap = Ctap2(key.keys[0].device())
        pin = ClientPin(ctap, PinProtocolV2())
        token = pin.get_pin_token("31415926", ClientPin.PERMISSION.CREDENTIAL_MGMT)
        manager = CredentialManagement(ctap, pin.protocol, token)
        empty = cbor.decode(bytes.fromhex(record["credentialManagement"]["metadataEmpty"])[1:])
        assert manager.get_metadata() == empty == {1: 0, 2: 3}
        made = 0
        while True:
            token = pin.get_pin_token("31415926", ClientPin.PERMISSION.MAKE_CREDENTIAL, "capacity.fidosim.test")
            client_data_hash = bytes(32)
            try:
                ctap.make_credential(client_data_hash, {"id": "capacity.fidosim.test"},
                                     {"id": made.to_bytes(4, "big"), "name": "u"}, [{"type": "public-key", "alg": -7}],
                                     options={"rk": True},
                                     pin_uv_param=pin.protocol.authenticate(token, client_data_hash),
                                     pin_uv_protocol=pin.protocol.VERSION)
            except CtapError as error:
                assert f"{error.code:02x}" == record["capacity"]["refused"] == "28"
                break
            made += 1
        assert made == record["capacity"]["existing"] + record["capacity"]["made"] == 3


def test_a_rig_captures_destructively_with_nobody_asked(tmp_path):
    """The rig's commands (a relay script touching through the control socket, a replug command power-cycling)
    drive a key that waits for every touch; the capture is told nothing about the socket, asks nobody, and records
    what a capture through the socket records."""
    binary = str(find_binary())
    with FidosimServer(binary=binary) as plain:
        through_socket, _ = capture_destructive(plain, tmp_path / "socket.json", "--capacity-limit", "12")
    server = FidosimServer(binary=binary, presence="prompt", presence_delay_ms=None)
    server.start()
    try:
        key = server.keys[0]
        touch = tmp_path / "touch.sh"
        touch.write_text(f"#!/bin/sh\nfor i in $(seq 100); do {binary} ctl --control {key.control_path} touch "
                         ">/dev/null 2>&1 && exit 0; sleep 0.05; done\nexit 1\n")
        touch.chmod(0o755)
        replug = f"{binary} ctl --control {key.control_path} power-cycle >/dev/null"
        rig, stderr = capture_destructive(server, tmp_path / "rig.json", "--capacity-limit", "12", "--touch-command",
                                          str(touch), "--replug-command", replug, control=False)
    finally:
        assert server.stop() == 0, server.stderr()
    assert "Press Enter" not in stderr and ">>>" not in stderr, stderr
    assert rig["capture"]["destructive"] == through_socket["capture"]["destructive"]
    assert rig["capture"]["destructive"]["capacity"]["made"] == 12


def test_an_output_that_cannot_be_written_stops_the_capture_before_the_key_is_touched(tmp_path):
    with FidosimServer(binary=find_binary()) as key:
        ctap = Ctap2(key.keys[0].device())
        from fido2.ctap2 import ClientPin
        ClientPin(ctap).set_pin("31415926")
        out = subprocess.run([str(find_binary()), "profile", "capture", "--device",
                              f"udp:127.0.0.1:{key.keys[0].port}", "-o", str(tmp_path / "no" / "such" / "key.json"),
                              "--allow-destructive", "--control", key.keys[0].control_path],
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert out.returncode == 2 and "nothing was done" in out.stderr, out.stderr
        assert ctap.get_info().options["clientPin"] is True, "the key was not reset"


def test_destructive_capture_options_are_checked(tmp_path):
    binary = str(find_binary())
    cases = [
        (["--replug-command", "true"], "go with --allow-destructive"),
        (["--allow-destructive", "--capacity-limit", "0"], "--capacity-limit: 1 to 10000"),
        (["--allow-destructive", "--operator", "robot"], "terminal or stdio-json"),
        (["--allow-destructive", "--uhubctl", "1-1:2", "--replug-command", "true"], "not both"),
    ]
    for extra, message in cases:
        out = subprocess.run([binary, "profile", "capture", "--device", "udp:127.0.0.1:9", "-o",
                              str(tmp_path / "x.json"), *extra], capture_output=True, text=True, timeout=30)
        assert out.returncode != 0 and message in out.stderr, (extra, out.stderr)


def test_a_key_that_refuses_the_reset_stops_the_capture_with_the_reason(tmp_path):
    """A key that does not take the reset (here: every touch denied) still has what it held: the capture says why
    and writes nothing, rather than recording a PIN rule of a key it could not clear."""
    binary = str(find_binary())
    server = FidosimServer(binary=binary, presence="deny", presence_delay_ms=0)
    server.start()
    try:
        key = server.keys[0]
        out = subprocess.run([binary, "profile", "capture", "--device", f"udp:127.0.0.1:{key.port}", "-o",
                              str(tmp_path / "x.json"), "--allow-destructive", "--touch-command", "true",
                              "--replug-command", f"{binary} ctl --control {key.control_path} power-cycle"],
                             capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    finally:
        assert server.stop() == 0, server.stderr()
    assert out.returncode == 1, out.stderr
    assert "CTAP2_ERR_OPERATION_DENIED" in out.stderr and "starts from a blank key" in out.stderr, out.stderr
    assert not (tmp_path / "x.json").exists()


def test_a_key_that_refuses_what_the_capture_needs_stops_it_with_the_request_named(tmp_path):
    """A key whose every clientPIN answer is CTAP2_ERR_PIN_INVALID (a forced status) is reached but cannot be
    captured destructively: exit 1, getKeyAgreement and its status named, nothing written."""
    broken = {"name": "broken", "quirks": {"forcedStatus": {"clientPIN": 0x31}}}
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    with FidosimServer(binary=find_binary(), profile=str(tmp_path / "broken.json")) as key:
        out = subprocess.run([str(find_binary()), "profile", "capture", "--device",
                              f"udp:127.0.0.1:{key.keys[0].port}", "-o", str(tmp_path / "x.json"),
                              "--allow-destructive", "--control", key.keys[0].control_path],
                             capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 1, out.stderr
    assert "getKeyAgreement answered 0x31 CTAP2_ERR_PIN_INVALID" in out.stderr, out.stderr
    assert not (tmp_path / "x.json").exists()


def test_a_captured_usb_identity_yields_to_any_identity_option_given(tmp_path):
    """Served over USB/IP, a capture's USB identity is what the host imports (idVendor, idProduct in the import
    reply), unless --vendor-id, --product-id or --device-name is given: even fidosim's own default value wins then."""
    import socket
    import struct

    with FidosimServer(binary=find_binary()) as original:
        document = capture(original, tmp_path / "key.json")
    document["capture"]["usb"] = {"vendorId": 0x1050, "productId": 0x0407, "manufacturer": "Yubico",
                                  "product": "YubiKey OTP+FIDO+CCID", "serial": {"length": 10, "alphabet": "digits"}}
    (tmp_path / "usb.json").write_text(json.dumps(document))

    def imported(*options: str) -> tuple[int, int]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = FidosimServer(binary=find_binary(), transport="usbip", profile=str(tmp_path / "usb.json"),
                               args=["--usbip-port", str(port), *options])
        server.start()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(struct.pack(">HHI", 0x0111, 0x8003, 0) + b"1-1".ljust(32, b"\0"))
                reply = b""
                while len(reply) < 8 + 0x138:
                    chunk = s.recv(8 + 0x138 - len(reply))
                    assert chunk, "the server closed the connection"
                    reply += chunk
        finally:
            assert server.stop() == 0, server.stderr()
        # usbip_usb_device: path[256], busid[32], busnum, devnum, speed, then idVendor and idProduct.
        return struct.unpack(">HH", reply[8 + 300:8 + 304])

    assert imported() == (0x1050, 0x0407)
    assert imported("--vendor-id", "0x1209") == (0x1209, 0xF1D0)
    assert imported("--device-name", "fidosim virtual FIDO2 key") == (0x1209, 0xF1D0)
