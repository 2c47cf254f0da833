"""pytest plugin (registered through the `pytest11` entry point when the package is installed).

Fixtures:

- ``fidosim_key``: a virtual key started for the test and stopped after it (also when the test fails), as a
  ``fidosim.Key``: ``.device()`` (python-fido2), ``.control`` (the control socket), ``.events`` (the event stream),
  ``.port``/``.serial``. Options come from ``@pytest.mark.fidosim(profile=..., presence=..., uv=..., pin=...,
  transport=..., flash=..., keys=..., credentials=..., args=[...])``.
- A key with ``transport="private"`` is a hidraw node in a umockdev testbed of its own: ``key.environment`` is what a
  program the test starts needs to see it; ``key.device()`` works in a session that runs under umockdev's preload
  (``fidosim run -- pytest``).
- ``fidosim_server``: a factory, ``fidosim_server(**options)`` starts another key server (``.keys``, ``.key``).
- ``fidosim_pcsc``: a pcscd of the session's own with a vpcd reader (``fidosim.pcsc.PcscDaemon``); a key with
  ``transport="pcsc"`` is a card in it, and ``.device()`` is python-fido2's ``CtapPcscDevice`` (needs pyscard,
  pcscd and vsmartcard-vpcd; skips the test when pcscd cannot be started, saying why).

The binary is ``--fidosim-bin``, else $FIDOSIM_BIN, else `fidosim` on PATH. A key that died during the test, or that
did not exit cleanly on SIGTERM, fails the test at teardown with its standard error.
"""

from __future__ import annotations

import os

import pytest

from .key import FidosimServer


def pytest_addoption(parser):
    group = parser.getgroup("fidosim")
    group.addoption("--fidosim-bin", default=None, help="the fidosim binary (default: $FIDOSIM_BIN, else PATH)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "fidosim(**options): options of the fidosim_key fixture (profile, presence, uv, pin, transport, flash, "
        "keys, credentials, args)",
    )
    binary = config.getoption("--fidosim-bin", default=None)
    if binary:
        os.environ["FIDOSIM_BIN"] = os.path.abspath(binary)


def _finish(server: FidosimServer) -> None:
    alive = server.process is not None and server.process.poll() is None
    code = server.stop()
    stderr = server.stderr()
    server.close()
    if not alive:
        pytest.fail(f"fidosim died during the test (exit code {code})\nstderr:\n{stderr}", pytrace=False)
    if code != 0:
        pytest.fail(f"fidosim did not exit cleanly on SIGTERM (code {code})\nstderr:\n{stderr}", pytrace=False)


@pytest.fixture
def fidosim_server():
    """Starts key servers on demand: ``server = fidosim_server(profile="yubikey5")``; each stops after the test."""
    started: list[FidosimServer] = []

    def start(**options) -> FidosimServer:
        server = FidosimServer(**options)
        try:
            server.start()
        except BaseException:
            server.stop()
            raise
        started.append(server)
        return server

    yield start
    for server in started:
        _finish(server)


@pytest.fixture(scope="session")
def fidosim_pcsc():
    """A pcscd of the session's own whose vpcd reader the PC/SC keys join."""
    from .pcsc import PcscDaemon, PcscUnavailable

    try:
        daemon = PcscDaemon().start()
    except PcscUnavailable as error:
        pytest.skip(f"no PC/SC reader for fidosim: {error}")
    yield daemon
    daemon.stop()


@pytest.fixture
def fidosim_key(request, fidosim_server):
    """A virtual key for this test (options: ``@pytest.mark.fidosim(...)``)."""
    marker = request.node.get_closest_marker("fidosim")
    options = dict(marker.kwargs) if marker else {}
    if options.get("transport") == "pcsc" and "pcsc" not in options:
        options["pcsc"] = request.getfixturevalue("fidosim_pcsc")
    return fidosim_server(**options).key
