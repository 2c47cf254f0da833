"""A private desktop for notification tests: Xvfb, a session bus of its own and dunst (a real notification server),
with a bus monitor that sees every Notify call and a way to press a notification's action as a person would (dunst's
context menu, called over D-Bus, answered by a stand-in for dmenu); dunst then emits ActionInvoked itself.

Standard library only.  Needs: Xvfb (xvfb), dunst (dunst), dbus-daemon
(dbus-daemon), busctl (systemd), gdbus (libglib2.0-bin).

Usage as a pytest fixture (tools/interop/conftest.py makes it one of the suite's fixtures):

    def test_x(notify_stack):
        p = subprocess.Popen([...], env=notify_stack.env)
        n = notify_stack.wait_for_notification(5)
        notify_stack.invoke(n["id"], "touch")
"""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

try:
    import pytest
except ImportError:  # the module is usable without pytest
    pytest = None

BUS_NAME = "org.freedesktop.Notifications"
OBJ_PATH = "/org/freedesktop/Notifications"

# Session bus config WITHOUT <standard_session_servicedirs/>: nothing is
# D-Bus-activated, so the Debian dunst .service file (/usr/bin/dunst with the
# system dunstrc) can never be auto-started behind our back.
DBUS_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={dir}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""

# dunst's context menu pipes "#<label> (<summary>) [<id>,<key>]" lines to the
# configured dmenu command and parses the answer from the last '['.  This
# stand-in plays the user: it saves the menu and answers with the entry that
# invoke() queued in the request file (one line "ID,KEY"), then empties it.
PICKER = """#!/bin/sh
cat > "$1.menu"
if [ -s "$1" ]; then
    printf '#picked [%s]\\n' "$(cat "$1")"
    : > "$1"
fi
"""

DUNSTRC = """[global]
    font = Monospace 8
    dmenu = {picker} {request}
    browser = /bin/true
    always_run_script = false
    history_length = 100
    show_indicators = no
    mouse_left_click = none
    mouse_middle_click = none
    mouse_right_click = none
[urgency_low]
    timeout = 0
[urgency_normal]
    timeout = 0
[urgency_critical]
    timeout = 0
"""
# timeout = 0 for every urgency: a notification only goes away when the test
# or the program closes it, unless the client sends an explicit expire-time.


def _die_with_parent():
    # runs in the child before exec: SIGKILL it if the test process dies
    # (even by SIGKILL), so no Xvfb/dunst/dbus-daemon outlives a crashed run
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG = 1
    except Exception:
        pass


