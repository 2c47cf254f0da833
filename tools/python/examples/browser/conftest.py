"""What the browser examples share: the site under test and Chromium's FIDO log.

The site is the example relying party of tools/browser (rp_server.py: one page with a Register and a Sign in button,
python-fido2's server behind it, which verifies every registration and sign-in by itself); in your project it is
your own site. The page shows the server's verdict as JSON in its ``#out`` element.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

# tools/browser, beside tools/python: where rp_server.py is.
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "browser"))

import rp_server  # noqa: E402


@pytest.fixture
def relying_party() -> Iterator[str]:
    """The example relying party on a free localhost port, for this test: its page's URL. A new one has no users,
    so each test registers afresh."""
    _, httpd = rp_server.start(0)
    yield f"http://localhost:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def chromium_log_args(tmp_path: Path) -> Iterator[list[str]]:
    """Chromium's switches that write its FIDO log (what chrome://device-log shows: each step of its WebAuthn dialog,
    each CTAP request and response) to a file. Headless Chromium shows why a ceremony stopped nowhere else; the
    log's last lines are printed after the test, and pytest shows them when the test failed."""
    log = tmp_path / "chromium.log"
    yield ["--enable-logging", "--v=0", "--vmodule=device_event_log*=1", f"--log-file={log}"]
    if log.exists():
        lines = [line.split("] FIDO: ", 1)[1] for line in log.read_text(errors="replace").splitlines()
                 if "] FIDO: " in line]
        print("Chromium's FIDO log, last lines:", *lines[-40:], sep="\n  ")
