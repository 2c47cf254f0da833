"""A whole pytest session inside `fidosim run` (test-install.sh runs it so:
``fidosim run --serial RUN-KEY --flash memory --control off -- python -m pytest run_session_test_private.py``): the
run's own key is there for every test, and a fixture's private key joins in for its test with ``key.device()``."""

import pytest
from fido2.ctap2 import Ctap2
from fido2.hid import CtapHidDevice


def test_the_run_s_key_is_there():
    assert [d.descriptor.serial_number for d in CtapHidDevice.list_devices()] == ["RUN-KEY"]


@pytest.mark.fidosim(transport="private", serial="FIXTURE-KEY")
def test_a_fixture_key_in_process(fidosim_key):
    device = fidosim_key.device()
    assert device.descriptor.serial_number == "FIXTURE-KEY"
    assert "FIDO_2_1" in Ctap2(device).info.versions


def test_after_it_the_run_s_key_again():
    assert [d.descriptor.serial_number for d in CtapHidDevice.list_devices()] == ["RUN-KEY"]
