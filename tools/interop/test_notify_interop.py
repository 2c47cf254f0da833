"""The desktop prompt with a real notification server: `fidosim serve --presence prompt` in a graphical session (a
private Xvfb, session bus and dunst) shows each touch request as a notification with Touch and Deny; pressing an
action through dunst answers the key, and a request answered elsewhere closes its notification."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import pytest
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2

from fidosim import FidosimServer
from fidosim.control import FidosimControl
from fidosim.testing import in_background, make_credential, start_lines
from fidosim.udp import open_udp_device, wait_until_ready

TOOLS = ("Xvfb", "dunst", "dbus-daemon", "busctl", "gdbus", "notify-send")
pytestmark = [
    pytest.mark.skipif(os.environ.get("FIDOSIM_TRANSPORT", "udp") != "udp", reason="UDP keys"),
    pytest.mark.skipif(
        not all(shutil.which(t) for t in TOOLS) and os.environ.get("FIDOSIM_REQUIRE_DESKTOP") != "1",
        reason="the desktop test needs " + ", ".join(TOOLS) + " (make deps installs them)"),
]


@pytest.fixture
def desktop(notify_stack):
    return notify_stack


class DesktopKeys:
    """`fidosim serve` with prompts (the package's FidosimServer, with serve's own presence delay and
    notifications), started inside the private desktop session."""

    def __init__(self, env, *args):
        self.server = FidosimServer(presence="prompt", presence_delay_ms=None, notify=None, args=args, env=env,
                                    stdout=subprocess.PIPE).start()
        self.process = self.server.process
        self.ports = [key.port for key in self.server.keys]
        self.sockets = [key.control_path for key in self.server.keys]
        self.lines = start_lines(self.server)
        threading.Thread(target=lambda: [self.lines.append(x) for x in self.process.stdout], daemon=True).start()
        for port in self.ports:
            assert wait_until_ready("127.0.0.1", port, total=10, is_alive=lambda: self.process.poll() is None)

    def ctap2(self, i=0):
        return Ctap2(open_udp_device("127.0.0.1", self.ports[i]))

    def stop(self):
        self.server.close()






def test_a_touch_request_is_a_desktop_notification_whose_actions_answer_the_key(desktop):
    keys = DesktopKeys(desktop.env, "--keys", "2", "--name", "desk")
    try:
        assert any("touch requests also show as desktop notifications" in line for line in keys.lines)
        # Touch on key 2's notification answers key 2.
        done = in_background(make_credential, keys.ctap2(1), "second.example", "carol")
        shown = desktop.wait_for_notification(10, app_name="fidosim")
        assert shown["summary"] == "Security key desk-2: touch requested"
        assert shown["body"] == "makeCredential for second.example (user carol)"
        assert shown["actions"] == {"touch": "Touch", "deny": "Deny"}
        desktop.invoke(shown["id"], "touch")
        assert done().auth_data is not None
        desktop.wait_for_closed(shown["id"])

        # Deny refuses: CTAP2_ERR_OPERATION_DENIED.
        done = in_background(make_credential, keys.ctap2(0), "first.example")
        shown = desktop.wait_for_notification(10, app_name="fidosim")
        assert shown["summary"] == "Security key desk: touch requested"
        desktop.invoke(shown["id"], "deny")
        with pytest.raises(CtapError) as refused:
            done()
        assert refused.value.code == CtapError.ERR.OPERATION_DENIED

        # What the relying party sent is markup-escaped: shown as written, never a link or a picture.
        done = in_background(make_credential, keys.ctap2(0), "markup.example", '<a href="https://evil.example">x</a>&')
        shown = desktop.wait_for_notification(10, app_name="fidosim")
        assert shown["body"] == ('makeCredential for markup.example (user &lt;a href="https://evil.example"&gt;x&lt;/a&gt;'
                                 '&amp;)')
        desktop.invoke(shown["id"], "touch")
        done()
        desktop.wait_for_closed(shown["id"])

        # A request answered elsewhere (the control plane's touch) closes its notification.
        done = in_background(make_credential, keys.ctap2(0), "third.example")
        shown = desktop.wait_for_notification(10, app_name="fidosim")
        with FidosimControl(path=keys.sockets[0]) as ctl:
            assert ctl.request("touch")["answered"] is True
        done()
        desktop.wait_for_closed(shown["id"])
        assert shown["id"] not in desktop.displayed()
    finally:
        keys.stop()


def test_an_unanswered_notification_goes_when_the_request_times_out(desktop):
    keys = DesktopKeys(desktop.env, "--presence-timeout", "2")
    try:
        done = in_background(make_credential, keys.ctap2(0))
        shown = desktop.wait_for_notification(10, app_name="fidosim")
        with pytest.raises(CtapError) as timed_out:
            done()
        assert timed_out.value.code == CtapError.ERR.USER_ACTION_TIMEOUT
        desktop.wait_for_closed(shown["id"])
    finally:
        keys.stop()
