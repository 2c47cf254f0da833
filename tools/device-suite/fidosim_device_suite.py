"""pytest plugin: python-fido2's own device tests (`tests/device` of its source distribution) against fidosim.

    python3 -m pytest -p fidosim_device_suite --fidosim-config default SDIST/tests/device

The suite was written for a real key on USB, a person who touches it and plugs it in, or a "Pico controller"
(an HTTP endpoint that switches a USB port's power and presses the key's button). This plugin stands in for all
three without changing a line of the suite:

- it starts `fidosim serve` (UDP, in-memory flash, its own control socket) in the configuration named by
  `--fidosim-config` (CONFIGS below), or, with `--fidosim-hidraw`, drives a key already running as a uhid device
  (the VM run) through its control socket;
- over UDP it replaces `fido2.hid`'s discovery (`list_descriptors`, `open_connection`, `open_device`) before the
  suite imports it, so the suite finds the key as one HID device whose path changes at every replug, as a hidraw
  node's does;
- it serves the Pico controller's HTTP interface on a free local port and hands its address to the suite
  (`--controller`): `power/off` unplugs the key, `power/on` plugs it back in (a power cycle: volatile state goes,
  credentials stay), `touch/on` touches it (the key runs with `--presence prompt`, so every touch the suite asks
  for is one the suite gave);
- it deselects by name the tests that encode one vendor's choice where the configuration makes the other (each
  with its reason, printed in the summary), and passes `--ep-rp-id` for the enterprise-attestation configuration.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

import fido2.hid  # noqa: E402
from fido2.hid.base import HidDescriptor  # noqa: E402

from fidosim import FidosimServer, KeyStartError  # noqa: E402
from fidosim.control import FidosimControl  # noqa: E402
from fidosim.udp import REPORT_SIZE, UdpCtapHidConnection  # noqa: E402

EP_RP_ID = "ep.example.com"

# Each configuration: the arguments of `fidosim serve`, whether a batch attestation is provisioned first, and
# the tests deselected (node id suffix -> why).
# Where the default profile answers as CTAP 2.1 says or as most keys do, and the suite expects the YubiKey 5's choice
# (firmware-spec/commands.md, "Where the specification leaves a choice"): deselected on the configurations of the
# default profile, run on yubikey5.
DEFAULT_CHOICES = {
    "test_clientpin.py::test_set_and_reset": "getPINRetries without a PIN answers the count (CTAP 2.1 6.5.5.2; "
    "trussed, pico-fido, solo); the YubiKey 5 answers PIN_NOT_SET",
}

CONFIGS: dict[str, dict] = {
    "default": {"args": [], "batch": True, "deselect": DEFAULT_CHOICES},
    # The suite asks for fingerprints in prose only ("Press your fingerprint against the sensor now..."): the
    # simulated user answers every request, a matching finger for the sensor, a touch otherwise.
    "fingerprint": {"args": ["--uv", "fingerprint"], "presence": "approve", "batch": True,
                    "deselect": DEFAULT_CHOICES},
    "ep": {"args": ["--ep-rp", EP_RP_ID], "batch": True, "ep_rp_id": EP_RP_ID, "deselect": DEFAULT_CHOICES},
    "yubikey5": {"args": ["--profile", "yubikey5"], "batch": True, "deselect": {}},
}


def pytest_addoption(parser):
    group = parser.getgroup("fidosim")
    group.addoption("--fidosim-config", default="default", choices=sorted(CONFIGS),
                    help="which fidosim configuration the suite runs against")
    group.addoption("--fidosim-hidraw", action="store_true",
                    help="the key is already running as a uhid device; reach it through hidraw and drive it through "
                         "--fidosim-socket")
    group.addoption("--fidosim-socket", default=None, help="control socket of the running key (--fidosim-hidraw)")
    group.addoption("--fidosim-serial", default=None,
                    help="--fidosim-hidraw: the key's USB serial number; other HID devices are not listed")
    group.addoption("--fidosim-pcsc", default=None, choices=["nfc", "ccid"],
                    help="serve the key as a card in a vpcd reader of a pcscd of the run's own and hand the suite "
                         "that reader (--reader): the suite's NFC mode, or its --ccid mode (a USB key with a "
                         "smart-card interface: the key is also on USB, and its reader goes away while unplugged)")


# -- the key ------------------------------------------------------------------------------------------------------


class Key:
    """The key under test: its control connection, and over UDP its process and port."""

    def __init__(self):
        self.server: FidosimServer | None = None  # over UDP or PC/SC: the package's launcher
        self.port = 0
        self.socket_path = ""
        self.plugged = True
        self.generation = 0  # changes at every replug, so the device's path does
        self.udp = True
        self.serial: str | None = None  # over hidraw: the key's USB serial number
        self.pcsc = None  # the PcscDaemon whose reader holds the card (--fidosim-pcsc)
        self.ccid = False  # --fidosim-pcsc ccid: the reader is the key's own, gone while it is unplugged
        self.reader = ""  # the PC/SC reader the card is in

    def start(self, config: dict):
        options = {"presence": config.get("presence", "prompt"), "presence_delay_ms": None, "notify": None,
                   "args": config["args"]}
        if self.pcsc is not None:
            self.udp = False
            index = int(os.environ.get("FIDOSIM_PCSC_READER", "0"))
            self.reader = self.pcsc.reader(index)
            if self.ccid:
                # A USB key whose card interface is CCID: on USB (HID) too, so reset is allowed over USB.
                options["args"] = ["--transport", "pcsc", "--vpcd-port", str(self.pcsc.port + index), *config["args"]]
            else:
                options.update(transport="pcsc", pcsc=self.pcsc, pcsc_reader=index)
        try:
            self.server = FidosimServer(**options).start()
        except KeyStartError as error:
            raise pytest.UsageError(f"fidosim did not start: {error}") from None
        key = self.server.key
        self.socket_path = key.control_path
        self.port = key.port or 0
        if self.pcsc is not None:
            # Wait until the card is in the reader, so the suite's first connection finds it.
            from fidosim.pcsc import open_pcsc_device

            open_pcsc_device(self.reader, timeout=20).close(release=True)
        if config.get("batch"):
            subprocess.run([str(self.server.binary), "attestation", "provision", "--control", self.socket_path,
                            "--root-out", os.path.join(self.server.directory, "root.pem")],
                           check=True, stdout=subprocess.DEVNULL)

    def attach(self, socket_path: str, serial: str | None):
        self.udp = False
        self.socket_path = socket_path
        self.serial = serial

    def control(self, command: str, **params):
        with FidosimControl(path=self.socket_path) as control:
            return control.request(command, **params)

    def stop(self):
        if self.server is not None:
            self.server.close()
        if self.pcsc is not None:
            self.pcsc.stop()

    # -- discovery over UDP, as fido2.hid's functions --------------------------------------------------------

    def descriptor(self) -> HidDescriptor:
        return HidDescriptor(path=f"udp:127.0.0.1:{self.port}#{self.generation}", vid=0x1209, pid=0xF1D0,
                             report_size_in=REPORT_SIZE, report_size_out=REPORT_SIZE,
                             product_name="fidosim", serial_number=None)

    def list_descriptors(self):
        return [self.descriptor()] if self.plugged else []

    def open_connection(self, descriptor):
        if not self.plugged or descriptor.path != self.descriptor().path:
            raise OSError(f"no such device: {descriptor.path}")
        return UdpCtapHidConnection("127.0.0.1", self.port, timeout=35.0)

    def open_device(self, path):
        descriptor = self.descriptor()
        if path != descriptor.path:
            raise OSError(f"no such device: {path}")
        return fido2.hid.CtapHidDevice(descriptor, self.open_connection(descriptor))

    # -- what the Pico controller does ----------------------------------------------------------------------

    def power(self, on: bool):
        """The port's power: off unplugs the key (for at most a minute), on plugs it back in, a power cycle."""
        if on and not self.plugged:
            self.control("powerCycle")
            self.generation += 1
            self.plugged = True
        elif not on and self.plugged:
            self.control("powerCycle", offMs=60_000)
            self.plugged = False

    def touch(self):
        try:
            self.control("touch")
        except Exception:  # noqa: BLE001 - a touch with nothing waiting is not an error for the suite
            pass


