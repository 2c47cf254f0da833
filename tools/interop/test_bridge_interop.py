"""`serve --transport hid` (a HID bridge board through hidapi) and `--transport gadget` (the USB gadget framework):
what can be checked on a machine without the board or a USB device controller. Both are exercised for real in
the e2e VM (tools/e2e/inside-vm.sh, groups `bridge` and `gadget`): the bridge against a uhid stand-in for the
board (tools/bridge/board_fixture.py), the gadget on dummy_hcd; there `fidosim conform` runs every check through
each of them.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from fidosim import find_binary


def serve(*args, timeout=20):
    return subprocess.run([str(find_binary()), "serve", "--flash", "memory", "--control", "off", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (["--transport", "hid"], "--transport hid needs --device VID:PID"),
    (["--transport", "hid", "--device", "12:34:56"], "expected VID:PID in hex"),
    (["--transport", "hid", "--device", "hidraw3"], "expected VID:PID in hex"),
    (["--transport", "udp", "--device", "1209:0001"], "--device is for --transport hid"),
    (["--transport", "hid", "--device", "1209:0001", "--keys", "2"], "serves one key through one device"),
    (["--transport", "hid", "--device", "1209:0001", "--hid-backend", "usb"], "--hid-backend usb: hidraw or libusb"),
    (["--transport", "udp", "--udc", "dummy_udc.0"], "--udc is for --transport gadget"),
    (["--transport", "gadget", "--keys", "2"], "--transport gadget serves one key"),
])
def test_bad_bridge_arguments_are_refused(args, message):
    out = serve(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr


@pytest.mark.parametrize("backend", ["hidraw", "libusb"])
def test_a_missing_board_is_reported(backend):
    out = serve("--transport", "hid", "--device", "1209:fffe", "--hid-backend", backend)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "no HID device 1209:fffe" in out.stderr


def test_a_missing_board_path_is_reported():
    out = serve("--transport", "hid", "--device", "/dev/hidraw-none")
    assert out.returncode == 1 and "hid:/dev/hidraw-none: cannot open it" in out.stderr


@pytest.mark.skipif(os.path.isdir("/sys/kernel/config/usb_gadget"), reason="this machine has the gadget framework")
def test_gadget_without_the_framework_says_what_to_load():
    out = serve("--transport", "gadget")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "modprobe libcomposite" in out.stderr
