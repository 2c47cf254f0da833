"""`make install`: the binary, a man page per command generated from the argument parser, and the shell completion
the binary writes; each is what a user's tools read (man, bash's complete)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fidosim import find_binary

ROOT = Path(__file__).resolve().parents[2]


def serve_options() -> set[str]:
    text = subprocess.run([str(find_binary()), "serve", "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", text, re.M)) - {"--help", "--version"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if not shutil.which("make"):
        pytest.skip("make is missing")
    prefix = tmp_path_factory.mktemp("prefix")
    out = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "install", f"PREFIX={prefix}",
                          "INSTALL_CONFIG=debug"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return prefix


def test_the_installed_binary_runs(installed):
    out = subprocess.run([str(installed / "bin/fidosim"), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip()


@pytest.mark.skipif(not shutil.which("man"), reason="man is missing")
def test_man_shows_every_option_of_serve(installed):
    env = dict(os.environ, MANPATH=str(installed / "share/man"), MANWIDTH="200", LC_ALL="C", LANG="C")
    page = subprocess.run(["man", "fidosim.serve"], capture_output=True, text=True, env=env, timeout=60).stdout
    missing = sorted(option for option in serve_options() if option not in page)
    assert page and not missing, missing
    top = subprocess.run(["man", "fidosim"], capture_output=True, text=True, env=env, timeout=60).stdout
    for command in ("serve", "ctl", "credentials", "conform", "profiles", "flash"):
        assert command in top


def test_bash_completes_the_subcommands(installed):
    script = installed / "share/bash-completion/completions/fidosim"
    out = subprocess.run(["bash", "-c", f'source "{script}" && complete -p fidosim && '
                                        'COMP_WORDS=(fidosim se) COMP_CWORD=1 COMP_LINE="fidosim se" '
                                        'COMP_POINT=10 _fidosim && printf "%s\\n" "${COMPREPLY[@]}"'],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PATH=f"{installed / 'bin'}:{os.environ['PATH']}"))
    assert out.returncode == 0, out.stderr
    assert "serve" in out.stdout.split()
    for shell_file in ("share/zsh/site-functions/_fidosim", "share/fish/vendor_completions.d/fidosim.fish"):
        assert "serve" in (installed / shell_file).read_text()
