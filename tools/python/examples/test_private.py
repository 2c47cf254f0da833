"""A private key (transport="private", no root, no uhid): the key is a hidraw node that only the programs given its
environment see. The test hands ``key.environment`` to what it starts (here libfido2's fido2-token and a python-fido2
script; a browser takes it the same way: Selenium's ``Service(env=...)``, Playwright's ``launch(env=...)``). A
test session run inside ``fidosim run -- pytest`` (or under LD_PRELOAD=libumockdev-preload.so.0) also reaches it
in-process with ``key.device()``."""

import os
import subprocess
import sys

import pytest


@pytest.mark.fidosim(transport="private", serial="PRIVATE-1")
def test_a_program_given_the_environment_finds_the_key(fidosim_key):
    listed = subprocess.run(["fido2-token", "-L"], env=fidosim_key.subprocess_env(), capture_output=True, text=True,
                            check=True).stdout
    assert listed.startswith("/dev/hidraw0: vendor=0x1209, product=0xf1d0")
    # Without it, nothing is found: the key is private to its tree.
    outside = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "UMOCKDEV_DIR")}
    assert "0xf1d0" not in subprocess.run(["fido2-token", "-L"], env=outside, capture_output=True, text=True).stdout


@pytest.mark.fidosim(transport="private", serial="PRIVATE-2")
def test_python_fido2_in_a_program_the_test_starts(fidosim_key):
    script = ("from fido2.hid import CtapHidDevice\n"
              "from fido2.ctap2 import Ctap2\n"
              "[device] = CtapHidDevice.list_devices()\n"
              "print(device.descriptor.serial_number, Ctap2(device).info.aaguid)\n")
    out = subprocess.run([sys.executable, "-c", script], env=fidosim_key.subprocess_env(), capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("PRIVATE-2 ")