class NotifyStack:
    def __init__(self):
        self.tmp = None
        self.procs = []          # (name, Popen), stopped in reverse order
        self.env = None
        self._seen = set()       # ids already returned by wait_for_notification
        self._monitor_pos = 0
        self._messages = []
        self.timings = {}

    # ------------------------------------------------------------ lifecycle
    TOOLS = ("Xvfb", "dbus-daemon", "dunst", "busctl", "gdbus")

    def start(self, timeout=10.0):
        t0 = time.monotonic()
        missing = [t for t in self.TOOLS if not shutil.which(t)]
        if missing:
            raise RuntimeError("missing %s: apt-get install -y xvfb dunst "
                               "libnotify-bin dbus-daemon systemd libglib2.0-bin"
                               % " ".join(missing))
        self.tmp = tempfile.mkdtemp(prefix="notifystack-")
        try:
            self._start(timeout, t0)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name, argv, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        if "stdout" not in kw:
            kw["stdout"] = open(os.path.join(self.tmp, name + ".log"), "wb")
        kw.setdefault("stderr", subprocess.STDOUT)
        # own process group: stop() can kill the whole subtree by pgid
        p = subprocess.Popen(argv, start_new_session=True,
                             preexec_fn=_die_with_parent, **kw)
        self.procs.append((name, p))
        return p

    def _start(self, timeout, t0):
        tmp = self.tmp
        deadline = t0 + timeout
        clean = {k: v for k, v in os.environ.items()
                 if k not in ("DISPLAY", "WAYLAND_DISPLAY",
                              "DBUS_SESSION_BUS_ADDRESS", "XAUTHORITY")}
        runtime = os.path.join(tmp, "runtime")
        os.mkdir(runtime, 0o700)
        # the daemons get a private HOME/XDG dirs (no ~/.config/dunst surprises)
        base_env = dict(clean, XDG_RUNTIME_DIR=runtime, HOME=tmp,
                        XDG_CONFIG_HOME=os.path.join(tmp, "config"))

        # 1. Xvfb on a free display, chosen by Xvfb itself (-displayfd)
        r, w = os.pipe()
        self._spawn("xvfb", ["Xvfb", "-displayfd", str(w), "-screen", "0",
                             "1024x768x24", "-nolisten", "tcp", "-noreset"],
                    pass_fds=(w,), env=base_env)
        os.close(w)
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = os.read(r, 16)      # blocks until Xvfb is ready
            if not chunk:
                raise RuntimeError("Xvfb died: " + self._log("xvfb"))
            buf += chunk
        os.close(r)
        display = ":" + buf.decode().strip()
        self.timings["xvfb"] = time.monotonic() - t0

        # 2. private session bus
        conf = os.path.join(tmp, "bus.conf")
        with open(conf, "w") as f:
            f.write(DBUS_CONF.format(dir=tmp))
        bus = self._spawn("dbus-daemon",
                          ["dbus-daemon", "--config-file=" + conf, "--nofork",
                           "--nopidfile", "--print-address=1"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          env=base_env)
        address = bus.stdout.readline().decode().strip()
        if not address:
            raise RuntimeError("dbus-daemon printed no address")
        # env for the program under test: the caller's env, but pointing
        # at the private X display and the private session bus
        self.env = dict(clean, DISPLAY=display, DBUS_SESSION_BUS_ADDRESS=address)
        daemon_env = dict(base_env, DISPLAY=display,
                          DBUS_SESSION_BUS_ADDRESS=address)
        self.timings["dbus"] = time.monotonic() - t0

        # 3. bus monitor (JSON, one message per line, flushed per message)
        self.monitor_log = os.path.join(tmp, "monitor.jsonl")
        self._spawn("monitor", ["busctl", "--user", "monitor", "--json=short"],
                    stdout=open(self.monitor_log, "wb"),
                    stderr=subprocess.DEVNULL, env=daemon_env)

        # 4. dunst
        self.request = os.path.join(tmp, "request")
        open(self.request, "w").close()
        picker = os.path.join(tmp, "picker.sh")
        with open(picker, "w") as f:
            f.write(PICKER)
        os.chmod(picker, 0o755)
        rc = os.path.join(tmp, "dunstrc")
        with open(rc, "w") as f:
            f.write(DUNSTRC.format(picker=picker, request=self.request))
        self._spawn("dunst", ["dunst", "-config", rc], env=daemon_env)
        while True:
            if self._gdbus("org.freedesktop.DBus.NameHasOwner", BUS_NAME,
                           dest="org.freedesktop.DBus",
                           path="/org/freedesktop/DBus",
                           check=False).strip() == "(true,)":
                break
            for name, p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("%s exited early: %s" % (name, self._log(name)))
            if time.monotonic() > deadline:
                raise TimeoutError("dunst did not take " + BUS_NAME)
            time.sleep(0.02)
        # the monitor must be attached before the first Notify, or we miss it
        while not self._read_messages() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.timings["total"] = time.monotonic() - t0

    def stop(self):
        for name, p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(3)
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
            for s in (p.stdout, p.stderr):
                if s:
                    s.close()
        self.procs = []
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ------------------------------------------------------------ helpers
    def _log(self, name):
        try:
            with open(os.path.join(self.tmp, name + ".log"), errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def _gdbus(self, method, *args, dest=BUS_NAME, path=OBJ_PATH, check=True):
        r = subprocess.run(["gdbus", "call", "--session", "--dest", dest,
                            "--object-path", path, "--method", method,
                            *map(str, args)],
                           env=self.env, capture_output=True, text=True,
                           timeout=10)
        if check and r.returncode != 0:
            raise RuntimeError("gdbus %s failed: %s" % (method, r.stderr.strip()))
        return r.stdout

    def _read_messages(self):
        with open(self.monitor_log, "rb") as f:
            f.seek(self._monitor_pos)
            data = f.read()
        end = data.rfind(b"\n") + 1          # only complete lines
        self._monitor_pos += end
        for line in data[:end].splitlines():
            if line.startswith(b"{"):
                self._messages.append(json.loads(line))
        return self._messages

    def notifications(self):
        """All Notify calls seen so far that got an id back, oldest first."""
        msgs = self._read_messages()
        calls = {}
        out = []
        for m in msgs:
            if m.get("type") == "method_call" and m.get("member") == "Notify" \
                    and m.get("interface") == BUS_NAME:
                calls[(m["sender"], m["cookie"])] = m
            elif m.get("type") == "method_return":
                c = calls.pop((m.get("destination"), m.get("reply_cookie")), None)
                if c:
                    a = c["payload"]["data"]
                    acts = a[5]
                    hints = {k: v.get("data") for k, v in a[6].items()}
                    out.append(dict(id=m["payload"]["data"][0], app_name=a[0],
                                    replaces_id=a[1], icon=a[2], summary=a[3],
                                    body=a[4],
                                    actions=dict(zip(acts[0::2], acts[1::2])),
                                    hints=hints, expire_timeout=a[7],
                                    sender=c["sender"]))
        return out

    def signals(self, member):
        """[(id, arg)] of ActionInvoked / NotificationClosed signals so far."""
        return [tuple(m["payload"]["data"]) for m in self._read_messages()
                if m.get("type") == "signal" and m.get("member") == member
                and m.get("interface") == BUS_NAME]

    # ------------------------------------------------------------ test API
    def wait_for_notification(self, timeout=5.0, **match):
        """Oldest notification not returned before (FIFO), optionally only
        those whose fields equal **match (e.g. app_name="fidosim"):
        dict(id, summary, body, actions={key: label}, app_name, hints,
        expire_timeout, replaces_id, icon, sender)."""
        deadline = time.monotonic() + timeout
        while True:
            for n in self.notifications():
                if all(n.get(k) == v for k, v in match.items()) \
                        and n["id"] not in self._seen:
                    self._seen.add(n["id"])
                    return n
            if time.monotonic() > deadline:
                raise TimeoutError("no new notification within %ss" % timeout)
            time.sleep(0.02)

    def wait_for_closed(self, nid, timeout=5.0):
        """Reason (1 expired, 2 dismissed, 3 CloseNotification, 4 other)
        from the NotificationClosed signal for nid."""
        deadline = time.monotonic() + timeout
        while True:
            for i, reason in self.signals("NotificationClosed"):
                if i == nid:
                    return reason
            if time.monotonic() > deadline:
                raise TimeoutError("notification %s not closed within %ss" % (nid, timeout))
            time.sleep(0.02)

    def is_displayed(self, nid):
        return nid in self.displayed()

    def displayed(self):
        """{id: [action keys]} currently displayed, as dunst's own context
        menu lists them (only notifications that have actions or urls)."""
        with open(self.request, "w"):
            pass
        menu = self.request + ".menu"
        if os.path.exists(menu):
            os.unlink(menu)
        self._gdbus("org.dunstproject.cmd0.ContextMenuCall")
        deadline = time.monotonic() + 5
        while not os.path.exists(menu) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # let the picker finish writing
        out = {}
        if os.path.exists(menu):
            with open(menu, errors="replace") as f:
                for line in f:
                    tail = line.rstrip("\n").rsplit("[", 1)[-1].rstrip("]")
                    i, _, key = tail.partition(",")
                    if i.isdigit():
                        out.setdefault(int(i), []).append(key)
        return out

    def invoke(self, nid, action_key, timeout=5.0):
        """Invoke action_key of notification nid the way a user would: dunst's
        context menu over D-Bus (org.dunstproject.cmd0.ContextMenuCall), the
        menu answered by the picker; dunst then emits ActionInvoked itself.
        Waits for that signal and returns."""
        before = len(self.signals("ActionInvoked"))
        with open(self.request, "w") as f:
            f.write("%d,%s" % (nid, action_key))
        self._gdbus("org.dunstproject.cmd0.ContextMenuCall")
        deadline = time.monotonic() + timeout
        while True:
            sig = self.signals("ActionInvoked")[before:]
            if (nid, action_key) in sig:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("dunst emitted no ActionInvoked(%s, %r); "
                                   "is it displayed with that action?" % (nid, action_key))
            time.sleep(0.02)

    def invoke_default(self, position=0):
        """dunstctl action N: default action of the N-th displayed notification
        (opens the context menu instead when it has several actions and none
        is named 'default')."""
        self._gdbus("org.dunstproject.cmd0.NotificationAction", position)

    def close(self, nid):
        """org.freedesktop.Notifications.CloseNotification(nid), as another app would."""
        self._gdbus("org.freedesktop.Notifications.CloseNotification", nid)

    def dismiss_newest(self):
        """As if the user closed it: dunstctl close (NotificationClosed reason 2)."""
        self._gdbus("org.dunstproject.cmd0.NotificationCloseLast")

    def history(self):
        """dunst's own record of closed notifications (newest first)."""
        return self._gdbus("org.dunstproject.cmd0.NotificationListHistory")


if pytest is not None:
    @pytest.fixture
    def notify_stack():
        stack = NotifyStack()
        stack.start()
        try:
            yield stack
        finally:
            stack.stop()