KEY = Key()

# Routed before the suite's conftest does `from fido2.hid import list_descriptors, ...`.
_real = (fido2.hid.list_descriptors, fido2.hid.open_connection, fido2.hid.open_device)


def _list_descriptors():
    if KEY.udp:
        return KEY.list_descriptors()
    # Over hidraw: only the key under test (other keys may be plugged in, as in the VM run).
    return [d for d in _real[0]() if KEY.serial is None or d.serial_number == KEY.serial]


def _open_connection(descriptor):
    return KEY.open_connection(descriptor) if KEY.udp else _real[1](descriptor)


def _open_device(path):
    return KEY.open_device(path) if KEY.udp else _real[2](path)


fido2.hid.list_descriptors = _list_descriptors
fido2.hid.open_connection = _open_connection
fido2.hid.open_device = _open_device

# The suite's --ccid mode is for a USB key with a smart-card interface: its reader is the key itself, so an unplugged
# key's reader is gone, and the suite waits for that at a replug. vpcd's reader stays: while the key is unplugged
# it is left out of python-fido2's reader list (the suite imports `_list_readers` at each call).
try:
    import fido2.pcsc as _fido2_pcsc
except ImportError:  # no pyscard: no PC/SC run either
    _fido2_pcsc = None
else:
    _real_list_readers = _fido2_pcsc._list_readers

    def _list_readers():
        readers = _real_list_readers()
        if KEY.ccid and not KEY.plugged and KEY.pcsc is not None:
            return [reader for reader in readers if reader.name != KEY.reader]
        return readers

    _fido2_pcsc._list_readers = _list_readers


