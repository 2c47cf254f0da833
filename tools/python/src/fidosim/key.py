"""Start `fidosim serve` for a test and stop it afterwards.

    from fidosim import start_key

    with start_key(profile="yubikey5", presence="prompt") as key:
        key.control.add_credential(...)          # the control socket (FidosimControl)
        ctap = Ctap2(key.device())                # python-fido2, over UDP (needs the fido2 extra)
        event = key.events.wait_for("prompt")     # the event stream (a subscribed connection of its own)
        key.control.touch()

The key is up when `serve --ready-file` has written its JSON line; nothing parses the lines meant for people.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .control import FidosimControl
from .hub import FidosimHub, VirtualAuthenticatorOptions

STARTUP_TIMEOUT = 20.0
SHUTDOWN_TIMEOUT = 5.0
# umockdev's preload library (Debian's `umockdev`): a program run with it sees a private key's tree.
PRELOAD_LIBRARY = "libumockdev-preload.so.0"


class FidosimNotFound(FileNotFoundError):
    """No fidosim binary: set FIDOSIM_BIN, pass binary=..., or put fidosim on PATH."""


class KeyStartError(RuntimeError):
    """`fidosim serve` exited or did not become ready; the message has its command line and standard error."""


def find_binary(binary: str | os.PathLike | None = None) -> Path:
    """The fidosim binary: the argument, else $FIDOSIM_BIN, else `fidosim` on PATH."""
    candidate = binary or os.environ.get("FIDOSIM_BIN") or shutil.which("fidosim")
    if not candidate:
        raise FidosimNotFound("fidosim binary not found: set FIDOSIM_BIN, pass binary=..., or put fidosim on PATH")
    path = Path(candidate).expanduser().absolute()
    if not path.is_file():
        raise FidosimNotFound(f"fidosim binary not found at {path}")
    return path


class EventStream:
    """The key's events (firmware-spec/control.md, Events) on a control connection of their own."""

    def __init__(self, control_path: str):
        self._connection = FidosimControl(path=control_path)
        self._connection.subscribe()

    def next(self, timeout: float = 10.0) -> dict:
        """The next event; raises TimeoutError when none comes within timeout seconds."""
        for event in self._connection.events(timeout=timeout):
            return event
        raise TimeoutError(f"no event within {timeout} s")

    def wait_for(self, what: str | Callable[[dict], bool], timeout: float = 10.0, **members: Any) -> dict:
        """The first event named `what` (or for which the callable `what` is true) whose members equal
        `members`; earlier events are consumed. Raises TimeoutError after timeout seconds."""

        def matches(event: dict) -> bool:
            if callable(what):
                if not what(event):
                    return False
            elif event.get("event") != what:
                return False
            return all(event.get(name) == value for name, value in members.items())

        return self._connection.wait_for_event(matches, timeout=timeout)

    def drain(self, timeout: float = 0.2) -> list[dict]:
        """Every event that comes within timeout seconds of the last one."""
        return list(self._connection.events(timeout=timeout))

    def __iter__(self):
        return self._connection.events(timeout=None)

    def close(self) -> None:
        self._connection.close()


def tree_environment(umockdev_dir: str) -> dict[str, str]:
    """The variables that make a program part of the private tree in ``umockdev_dir``."""
    preload = [p for p in os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":")
               if p and "libumockdev-preload" not in p]
    return {"LD_PRELOAD": ":".join([PRELOAD_LIBRARY, *preload]), "UMOCKDEV_DIR": umockdev_dir}


def hid_device_of(path: str | bytes) -> str | None:
    """The kernel's HID device (e.g. ``0003:1209:F1D0.0007``) behind a /dev/hidrawN node; None when the node is gone.
    hidraw numbers are reused after an unplug, HID device names are not: a replugged key has a new one."""
    name = os.path.basename(path.decode() if isinstance(path, bytes) else str(path))
    try:
        return os.path.basename(os.path.realpath(f"/sys/class/hidraw/{name}/device", strict=True))
    except OSError:
        return None


