"""Fixtures: a key per test, started through the package's launcher (``fidosim.FidosimServer``).

The suite runs through the installed `fidosim` package (tools/python; `make interop` installs it into a fresh
venv): by default the key is served over UDP and reached with `fidosim.udp`. With FIDOSIM_TRANSPORT=uhid (inside the
end-to-end VM, where /dev/uhid exists) it is served as a kernel uhid device and reached through python-fido2's
own Linux hidraw backend; a power cycle is then SIGUSR1, which unplugs and re-plugs the device. With
FIDOSIM_TRANSPORT=private (no root, no uhid) each key is a private hidraw node (`serve --transport private`) and the
suite, which runs under umockdev's preload library (LD_PRELOAD=libumockdev-preload.so.0), points UMOCKDEV_DIR at
the running key's testbed: python-fido2's hidraw backend then finds it as it finds the uhid key.

The fixtures: ``sim`` (a key for the test, options through @pytest.mark.sim_args), ``start_sim`` (more keys, started
in the test), ``image_key`` (a key on a flash image file, started again on the same image to see what survives a
restart) and ``notify_stack`` (a private desktop, notifystack.py). What the test files share otherwise is the
package's ``fidosim.testing``; the binary is the package's ``find_binary()`` ($FIDOSIM_BIN, by default this clone's
debug build).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fidosim import FidosimControl, FidosimServer, Key, KeyStartError

from notifystack import notify_stack  # noqa: F401 - the private desktop of the notification tests, a fixture

REPO = Path(__file__).resolve().parents[2]
TRANSPORT = os.environ.get("FIDOSIM_TRANSPORT", "udp")
# The transports whose key is a hidraw node that python-fido2's own backend finds.
HIDRAW = TRANSPORT in ("uhid", "private")
STARTUP_TIMEOUT = 10.0 if TRANSPORT == "udp" else 30.0
if TRANSPORT == "private" and "libumockdev-preload" not in os.environ.get("LD_PRELOAD", ""):
    raise SystemExit("FIDOSIM_TRANSPORT=private: run the suite under LD_PRELOAD=libumockdev-preload.so.0 "
                     "(or inside fidosim run)")
SHUTDOWN_TIMEOUT = 5.0


def pytest_configure(config):
    # Without FIDOSIM_BIN (or --fidosim-bin), the suite runs this clone's debug build.
    os.environ.setdefault("FIDOSIM_BIN", str(REPO / ".build" / "debug" / "fidosim"))


def _merge_args(base: list[str], extra: list[str]) -> list[str]:
    """Append extra args; an extra `--opt value` replaces the default `--opt value`."""
    out = list(base)
    i = 0
    while i < len(extra):
        opt = extra[i]
        val = extra[i + 1] if i + 1 < len(extra) and not extra[i + 1].startswith("--") else None
        if opt in out and val is not None:
            j = out.index(opt)
            if j + 1 < len(out) and not out[j + 1].startswith("--"):
                out[j + 1] = val
            else:
                out[j + 1:j + 1] = [val]
        else:
            out.append(opt)
            if val is not None:
                out.append(val)
        i += 2 if val is not None else 1
    return out


class Simulator:
    """A key for one test: the package's ``FidosimServer`` (one key, on FIDOSIM_TRANSPORT) with this suite's defaults
    (presence approve, serve's own presence delay and notifications) and the test's extra `serve` arguments."""

    def __init__(self, extra_args=()):
        self.server = FidosimServer(transport=TRANSPORT, presence="approve", presence_delay_ms=None, notify=None,
                                    startup_timeout=STARTUP_TIMEOUT)
        self.server.command = _merge_args(self.server.command, list(extra_args))
        self.binary = self.server.binary
        self.command = self.server.command
        self.control_dir = self.server.directory
        self.control_path = os.path.join(self.control_dir, "key.sock")
        self.key: Key | None = None

    @property
    def process(self):
        return self.server.process

    @property
    def host(self) -> str | None:
        return self.key.host if self.key else None

    @property
    def port(self) -> int | None:
        return self.key.port if self.key else None

    @property
    def serial(self) -> str | None:
        return self.key.serial if self.key else None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        try:
            self.server.start()
        except KeyStartError as error:
            pytest.fail(str(error))
        self.key = self.server.key
        if HIDRAW:
            try:
                self.key.hidraw_path(timeout=STARTUP_TIMEOUT)
            except TimeoutError:
                code = self.process.poll()
                if code is None:
                    self.server.stop()
                    pytest.fail(f"no hidraw node for fidosim within {STARTUP_TIMEOUT} s\n"
                                f"command: {self.command}\nstderr:\n{self.stderr()}")
                pytest.fail(f"fidosim exited with code {code} during start-up\n"
                            f"command: {self.command}\nstderr:\n{self.stderr()}")

    def stop(self) -> int | None:
        """SIGTERM, wait; returns the exit code (None if it had to be killed)."""
        return self.server.stop()

    def stderr(self) -> str:
        return self.server.stderr()

    def close(self) -> int | None:
        """Stops the key (as ``stop``) and frees its captured output and control directory; returns the exit code.
        Closing a closed key again returns the same code."""
        return self.server.close()

    def finish(self) -> None:
        """Stops and closes the key, and fails unless it was still running and exited cleanly on SIGTERM (the check
        the ``sim`` fixture makes at teardown)."""
        still_running = self.server.running
        code = self.stop()
        err = self.stderr()
        self.close()
        assert still_running, (
            f"fidosim died during the test (exit code {code})\nstderr:\n{err}"
        )
        assert code is not None, (
            f"fidosim did not exit within {SHUTDOWN_TIMEOUT} s of SIGTERM\nstderr:\n{err}"
        )
        assert code == 0, f"fidosim exited with code {code} on SIGTERM\nstderr:\n{err}"

    # -- helpers for tests -------------------------------------------------

    def forget_devices(self) -> None:
        self.key.close_devices()

    def replugged(self) -> None:
        """After a power cycle made some other way (the control socket): forget the devices and, over uhid, wait
        for the hidraw node to go and come back."""
        self.forget_devices()
        if HIDRAW:
            try:
                self.key.wait_for_replug(timeout=30.0)
            except TimeoutError as error:
                pytest.fail(f"{error}\n{self.stderr()}")

    def control(self):
        """A new connection to this key's control socket."""
        return FidosimControl(path=self.control_path)

    def provision_attestation(self) -> bytes:
        """`fidosim attestation provision` on this key (a batch attestation and its enterprise certificate);
        returns the root certificate, PEM."""
        root = os.path.join(self.control_dir, "root.pem")
        out = subprocess.run([str(self.binary), "attestation", "provision", "--control", self.control_path,
                              "--root-out", root, "--force"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        with open(root, "rb") as f:
            return f.read()

    def hidraw_descriptor(self):
        return self.key.hidraw_descriptor()

    def device(self):
        """A fresh CtapHidDevice (new socket, or over hidraw a new CTAPHID channel on one shared handle).

        Every open hidraw handle receives every input report, so a second handle would collect the answers
        meant for the first one's channel and later read them as "wrong channel": over uhid all devices of a
        test share one handle (used one call at a time, as the tests do).
        """
        return self.key.device()

    def power_cycle(self) -> None:
        """Over uhid and private SIGUSR1 (the node goes away and comes back), over UDP the power-cycle datagram."""
        try:
            self.key.power_cycle(how="signal" if HIDRAW else "udp")
        except TimeoutError as error:
            pytest.fail(f"{error}\n{self.stderr()}")
        assert self.process.poll() is None, (
            f"fidosim exited after power cycle:\n{self.stderr()}"
        )


@pytest.fixture
def sim(request):
    """A fresh simulator per test. Extra args via @pytest.mark.sim_args(...)."""
    marker = request.node.get_closest_marker("sim_args")
    key = Simulator(list(marker.args) if marker else [])
    key.start()
    yield key
    key.finish()


@pytest.fixture
def start_sim():
    """Starts more keys in a test: ``start_sim("--profile", "yubikey5")`` is a started Simulator with those extra
    `serve` arguments. The test ends one with ``.finish()`` (the ``sim`` fixture's checks) or ``.close()`` (its exit
    code); those still open at teardown are closed."""
    started: list[Simulator] = []

    def start(*args: str) -> Simulator:
        key = Simulator(list(args))
        started.append(key)
        key.start()
        return key

    yield start
    for key in started:
        key.close()


@pytest.fixture
def image_key(start_sim):
    """A key on a flash image file: ``image_key(path, *args)`` starts one (no presence delay); ``.close()`` stops it
    and returns its exit code, and ``image_key(path)`` again starts a key on what the first one left."""

    def start(image, *args: str) -> Simulator:
        return start_sim("--flash", str(image), "--presence-delay", "0", *args)

    return start
