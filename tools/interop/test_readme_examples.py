"""Every `sh` and `python` example of the README runs verbatim from a directory outside the clone, in the order
the README gives them, against a key the test starts as a reader would (`fidosim serve --transport udp`, name
`default`, port 8111, the default control socket). A `python` block whose first line is `# NAME.py` is a file the
next blocks use; other `python` blocks run as scripts. `text` blocks change the machine or need a real key and
are not run; every option of `serve --help` must appear in the README's options table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fidosim import FidosimServer, find_binary
from fidosim.udp import wait_until_ready

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def examples() -> list[tuple[str, str, int]]:
    """(language, code, line) of each sh and python block."""
    out = []
    for match in re.finditer(r"(?ms)^```(sh|python)\n(.*?)^```\n", README.read_text()):
        line = README.read_text()[:match.start()].count("\n") + 1
        out.append((match.group(1), match.group(2), line))
    return out


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    """A reader's shell: fidosim on PATH, python3 with the fidosim package, its own runtime and data directories,
    and the README's key running."""
    home = tmp_path_factory.mktemp("reader")
    bin_dir = home / "bin"
    bin_dir.mkdir()
    (bin_dir / "fidosim").symlink_to(find_binary())
    runtime = home / "run"
    runtime.mkdir(mode=0o700)
    # python3 is this suite's (the venv make test installs the package into): its own bin directory, so that
    # Python finds the venv.
    venv_bin = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=f"{bin_dir}:{venv_bin}:{os.environ['PATH']}", XDG_RUNTIME_DIR=str(runtime),
               XDG_DATA_HOME=str(home / "data"), HOME=str(home))
    env.pop("FIDOSIM_BIN", None)  # the package finds fidosim on PATH, as after make install
    work = home / "work"
    work.mkdir()
    # Started through the package with serve's options as given: the control socket is serve's default one.
    key = FidosimServer(binary=bin_dir / "fidosim", env=env, cwd=work, startup_timeout=20,
                        serve_args=["--transport", "udp", "--port", "8111", "--flash", "memory", "--presence",
                                    "approve", "--notify", "off"]).start()
    assert wait_until_ready("127.0.0.1", 8111, total=20, is_alive=lambda: key.running), \
        "the README's key did not start on udp 127.0.0.1:8111"
    yield env, work
    key.close()


def test_every_option_of_serve_is_in_the_options_table():
    text = subprocess.run([str(find_binary()), "serve", "--help"], capture_output=True, text=True).stdout
    options = set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", text, re.M))
    table = README.read_text().split("## Options of `fidosim serve`", 1)[1].split("\n## ", 1)[0]
    missing = sorted(o for o in options if f"`{o}" not in table)
    assert not missing, missing


def test_the_readme_has_no_stale_text():
    text = README.read_text()
    for stale in ("hid comes later", "key N is NAME-N", "](../", "udp_device.py", "tools/control"):
        assert stale not in text, stale


def test_the_examples_run_verbatim(reader):
    env, work = reader
    blocks = examples()
    assert len(blocks) >= 6
    for language, code, line in blocks:
        first = code.splitlines()[0]
        if language == "python" and re.fullmatch(r"# [\w-]+\.py", first):
            (work / first[2:]).write_text(code)
            continue
        command = ["bash", "-e", "-o", "pipefail", "-c", code] if language == "sh" else ["python3", "-c", code]
        started = time.monotonic()
        out = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, (
            f"README.md line {line} ({language}) exited {out.returncode} after {time.monotonic() - started:.0f} s\n"
            f"{code}\n--- stdout\n{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-3000:]}")
