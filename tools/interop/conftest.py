"""Fixtures: run `fidosim serve` as a subprocess, one per test.

The suite runs through the installed `fidosim` package (tools/python; `make interop` installs it into a fresh
venv): by default the key is served over UDP and reached with `fidosim.udp`. With FIDOSIM_TRANSPORT=uhid (inside the
end-to-end VM, where /dev/uhid exists) it is served as a kernel uhid device and reached through python-fido2's
own Linux hidraw backend; a power cycle is then SIGUSR1, which unplugs and re-plugs the device. With
FIDOSIM_TRANSPORT=private (no root, no uhid) each key is a private hidraw node (`serve --transport private`) and the
suite, which runs under umockdev's preload library (LD_PRELOAD=libumockdev-preload.so.0), points UMOCKDEV_DIR at
the running key's testbed: python-fido2's hidraw backend then finds it as it finds the uhid key.

The fixtures: ``sim`` (a key for the test, options through @pytest.mark.sim_args), ``start_sim`` (more keys, started
in the test) and ``image_key`` (a key on a flash image file, started again on the same image to see what survives a
restart). What the test files share otherwise is the package's ``fidosim.testing``; the binary is the package's
``find_binary()`` ($FIDOSIM_BIN, by default this clone's debug build).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from fidosim import find_binary
from fidosim.udp import free_udp_port, open_udp_device, power_cycle, wait_until_ready

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
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
    """A running `fidosim serve --transport udp` process."""

    def __init__(self, extra_args=()):
        self.binary = find_binary()
        self.host = HOST
        self.serial = "T" + os.urandom(6).hex().upper()
        self.ready_file = None
        if TRANSPORT == "uhid":
            self.port = None
            where = ["--transport", "uhid", "--serial", self.serial]
        elif TRANSPORT == "private":
            self.port = None
            self.ready_file = os.path.join(tempfile.mkdtemp(prefix="fidosim-ready-"), "ready.json")
            where = ["--transport", "private", "--serial", self.serial, "--ready-file", self.ready_file]
        else:
            self.port = free_udp_port(self.host)
            where = ["--transport", "udp", "--host", self.host, "--port", str(self.port)]
        self.control_dir = tempfile.mkdtemp(prefix="fidosim-ctl-")
        self.control_path = os.path.join(self.control_dir, "key.sock")
        base = [
            str(self.binary), "serve", *where,
            "--control", self.control_path,
            "--presence", "approve",
            "--flash", "memory",
            "--log-level", "warning",
        ]
        self.command = _merge_args(base, list(extra_args))
        self._devices = []
        self._stdout = tempfile.TemporaryFile()
        self._stderr = tempfile.TemporaryFile()
        self.process: subprocess.Popen | None = None
        self._instance: str | None = None  # over uhid: the kernel's HID device behind the key's hidraw node

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        if not self.binary.exists():
            pytest.fail(
                f"fidosim binary not found at {self.binary} "
                "(build it with `swift build` or set FIDOSIM_BIN)"
            )
        # A private key makes its own testbed: it does not start inside an earlier key's.
        env = {k: v for k, v in os.environ.items() if k != "UMOCKDEV_DIR"}
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=self._stdout,
            stderr=self._stderr,
            env=env,
        )
        if TRANSPORT == "private":
            ready = self._join_private_tree(total=STARTUP_TIMEOUT) and self._wait_for_hidraw(
                present=True, total=STARTUP_TIMEOUT)
        elif TRANSPORT == "uhid":
            ready = self._wait_for_hidraw(present=True, total=STARTUP_TIMEOUT)
        else:
            ready = wait_until_ready(
                self.host, self.port, total=STARTUP_TIMEOUT,
                is_alive=lambda: self.process.poll() is None,
            )
        if not ready:
            code = self.process.poll()
            if code is None:
                self.process.kill()
                self.process.wait()
                pytest.fail(
                    f"fidosim did not answer CTAPHID_INIT within {STARTUP_TIMEOUT} s\n"
                    f"command: {self.command}\nstderr:\n{self.stderr()}"
                )
            pytest.fail(
                f"fidosim exited with code {code} during start-up\n"
                f"command: {self.command}\nstderr:\n{self.stderr()}"
            )

    def _join_private_tree(self, total: float) -> bool:
        """Waits for the private key's ready file and points this process's UMOCKDEV_DIR at its testbed."""
        import json

        deadline = time.monotonic() + total
        while time.monotonic() < deadline and self.process.poll() is None:
            if os.path.exists(self.ready_file):
                with open(self.ready_file) as f:
                    os.environ["UMOCKDEV_DIR"] = json.load(f)["umockdevDir"]
                return True
            time.sleep(0.02)
        return False

    def stop(self) -> int | None:
        """SIGTERM, wait; returns the exit code (None if it had to be killed)."""
        self.forget_devices()
        if TRANSPORT == "private":
            os.environ.pop("UMOCKDEV_DIR", None)
        if self.process is None:
            return None
        if self.process.poll() is not None:
            return self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=SHUTDOWN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def close(self) -> int | None:
        """Stops the key (as ``stop``) and frees its captured output and control directory; returns the exit code.
        Closing a closed key again returns the same code."""
        code = self.stop()
        shutil.rmtree(self.control_dir, ignore_errors=True)
        self._stdout.close()
        self._stderr.close()
        return code

    def finish(self) -> None:
        """Stops and closes the key, and fails unless it was still running and exited cleanly on SIGTERM (the check
        the ``sim`` fixture makes at teardown)."""
        still_running = self.process is not None and self.process.poll() is None
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
        for dev in self._devices:
            try:
                dev.close()
            except Exception:
                pass
        self._devices.clear()
        self._hidraw_connection = None

    def replugged(self) -> None:
        """After a power cycle made some other way (the control socket): forget the devices and, over uhid, wait
        for the hidraw node to go and come back."""
        self.forget_devices()
        if HIDRAW:
            # The key is back when its serial names a HID device other than the one before the cycle (a node
            # that is listed but still being torn down is the old one; hidraw numbers are reused, HID ones not).
            old = self._instance
            deadline = time.monotonic() + 30.0
            while time.monotonic() < deadline and self.process.poll() is None:
                desc = self.hidraw_descriptor()
                if desc is not None and _hid_instance(desc.path) not in (None, old):
                    self._instance = _hid_instance(desc.path)
                    return
                time.sleep(0.05)
            pytest.fail(f"key {self.serial} did not come back within 30 s after a power cycle\n{self.stderr()}")

    def control(self):
        """A new connection to this key's control socket."""
        from fidosim.control import FidosimControl

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
        from fido2.hid import linux

        for desc in linux.list_descriptors():
            if desc.serial_number == self.serial:
                return desc
        return None

    def _wait_for_hidraw(self, present: bool, total: float) -> bool:
        deadline = time.monotonic() + total
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            desc = self.hidraw_descriptor()
            if (desc is not None) == present:
                self._instance = _hid_instance(desc.path) if desc is not None else None
                return True
            time.sleep(0.05)
        return False

    def device(self):
        """A fresh CtapHidDevice (new socket, or over hidraw a new CTAPHID channel on one shared handle).

        Every open hidraw handle receives every input report, so a second handle would collect the answers
        meant for the first one's channel and later read them as "wrong channel": over uhid all devices of a
        test share one handle (used one call at a time, as the tests do).
        """
        if HIDRAW:
            from fido2.hid import CtapHidDevice, open_connection

            desc = self.hidraw_descriptor()
            assert desc is not None, f"no hidraw device with serial {self.serial}"
            if getattr(self, "_hidraw_connection", None) is None:
                self._hidraw_connection = open_connection(desc)
            dev = CtapHidDevice(desc, self._hidraw_connection)
        else:
            dev = open_udp_device(self.host, self.port)
        self._devices.append(dev)
        return dev

    def power_cycle(self) -> None:
        if HIDRAW:
            # The hidraw node goes away and comes back; wait for the new one.
            self.process.send_signal(signal.SIGUSR1)
            self.replugged()
        else:
            self.forget_devices()
            power_cycle(self.host, self.port)
        assert self.process.poll() is None, (
            f"fidosim exited after power cycle:\n{self.stderr()}"
        )


def _hid_instance(path) -> str | None:
    """The HID device (e.g. 0003:1209:F1D0.0007) behind a /dev/hidrawN path; None when the node is gone."""
    name = os.path.basename(path.decode() if isinstance(path, bytes) else str(path))
    try:
        return os.path.basename(os.path.realpath(f"/sys/class/hidraw/{name}/device", strict=True))
    except OSError:
        return None


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
