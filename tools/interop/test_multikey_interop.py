"""Several virtual keys in one `fidosim serve` (--keys N, --config FILE), each with its own state and socket."""

from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2

from fidosim import FidosimServer, find_binary
from fidosim.control import FidosimControl
from fidosim.testing import RP, descriptor, expect_ctap_error, new_cdh, user
from fidosim.udp import open_udp_device, wait_until_ready

ES256 = [{"type": "public-key", "alg": -7}]
pytestmark = pytest.mark.skipif(os.environ.get("FIDOSIM_TRANSPORT", "udp") != "udp", reason="UDP keys")


class Keys:
    """The package's FidosimServer with several keys; .ports and .sockets in key order."""

    def __init__(self, keys: int, presence: str):
        self.server = FidosimServer(keys=keys, presence=presence, presence_delay_ms=None, notify=None).start()
        self.ports = [key.port for key in self.server.keys]
        self.sockets = [key.control_path for key in self.server.keys]

    def device(self, i):
        return open_udp_device("127.0.0.1", self.ports[i])

    def control(self, i):
        return FidosimControl(path=self.sockets[i])

    def stop(self):
        code = self.server.stop()
        stderr = self.server.stderr()
        self.server.close()
        assert code == 0, stderr


@pytest.fixture
def two_keys():
    keys = Keys(2, "prompt")
    yield keys
    keys.stop()


def test_two_keys_have_their_own_sockets_ports_and_credentials(two_keys):
    assert len(two_keys.ports) == 2 and len(set(two_keys.ports)) == 2
    assert [os.path.basename(s) for s in two_keys.sockets] == ["key.sock", "key-2.sock"]
    with two_keys.control(0) as first, two_keys.control(1) as second:
        first.presence("approve", delay_ms=0)
        second.presence("approve", delay_ms=0)
        made = Ctap2(two_keys.device(0)).make_credential(new_cdh(), RP, user("alice"), ES256)
        cred_id = made.auth_data.credential_data.credential_id
        # The backup key does not know the first key's credential: a relying party sees NO_CREDENTIALS.
        expect_ctap_error(CtapError.ERR.NO_CREDENTIALS, Ctap2(two_keys.device(1)).get_assertion,
                          "example.com", new_cdh(), [descriptor(cred_id)])
        Ctap2(two_keys.device(0)).get_assertion("example.com", new_cdh(), [descriptor(cred_id)])
        assert len(first.get_credentials()) == 1 and second.get_credentials() == []


def test_touch_the_key_you_want_to_use(two_keys):
    """authenticatorSelection on both keys; the test touches the second; the platform cancels the first."""
    results = {}
    cancel_first = threading.Event()

    def select(i, event=None):
        try:
            Ctap2(two_keys.device(i)).selection(event=event)
            results[i] = "selected"
        except CtapError as error:
            results[i] = error.code

    with two_keys.control(0) as first, two_keys.control(1) as second:
        first.subscribe()
        second.subscribe()
        threads = [threading.Thread(target=select, args=(0, cancel_first)), threading.Thread(target=select, args=(1,))]
        for t in threads:
            t.start()
        first.wait_for_event(lambda e: e["event"] == "prompt" and e["command"] == "selection")
        second.wait_for_event(lambda e: e["event"] == "prompt" and e["command"] == "selection")
        assert second.touch()["answered"] is True
        threads[1].join(10)
        cancel_first.set()  # python-fido2 sends CTAPHID_CANCEL
        threads[0].join(10)
    assert results == {1: "selected", 0: CtapError.ERR.KEEPALIVE_CANCEL}


def test_a_config_file_names_each_key(tmp_path):
    config = tmp_path / "keys.json"
    config.write_text(json.dumps({"keys": [
        {"name": "primary", "presence": "approve", "control": str(tmp_path / "primary.sock")},
        {"name": "backup", "presence": "deny", "control": str(tmp_path / "backup.sock"),
         "flash": str(tmp_path / "backup.img")},
    ]}))
    both = subprocess.run([str(find_binary()), "serve", "--config", str(config), "--keys", "2"],
                          capture_output=True, text=True, timeout=30)
    assert both.returncode != 0 and "not both" in both.stderr

    # The keys' presence and control sockets are the file's; the one without an image takes the command line's.
    server = FidosimServer(presence=None, notify=None, args=("--config", str(config))).start()
    ports = [(key.name, key.port) for key in server.keys]
    flashes = {key.name: key.record["flash"] for key in server.keys}
    try:
        assert [name for name, _ in ports] == ["primary", "backup"]
        for _, port in ports:
            assert wait_until_ready("127.0.0.1", port, total=10, is_alive=lambda: server.running)
        Ctap2(open_udp_device("127.0.0.1", ports[0][1])).make_credential(new_cdh(), RP, user("a"), ES256)
        expect_ctap_error(CtapError.ERR.OPERATION_DENIED,
                          Ctap2(open_udp_device("127.0.0.1", ports[1][1])).make_credential,
                          new_cdh(), RP, user("a"), ES256)
        assert (tmp_path / "backup.img").exists()
        # The key without an image of its own took the command line's --flash memory.
        assert flashes == {"primary": "memory", "backup": str(tmp_path / "backup.img")}
        with FidosimControl(path=str(tmp_path / "backup.sock")) as backup:
            assert backup.status()["presence"].startswith("deny")
    finally:
        assert server.close() == 0


@pytest.mark.parametrize("content, message", [
    ("[]", "expected {\"keys\": [...]}"),
    ('{"keys": [{"name": "a"}, {"name": "a"}]}', "two keys have the same name"),
    ('{"keys": [{"name": "a", "colour": "red"}]}', "unknown member \"colour\""),
    ('{"keys": [{"name": "a", "port": 70000}]}', "\"port\" must be 0 to 65535"),
    ('{"keys": [{"name": "a", "presence": "sometimes"}]}', "unknown presence"),
    ("{", "is not JSON"),
])
def test_bad_config_files_are_clear_errors(tmp_path, content, message):
    config = tmp_path / "keys.json"
    config.write_text(content)
    out = subprocess.run([str(find_binary()), "serve", "--transport", "udp", "--config", str(config)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert message in out.stderr
