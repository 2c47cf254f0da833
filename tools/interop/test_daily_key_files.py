"""The files a daily key is installed with: the systemd user unit is one systemd accepts and starts `fidosim serve`
with options fidosim accepts (prompt mode, desktop notifications, the default image); the udev rules give /dev/uhid
to the fidosim group only and keep uaccess on the key's hidraw node; nothing loads uhid at boot unless asked."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from fidosim import find_binary

ROOT = Path(__file__).resolve().parents[2]


def installed_unit(directory: Path) -> Path:
    text = (ROOT / "tools/systemd/fidosim.service").read_text()
    unit = directory / "fidosim.service"
    unit.write_text(text.replace("@BIN@", str(find_binary())).replace("@DOC@", str(ROOT)))
    return unit


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze is missing")
def test_the_user_unit_is_valid_for_systemd(tmp_path):
    unit = installed_unit(tmp_path)
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True,
                            timeout=60)
    problems = [line for line in (result.stdout + result.stderr).splitlines()
                if str(unit) in line or "fidosim.service" in line]
    assert not problems, "\n".join(problems)


def test_the_user_unit_starts_a_prompting_key_with_options_fidosim_accepts(tmp_path):
    unit = installed_unit(tmp_path).read_text()
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1)
    argv = shlex.split(exec_start)
    assert argv[0] == str(find_binary()) and argv[1] == "serve"
    assert argv[argv.index("--presence") + 1] == "prompt"
    assert "--flash" not in argv  # the default image
    # Run as the unit would, on a machine without /dev/uhid: the options parse, and the error is about uhid.
    env = dict(os.environ, HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_RUNTIME_DIR=str(tmp_path / "run"))
    os.makedirs(tmp_path / "run", mode=0o700)
    result = subprocess.run(argv + ["--uhid-path", str(tmp_path / "no-uhid")], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=30, env=env)
    assert result.returncode != 0
    assert "no-uhid" in result.stderr and "Usage" not in result.stderr, result.stderr
    # It got as far as the default image.
    assert (tmp_path / "data/fidosim/default.img").exists()


def test_uhid_belongs_to_the_fidosim_group_only_and_hidraw_keeps_uaccess():
    rules = [line for line in (ROOT / "udev/70-fidosim.rules").read_text().splitlines()
             if line and not line.startswith("#")]
    uhid = [line for line in rules if 'KERNEL=="uhid"' in line]
    assert len(uhid) == 1
    assert 'GROUP="fidosim"' in uhid[0] and 'MODE="0660"' in uhid[0] and "uaccess" not in uhid[0]
    hidraw = [line for line in rules if 'KERNEL=="hidraw*"' in line]
    assert len(hidraw) == 2 and all('TAG+="uaccess"' in line for line in hidraw)
    makefile = (ROOT / "Makefile").read_text()
    install = makefile[makefile.index("install-udev:"):makefile.index("install-user-unit:")]
    # modules-load.d only with UHID_AT_BOOT=1.
    assert "modules-load.d" in install and 'UHID_AT_BOOT:-}" = 1' in install