class Key:
    """One virtual key of a running `fidosim serve`: where it is, its control socket and its events."""

    def __init__(self, server: "FidosimServer", record: dict):
        self.server = server
        self.record = record
        self.name: str = record.get("name", "default")
        self.transport: str = record.get("transport", "udp")
        self.host: str | None = record.get("host")
        self.port: int | None = record.get("port")
        self.serial: str | None = record.get("serial")
        self.control_path: str | None = record.get("control")
        # transport "private": the key's testbed and the file with the environment of its tree.
        self.umockdev_dir: str | None = record.get("umockdevDir") or server.record.get("umockdevDir")
        self.env_file: str | None = server.record.get("envFile")
        self._control: FidosimControl | None = None
        self._events: EventStream | None = None
        self._devices: list = []
        self._hidraw = None
        self._joined = False
        self._outer_tree: str | None = None
        self._hid_device: str | None = None  # uhid and private: the HID device of the node last found

    @property
    def control(self) -> FidosimControl:
        """A connection to the key's control socket (opened on first use, closed when the key stops)."""
        if self._control is None:
            self._control = FidosimControl(path=self._need_control())
        return self._control

    @property
    def events(self) -> EventStream:
        """The key's event stream, subscribed on first use: subscribe before the request whose events you want."""
        if self._events is None:
            self._events = EventStream(self._need_control())
        return self._events

    @property
    def keys(self) -> list["Key"]:
        """Every key of the server this key belongs to (``--keys N``)."""
        return self.server.keys

    def _need_control(self) -> str:
        if not self.control_path:
            raise RuntimeError("this key was started with --control off")
        return self.control_path

    @property
    def environment(self) -> dict[str, str]:
        """transport "private": the variables that make a program part of the key's tree (``LD_PRELOAD``,
        ``UMOCKDEV_DIR``). Hand them to what the test starts: ``subprocess.run(..., env=key.subprocess_env())``,
        Selenium's ``Service(env=...)``, Playwright's ``launch(env=...)``."""
        if self.transport != "private" or not self.umockdev_dir:
            raise RuntimeError(f"a {self.transport} key has no private tree: start it with transport='private'")
        return tree_environment(self.umockdev_dir)

    def subprocess_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the key's tree's variables."""
        return {**(os.environ if base is None else base), **self.environment}

    def join_tree(self) -> None:
        """Makes this process see the key (transport "private"): it must run under umockdev's preload library
        (``fidosim run -- pytest``, or ``LD_PRELOAD=libumockdev-preload.so.0``), which follows UMOCKDEV_DIR."""
        if "libumockdev-preload" not in os.environ.get("LD_PRELOAD", ""):
            raise RuntimeError("this process does not run under umockdev's preload library, so it cannot see a "
                               "private key: run the tests inside `fidosim run -- pytest ...` (or with "
                               "LD_PRELOAD=libumockdev-preload.so.0), or hand key.environment to the program you start")
        if not self._joined:
            self._joined = True
            self._outer_tree = os.environ.get("UMOCKDEV_DIR")
        os.environ["UMOCKDEV_DIR"] = self.environment["UMOCKDEV_DIR"]

    def device(self, timeout: float = 5.0):
        """A new python-fido2 CtapHidDevice for this key (UDP: a socket of its own; uhid and private: the hidraw
        node; a private key makes this process join its tree, see ``join_tree``)."""
        if self.transport == "udp":
            from .udp import open_udp_device

            dev = open_udp_device(self.host, self.port, timeout=timeout)
        elif self.transport == "pcsc":
            from .pcsc import open_pcsc_device

            if self.server.pcsc is None:
                raise RuntimeError("a pcsc key needs the PcscDaemon it was started with (pcsc=...)")
            reader = self.server.pcsc_reader + self.server.keys.index(self)
            dev = open_pcsc_device(self.server.pcsc.reader(reader), timeout=timeout)
        elif self.transport in ("uhid", "private"):
            if self.transport == "private":
                self.join_tree()
            # Every open hidraw handle gets every input report: the devices of one key share one handle (a new
            # CTAPHID channel each), so that no handle reads the answers meant for another's channel.
            from fido2.hid import CtapHidDevice, get_descriptor, open_connection

            descriptor = get_descriptor(self.hidraw_path(timeout))
            if self._hidraw is None:
                self._hidraw = open_connection(descriptor)
            dev = CtapHidDevice(descriptor, self._hidraw)
        else:
            raise RuntimeError(f"no python-fido2 device for transport {self.transport}")
        self._devices.append(dev)
        return dev

    def hidraw_descriptor(self):
        """uhid and private: python-fido2's descriptor of this key's hidraw node (found by its serial number), or
        None while there is none. A private key makes this process join its tree (``join_tree``)."""
        from fido2.hid import linux

        if self.transport == "private":
            self.join_tree()
        for desc in linux.list_descriptors():
            if desc.serial_number == self.serial:
                return desc
        return None

    def hidraw_path(self, timeout: float = 10.0) -> str:
        """uhid and private: the /dev/hidrawN node of this key (found by its serial number), waiting up to timeout
        seconds for it to appear."""
        deadline = time.monotonic() + timeout
        while True:
            desc = self.hidraw_descriptor()
            if desc is not None:
                if self._hid_device is None:
                    self._hid_device = hid_device_of(desc.path)
                return desc.path
            if time.monotonic() >= deadline or not self.server.running:
                raise TimeoutError(f"no hidraw node with serial {self.serial} within {timeout} s")
            time.sleep(0.05)

    def wait_for_replug(self, timeout: float = 30.0) -> None:
        """uhid and private, after a power cycle made any way (``power_cycle``, the control socket, a signal): closes
        the devices opened before and waits until the key's serial number names a HID device other than the one
        before (a node still listed while it is torn down is the old one). Raises TimeoutError when the key is not
        back within timeout seconds or the server exited."""
        self.close_devices()
        old = self._hid_device
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.server.running:
            desc = self.hidraw_descriptor()
            device = hid_device_of(desc.path) if desc is not None else None
            if device not in (None, old):
                self._hid_device = device
                return
            time.sleep(0.05)
        raise TimeoutError(f"key {self.serial} did not come back within {timeout} s after a power cycle")

    def power_cycle(self, how: str = "control") -> None:
        """Unplugs and replugs the key; devices opened before are closed. ``how``: "control" (the control socket),
        "signal" (SIGUSR1 to the server, which power-cycles each of its keys) or "udp" (the power-cycle datagram of
        a UDP key, from this process's user; returns once the key answers CTAPHID_INIT again). Over uhid and
        private it returns once the node is back (``wait_for_replug``)."""
        if self.transport in ("uhid", "private") and self._hid_device is None:
            self.hidraw_path()  # the node before the cycle, to tell the new one from it
        self.close_devices()
        if how == "control":
            self.control.power_cycle()
        elif how == "signal":
            self.server.send_signal(signal.SIGUSR1)
        elif how == "udp":
            from .udp import power_cycle

            power_cycle(self.host, self.port)
        else:
            raise ValueError(f"how: control, signal or udp, not {how!r}")
        if self.transport in ("uhid", "private"):
            self.wait_for_replug()

    def close_devices(self) -> None:
        """Closes the python-fido2 devices opened for this key (a PC/SC one also gives back its context); the next
        ``device()`` opens a new one."""
        for dev in self._devices:
            try:
                # A PC/SC device also gives back its PC/SC context, while pcscd is still there to take it.
                if self.transport == "pcsc":
                    dev.close(release=True)
                else:
                    dev.close()
            except Exception:
                pass
        self._devices.clear()
        self._hidraw = None

    def close(self) -> None:
        self.close_devices()
        if self._joined:
            # Back to the tree this process was in before (that of `fidosim run`, or none).
            if self._outer_tree is None:
                os.environ.pop("UMOCKDEV_DIR", None)
            else:
                os.environ["UMOCKDEV_DIR"] = self._outer_tree
            self._joined = False
        for connection in (self._events, self._control):
            if connection is not None:
                try:
                    connection.close()
                except OSError:
                    pass
        self._events = self._control = None


class FidosimServer:
    """A `fidosim serve` process and its keys. Use ``start_key`` (a context manager) or start()/stop().

    How serve runs, for tests of the process itself: ``presence``, ``presence_delay_ms`` and ``notify`` None leave
    serve's defaults; ``control`` is the control socket's path ("off": none; default: in the server's directory);
    ``env`` its whole environment (default: this process's), ``cwd`` its directory; ``stdin`` and ``stdout``
    ``subprocess.PIPE`` make them text pipes, line by line (``process.stdin``, ``process.stdout``: a terminal's
    person); ``user`` and ``group`` run it as another user (root only; the server's directory becomes that user's);
    ``prefix`` is a command that runs serve (``prlimit ...``, ``strace ...``) and ``preexec_fn`` runs in the child
    before serve. Signals go to serve itself (the ready file's pid), also under a prefix. ``serve_args``, when given,
    is serve's whole command line instead of the one the other options make (only ``--ready-file`` is added), and
    ``capture_stderr=False`` leaves serve's standard error this process's (``python -m fidosim.launch``)."""

    def __init__(
        self,
        *,
        binary: str | os.PathLike | None = None,
        transport: str = "udp",
        profile: str | None = None,
        presence: str | None = "approve",
        presence_delay_ms: int | None = 0,
        uv: str | None = None,
        flash: str | os.PathLike = "memory",
        keys: int = 1,
        serial: str | None = None,
        pin: str | None = None,
        credentials: str | os.PathLike | None = None,
        args: Sequence[str] = (),
        startup_timeout: float = STARTUP_TIMEOUT,
        pcsc=None,
        pcsc_reader: int = 0,
        vpcd_port: int | None = None,
        hub: bool = False,
        notify: str | None = "off",
        control: str | os.PathLike | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike | None = None,
        stdin: int | None = subprocess.DEVNULL,
        stdout: int | None = subprocess.DEVNULL,
        user: int | str | None = None,
        group: int | str | None = None,
        prefix: Sequence[str] = (),
        preexec_fn: Callable[[], Any] | None = None,
        serve_args: Sequence[str] | None = None,
        capture_stderr: bool = True,
    ):
        self.binary = find_binary(binary)
        self.directory = tempfile.mkdtemp(prefix="fidosim-key-")
        self.ready_path = os.path.join(self.directory, "ready.json")
        self.startup_timeout = startup_timeout
        command = [*prefix, str(self.binary), "serve", "--transport", transport, "--flash", str(flash),
                   "--control", str(control or os.path.join(self.directory, "key.sock")),
                   "--ready-file", self.ready_path, "--log-level", "warning"]
        if presence is not None:
            command += ["--presence", presence]
        # Desktop notifications of prompts: off unless asked for (None: serve's default).
        if notify is not None:
            command += ["--notify", notify]
        if transport == "udp":
            command += ["--port", "0"]
        self.pcsc = pcsc
        # The first of the daemon's readers the keys go into (``--vpcd-port`` counts from the daemon's port).
        self.pcsc_reader = pcsc_reader
        if transport == "pcsc":
            # vpcd_port: a reader that is not a PcscDaemon's (a test's own listener); key.device() needs pcsc.
            if pcsc is None and vpcd_port is None:
                raise ValueError("transport='pcsc' needs pcsc=PcscDaemon() (fidosim.pcsc), whose reader the card joins")
            command += ["--vpcd-port", str(vpcd_port if pcsc is None else pcsc.port + pcsc_reader)]
        if transport in ("uhid", "private"):
            command += ["--serial", serial or "T" + os.urandom(6).hex().upper()]
        if transport == "private":
            command += ["--env-file", os.path.join(self.directory, "key.env")]
        elif serial:
            command += ["--serial", serial]
        if presence_delay_ms is not None:
            command += ["--presence-delay", str(presence_delay_ms)]
        if profile:
            command += ["--profile", str(profile)]
        if uv:
            command += ["--uv", uv]
        if keys != 1:
            command += ["--keys", str(keys)]
        # The hub socket: keys added and removed while the server runs (add_key, remove_key).
        self.hub_path: str | None = os.path.join(self.directory, "hub.sock") if hub else None
        if self.hub_path:
            command += ["--hub", self.hub_path]
        self.command = command + [str(a) for a in args]
        if serve_args is not None:
            self.command = [*prefix, str(self.binary), "serve", *[str(a) for a in serve_args],
                            "--ready-file", self.ready_path]
        self.pin = pin
        self.credentials = credentials
        self.process: subprocess.Popen | None = None
        self._hub: FidosimHub | None = None
        self.keys: list[Key] = []
        self.record: dict = {}
        self._stderr = tempfile.TemporaryFile() if capture_stderr else None
        self.env = env
        self.cwd = cwd
        self.stdin, self.stdout = stdin, stdout
        self.user, self.group = user, group
        self._runnable: str | None = None
        self.preexec_fn = preexec_fn
        if user is not None:
            shutil.chown(self.directory, user, group)

    def start(self) -> "FidosimServer":
        """Starts `serve`, waits for its ready file, then imports ``credentials`` and sets ``pin`` on each key."""
        self._launch()
        for key in self.keys:
            if self.credentials is not None:
                self._import(key, self.credentials)
            if self.pin is not None:
                from fido2.ctap2 import Ctap2
                from fido2.ctap2.pin import ClientPin

                ClientPin(Ctap2(key.device())).set_pin(self.pin)
                key.close_devices()
        return self

    def restart(self) -> int | None:
        """Stops the server and starts the same command line again, as when a key is unplugged and plugged back in:
        with a flash image (``flash=path``) each key comes back with what it stored (credentials, PIN, counters);
        on ``memory`` it comes back empty. Credentials and PIN are not given again; keys added through the hub are
        gone. ``keys`` are new ``Key`` objects. Returns the exit code of the stop (0: a clean SIGTERM)."""
        code = self.stop()
        os.makedirs(self.directory, exist_ok=True)
        if self.user is not None:
            shutil.chown(self.directory, self.user, self.group)
        self._launch()
        return code

    def _launch(self) -> None:
        # A private key makes a testbed of its own, also when this process is inside another's tree.
        env = {k: v for k, v in (os.environ if self.env is None else self.env).items() if k != "UMOCKDEV_DIR"}
        # Another user's serve: no groups of this process's (user=None leaves them as they are).
        as_user = {} if self.user is None else {"user": self.user, "group": self.group, "extra_groups": []}
        command = self.command
        if self.user is not None:
            # That user may not enter the directories the binary is in (a checkout in a directory of mode 0700):
            # serve runs from a copy in a directory of this process's that the user may enter but not write (the
            # server's directory is that user's: a link planted there would have this process write through it).
            if self._runnable is None:
                directory = tempfile.mkdtemp(prefix="fidosim-bin-")
                os.chmod(directory, 0o755)
                self._runnable = os.path.join(directory, "fidosim")
                fd = os.open(self._runnable, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o755)
                with open(fd, "wb") as target, open(self.binary, "rb") as source:
                    shutil.copyfileobj(source, target)
                os.chmod(self._runnable, 0o755)
            command = [self._runnable if part == str(self.binary) else part for part in command]
        self.record = {}
        self.process = subprocess.Popen(command, stdin=self.stdin, stdout=self.stdout, stderr=self._stderr,
                                        env=env, cwd=self.cwd, text=True, bufsize=1, preexec_fn=self.preexec_fn,
                                        **as_user)
        deadline = time.monotonic() + self.startup_timeout
        while not os.path.exists(self.ready_path):
            if self.process.poll() is not None:
                raise KeyStartError(f"fidosim exited with code {self.process.returncode} during start-up\n"
                                    f"command: {self.command}\nstderr:\n{self.stderr()}")
            if time.monotonic() >= deadline:
                self.stop()
                raise KeyStartError(f"fidosim was not ready within {self.startup_timeout} s\n"
                                    f"command: {self.command}\nstderr:\n{self.stderr()}")
            time.sleep(0.02)
        with open(self.ready_path) as f:
            record = json.loads(f.readline())
        self.record = record
        self.keys = [Key(self, entry) for entry in record["keys"]]

    def _import(self, key: Key, path: str | os.PathLike) -> None:
        """`fidosim credentials import` into a running key."""
        done = subprocess.run([str(self.binary), "credentials", "import", "--control", key._need_control(),
                               "--format", "auto", str(path)], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            self.stop()
            raise KeyStartError(f"importing {path} failed:\n{done.stderr}")

    @property
    def key(self) -> Key:
        return self.keys[0]

    @property
    def pid(self) -> int | None:
        """serve's process id: the ready file's once it is written (under a ``prefix`` not the prefix's)."""
        if self.record.get("pid"):
            return self.record["pid"]
        return self.process.pid if self.process is not None else None

    def send_signal(self, signum: int) -> None:
        """Sends a signal to serve itself."""
        os.kill(self.pid, signum)

    @property
    def running(self) -> bool:
        """Whether the `serve` process runs."""
        return self.process is not None and self.process.poll() is None

    @property
    def hub(self) -> FidosimHub:
        """A connection to the hub socket (``hub=True``), opened on first use."""
        if self.hub_path is None:
            raise ValueError("this server has no hub: start it with hub=True")
        if self._hub is None:
            self._hub = FidosimHub(path=self.hub_path)
        return self._hub

    @property
    def environment(self) -> dict[str, str]:
        """transport "private": the variables of the server's tree, in which every key of the server appears,
        those the hub adds later too (``Key.environment`` is the same)."""
        directory = self.record.get("umockdevDir")
        if not directory:
            raise RuntimeError("only a server with transport='private' has a private tree")
        return tree_environment(directory)

    def subprocess_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the tree's variables."""
        return {**(os.environ if base is None else base), **self.environment}

    def add_key(self, options: VirtualAuthenticatorOptions | dict | None = None) -> Key:
        """Adds a key while the server runs (WebDriver's Add Virtual Authenticator) and returns it; it is in
        ``keys`` until ``remove_key``."""
        added = self.hub.add_virtual_authenticator(options)
        record = {**added["transport"], "name": added["authenticatorId"], "control": added["control"],
                  "authenticatorId": added["authenticatorId"]}
        key = Key(self, record)
        self.keys.append(key)
        return key

    def remove_key(self, key: Key | str) -> None:
        """Removes a key (a ``Key`` or its authenticatorId); hosts see it unplugged."""
        name = key if isinstance(key, str) else key.name
        for known in [k for k in self.keys if k.name == name]:
            known.close()
            self.keys.remove(known)
        self.hub.remove_virtual_authenticator(name)

    def stderr(self) -> str:
        """What serve wrote to its standard error ("" when it was not captured)."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after 5 s; returns the exit code (None when it had to be killed)."""
        for key in self.keys:
            key.close()
        if self._hub is not None:
            self._hub.close()
            self._hub = None
        code: int | None = None
        if self.process is not None:
            if self.process.poll() is not None:
                code = self.process.returncode
            else:
                try:
                    self.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    code = self.process.wait(timeout=SHUTDOWN_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)
        if self._runnable is not None:
            shutil.rmtree(os.path.dirname(self._runnable), ignore_errors=True)
            self._runnable = None
        return code

    def __enter__(self) -> "FidosimServer":
        return self.start()

    def close(self) -> int | None:
        """Stops the server (as ``stop``) and frees its captured standard error; read ``stderr()`` before."""
        code = self.stop()
        if self._stderr is not None:
            self._stderr.close()
        return code

    def __exit__(self, *exc) -> None:
        self.close()


class start_key:
    """`with start_key(**options) as key:` a key for the block (the first of `keys`); stopped afterwards, also
    when the block raises. Options: those of ``FidosimServer``."""

    def __init__(self, **options: Any):
        self.server = FidosimServer(**options)

    def __enter__(self) -> Key:
        try:
            return self.server.start().key
        except BaseException:
            self.server.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.server.stop()
