"""Keys added and removed while fidosim runs, through the hub socket (`serve --hub`; firmware-spec/control.md, The
hub): WebDriver's options become what python-fido2 reads in getInfo and meets in makeCredential, a removed key stops
answering, a private key appears in and leaves a tree whose programs are running, and the hub refuses other users
and bad requests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2
from fido2.hid import CAPABILITY

from fidosim import (
    FailedError,
    FidosimServer,
    InvalidParamsError,
    NotFoundError,
    UnknownCommandError,
    VirtualAuthenticatorOptions,
    find_binary,
)
from fidosim.testing import control_lines_as_nobody, new_cdh, user
from fidosim.udp import probe_init

pytestmark = pytest.mark.skipif(os.environ.get("FIDOSIM_TRANSPORT", "udp") != "udp", reason="keys of their own")
ES256 = [{"type": "public-key", "alg": -7}]
SWITCHED = {"largeBlobKey", "credBlob", "minPinLength", "hmac-secret", "hmac-secret-mc"}


@pytest.fixture
def server():
    with FidosimServer(binary=find_binary(), keys=0, hub=True) as started:
        yield started


def make_credential(ctap: Ctap2, rk: bool, uv: bool = False):
    options = {"rk": True} if rk else {}
    if uv:
        options["uv"] = True
    return ctap.make_credential(new_cdh(), {"id": "example.com", "name": "Example"}, user("hub"), ES256,
                                options=options or None)


def test_webdriver_defaults_are_a_key_without_resident_keys_uv_or_the_optional_extensions(server):
    key = server.add_key()
    assert key.name == "authenticator-1"
    info = Ctap2(key.device()).info
    assert info.options["rk"] is False
    assert "uv" not in info.options
    assert not SWITCHED & set(info.extensions)
    assert "credProtect" in info.extensions
    with pytest.raises(CtapError) as refused:
        make_credential(Ctap2(key.device()), rk=True)
    assert refused.value.code == CtapError.ERR.UNSUPPORTED_OPTION
    # A non-discoverable credential is made as on any key.
    assert make_credential(Ctap2(key.device()), rk=False).auth_data.credential_data is not None


def test_options_become_the_keys_get_info(server):
    key = server.add_key(VirtualAuthenticatorOptions(has_resident_key=True, has_user_verification=True,
                                                     is_user_verified=True, extensions=["largeBlob"], has_prf=True,
                                                     default_backup_eligibility=True, name="passkeys"))
    ctap = Ctap2(key.device())
    info = ctap.info
    assert info.options["rk"] is True and info.options["uv"] is True
    assert {"largeBlobKey", "hmac-secret"} <= set(info.extensions)
    assert not {"credBlob", "minPinLength"} & set(info.extensions)
    made = make_credential(ctap, rk=True, uv=True)
    assert made.auth_data.is_user_verified()
    assert made.auth_data.flags & 0x08, "backup eligible by the option defaultBackupEligibility"
    [stored] = key.control.get_credentials()
    assert stored["isResidentCredential"] is True and stored["rpId"] == "example.com"
    # isUserVerified false: the finger is not recognised, as the key's setUserVerified says.
    key.control.set_user_verified(False)
    with pytest.raises(CtapError):
        make_credential(Ctap2(key.device()), rk=True, uv=True)


def test_protocols_choose_the_keys_generation(server):
    u2f = server.add_key({"protocol": "ctap1/u2f"})
    device = u2f.device()
    assert not device.capabilities & CAPABILITY.CBOR
    assert not device.capabilities & CAPABILITY.NMSG, "it speaks U2F"
    ctap20 = server.add_key({"protocol": "ctap2", "ctap2Version": "ctap2_0"})
    assert Ctap2(ctap20.device()).info.versions == ["U2F_V2", "FIDO_2_0"]
    ctap21 = server.add_key({"protocol": "ctap2_1"})
    assert "FIDO_2_1" in Ctap2(ctap21.device()).info.versions


def test_a_user_who_does_not_consent_denies(server):
    key = server.add_key(VirtualAuthenticatorOptions(is_user_consenting=False))
    with pytest.raises(CtapError) as denied:
        make_credential(Ctap2(key.device()), rk=False)
    assert denied.value.code == CtapError.ERR.OPERATION_DENIED


def test_a_removed_key_stops_answering_and_the_others_go_on(server):
    first = server.add_key()
    second = server.add_key()
    assert [k["authenticatorId"] for k in server.hub.list_virtual_authenticators()] == [first.name, second.name]
    host, port = first.host, first.port
    assert probe_init(host, port, timeout=2)
    server.remove_key(first)
    assert not probe_init(host, port, timeout=0.5)
    assert not os.path.exists(first.control_path), "its control socket goes with it"
    assert [k["authenticatorId"] for k in server.hub.list_virtual_authenticators()] == [second.name]
    assert Ctap2(second.device()).info.options["rk"] is False
    with pytest.raises(NotFoundError):
        server.hub.remove_virtual_authenticator(first.name)
    # The name is free again.
    again = server.add_key({"name": first.name})
    assert probe_init(again.host, again.port, timeout=2)


@pytest.mark.parametrize("params, says", [
    ({"transport": "ble"}, "not simulated"),
    ({"extensions": ["devicePubKey"]}, "unknown extension"),
    ({"protocol": "ctap3"}, "protocol"),
    ({"name": "../x"}, "name"),
    ({"defaultBackupState": True}, "defaultBackupEligibility"),
    ({"hasResidentKey": "yes"}, "boolean"),
    ({"colour": "red"}, "unknown parameter"),
])
def test_bad_options_are_refused_and_add_nothing(server, params, says):
    with pytest.raises(InvalidParamsError) as refused:
        server.hub.add_virtual_authenticator(params)
    assert says in str(refused.value)
    assert server.hub.list_virtual_authenticators() == []


def test_a_name_in_use_is_refused(server):
    server.add_key({"name": "twin"})
    with pytest.raises(InvalidParamsError, match="served already"):
        server.hub.add_virtual_authenticator({"name": "twin"})


def test_the_hub_and_the_keys_keep_to_their_own_commands(server):
    key = server.add_key()
    with pytest.raises(UnknownCommandError, match="own control socket"):
        server.hub.request("status")
    with pytest.raises(UnknownCommandError, match="hub socket"):
        key.control.request("addVirtualAuthenticator")


def test_keys_zero_needs_a_hub_and_the_hub_needs_a_hot_plug_transport():
    binary = str(find_binary())
    done = subprocess.run([binary, "serve", "--keys", "0", "--transport", "udp"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and "--hub" in done.stderr
    done = subprocess.run([binary, "serve", "--transport", "usbip", "--hub", "/tmp/fidosim-hub-refused.sock"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "private, uhid and UDP" in done.stderr


# A program that runs in the private key's tree the whole time: it finds no key, then the key the test adds (a
# hot-plugged hidraw node, seen through umockdev's uevents by the running process), then none once it is removed.
WATCHER = textwrap.dedent("""
    import sys, time
    from fido2.hid import CtapHidDevice
    from fido2.ctap2 import Ctap2

    def serials():
        return sorted(d.descriptor.serial_number for d in CtapHidDevice.list_devices())

    def wait_for(expected):
        deadline = time.monotonic() + 20
        while serials() != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        return serials()

    print("start", serials(), flush=True)
    for line in sys.stdin:
        expected = line.split()
        print("seen", wait_for(expected), flush=True)
        if expected:
            [device] = [d for d in CtapHidDevice.list_devices() if d.descriptor.serial_number == expected[-1]]
            print("aaguid", Ctap2(device).info.aaguid, flush=True)