# -- the Pico controller -----------------------------------------------------------------------------------------


class ControllerHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        parts = [p for p in self.path.split("/") if p]
        status = 200
        if len(parts) == 3 and parts[1] == "power":
            KEY.power(parts[2] == "on")
        elif len(parts) == 3 and parts[1] == "touch":
            if parts[2] == "on":
                # The suite turns the button on and keeps it pressed for 10 s; the key asks for a touch at most
                # once per request, so a press is a touch of the request waiting now or arriving soon.
                threading.Thread(target=self.server.press, daemon=True).start()
        elif parts:
            status = 404
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class Controller(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), ControllerHandler)

    def press(self):
        """Holds the button for up to 10 s: touches whatever asks for one in that time (once)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if KEY.control("touch").get("answered"):
                    return
            except Exception:  # noqa: BLE001
                return
            time.sleep(0.05)


CONTROLLER: Controller | None = None


def pytest_configure(config):
    global CONTROLLER
    name = config.getoption("fidosim_config")
    fidosim = CONFIGS[name]
    if config.getoption("fidosim_hidraw"):
        socket_path = config.getoption("fidosim_socket")
        if not socket_path:
            raise pytest.UsageError("--fidosim-hidraw needs --fidosim-socket")
        KEY.attach(socket_path, config.getoption("fidosim_serial"))
    else:
        mode = config.getoption("fidosim_pcsc")
        if mode:
            from fidosim.pcsc import PcscDaemon

            # $FIDOSIM_PCSC_PORT: a pcscd run.sh holds for several runs at once (reader $FIDOSIM_PCSC_READER).
            port = os.environ.get("FIDOSIM_PCSC_PORT")
            KEY.pcsc = PcscDaemon.attach(int(port)) if port else PcscDaemon().start()
            KEY.ccid = mode == "ccid"
            config.option.reader = KEY.pcsc.reader(int(os.environ.get("FIDOSIM_PCSC_READER", "0")))
            config.option.ccid = KEY.ccid
        KEY.start(fidosim)
    CONTROLLER = Controller()
    threading.Thread(target=CONTROLLER.serve_forever, daemon=True).start()
    config.option.controller = f"http://127.0.0.1:{CONTROLLER.server_address[1]}"
    config.option.pico_port = 1
    if fidosim.get("ep_rp_id"):
        config.option.ep_rp_id = fidosim["ep_rp_id"]
    config._fidosim_deselect = fidosim["deselect"]
    config._fidosim_deselected = []


def pytest_unconfigure(config):
    if CONTROLLER is not None:
        CONTROLLER.shutdown()
    KEY.stop()


def pytest_collection_modifyitems(config, items):
    rules = config._fidosim_deselect
    keep, drop = [], []
    for item in items:
        reason = next((why for name, why in rules.items() if item.nodeid.endswith(name) or
                       item.nodeid.split("[")[0].endswith(name)), None)
        if reason is None:
            keep.append(item)
        else:
            drop.append(item)
            config._fidosim_deselected.append((item.nodeid, reason))
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_terminal_summary(terminalreporter, config):
    name = config.getoption("fidosim_config")
    terminalreporter.write_sep("-", f"fidosim configuration {name}: deselected {len(config._fidosim_deselected)}")
    for nodeid, reason in config._fidosim_deselected:
        terminalreporter.write_line(f"{nodeid}: {reason}")