""")


def test_a_running_program_sees_private_keys_come_and_go():
    with FidosimServer(binary=find_binary(), transport="private", keys=0, hub=True) as private:
        watcher = subprocess.Popen([sys.executable, "-c", WATCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True, env=private.subprocess_env())
        try:
            assert watcher.stdout.readline().strip() == "start []"
            first = private.add_key({"serial": "HUB-1"})
            assert first.record["devnode"].startswith("/dev/hidraw")
            watcher.stdin.write("HUB-1\n")
            watcher.stdin.flush()
            assert watcher.stdout.readline().strip() == "seen ['HUB-1']"
            assert watcher.stdout.readline().startswith("aaguid ")
            private.add_key({"serial": "HUB-2", "profile": "yubikey5"})
            watcher.stdin.write("HUB-1 HUB-2\n")
            watcher.stdin.flush()
            assert watcher.stdout.readline().strip() == "seen ['HUB-1', 'HUB-2']"
            assert watcher.stdout.readline().strip() == "aaguid a25342c0-3cdc-4414-8e46-f4807fca511c"
            private.remove_key(first)
            watcher.stdin.write("HUB-2\n")
            watcher.stdin.flush()
            assert watcher.stdout.readline().strip() == "seen ['HUB-2']"
        finally:
            watcher.stdin.close()
            watcher.wait(timeout=30)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another user")
def test_another_user_is_refused_by_the_hub(server):
    # Open the file-system permissions so that the check of the peer's uid is what refuses.
    os.chmod(os.path.dirname(server.hub_path), 0o755)
    os.chmod(server.hub_path, 0o666)
    [line] = control_lines_as_nobody(server.hub_path, '{"id":1,"command":"addVirtualAuthenticator"}')
    message = json.loads(line)
    assert message["ok"] is False and message["error"]["code"] == "permission-denied"
    assert server.hub.list_virtual_authenticators() == [], "the refused request added no key"


def test_a_key_without_resident_keys_takes_non_resident_credentials_only(server):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from fidosim import FailedError

    key = server.add_key()
    pkcs8 = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    key.control.add_credential(b"\x01" * 16, "example.com", pkcs8, resident=False)
    assert [c["isResidentCredential"] for c in key.control.get_credentials()] == [False]
    with pytest.raises(FailedError, match="no discoverable credentials"):
        key.control.add_credential(b"\x02" * 16, "example.com", pkcs8, resident=True, user_handle=b"u")


def test_a_removed_private_key_gives_its_descriptors_back():
    """Keys added and removed on the private transport: what fidosim opened for each (the run loop's wake-up pipe,
    its own descriptor of the node's terminal) is closed when the key goes; what umockdev keeps for a removed node
    (the terminal it made, the socket of the node's handler) is counted and printed, at most 2 a key."""
    with FidosimServer(binary=find_binary(), transport="private", keys=0, hub=True) as private:
        pid = private.process.pid
        private.hub.list_virtual_authenticators()
        before = len(os.listdir(f"/proc/{pid}/fd"))
        ids = [private.add_key({"serial": f"FD-{n}"}) for n in range(10)]
        with_keys = len(os.listdir(f"/proc/{pid}/fd"))
        for key_id in ids:
            private.remove_key(key_id)
        after = len(os.listdir(f"/proc/{pid}/fd"))
        print(f"descriptors: {before} with no key, {with_keys} with 10, {after} after removing them: "
              f"{(after - before) / 10:.1f} a removed key keeps")
        assert with_keys > before and after - before <= 2 * 10, (before, with_keys, after)


def test_a_profile_that_is_a_fifo_or_a_device_is_refused_at_once(server, tmp_path):
    """A key added through the hub names its profile while every key is served: a FIFO (which would block the read
    until someone writes) or a device is refused at once, and the keys already there go on answering."""
    first = server.hub.add_virtual_authenticator(VirtualAuthenticatorOptions())
    fifo = tmp_path / "profile.json"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        with pytest.raises(FailedError, match="not a regular file"):
            server.hub.add_virtual_authenticator({"profile": path})
    [entry] = server.hub.list_virtual_authenticators()
    assert entry["authenticatorId"] == first["authenticatorId"]
    assert probe_init(entry["transport"]["host"], entry["transport"]["port"], timeout=5)
