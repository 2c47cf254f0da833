"""Registers a passkey and signs in with it in headless Chromium, driven over the DevTools protocol (CDP).

The key must be plugged in (a fidosim uhid device) before Chromium starts: Chromium enumerates hidraw devices
from sysfs when it starts and does not notice later ones without udevd.

What it does, step by step (each step is printed with the seconds since start):
  1. starts the relying party (rp_server.py) on a free localhost port;
  2. starts Chromium itself (`--headless=new --remote-debugging-port=0`, a fresh profile, its log with the FIDO
     device-event log in --log-file) and reads the port it picked from <profile>/DevToolsActivePort;
  3. connects to the page's DevTools websocket, opens the relying party's page, turns on focus emulation (a
     headless window never has OS focus, and WebAuthn needs a focused document);
  4. for each flow, runs `register()` and then `authenticate()` on the page with `Runtime.evaluate` and
     `userGesture: true` (WebAuthn needs a user activation), each wrapped in the page's `withDeadline()`;
  5. prints the server's verdicts and exits 0 only if the server verified every registration and assertion.

Headless Chromium never rejects a failed ceremony: it shows the error in its WebAuthn dialog, which nobody sees,
and the page's promise stays pending. So the harness keeps its own deadline, and it follows Chromium's FIDO log
(what chrome://device-log shows) to stop at once, with the reason, when the dialog reaches an error step or one
that waits for a human (a PIN prompt, an account chooser): see STOP_STEPS.

Flows: `passkey` (the default) makes a discoverable credential (residentKey "required", userVerification
"preferred") and signs in with an empty allow list; `second-factor` makes a non-discoverable one and signs in
with its id. Chromium asks a security key for user verification in both passkey ceremonies, whatever the RP's
"preferred" says: for a discoverable credential it raises uv to "required" on non-platform authenticators
(MakeCredentialRequestHandler::SpecializeRequestForAuthenticator), and for an empty allow list too
(FidoDeviceAuthenticator::PINUVDispositionForGetAssertion). A key with neither a client PIN nor built-in UV is
then "missing a capability" (dialog step kMissingCapability), and a key with a PIN needs someone to type it
into the dialog. Only a key with built-in UV (getInfo option "uv": true) completes a passkey flow headless.

No chromedriver or Selenium is needed; `--chromedriver` drives the same steps through Selenium + Debian's
chromium-driver instead, for those who already have that set up (it has no early stop; the deadline applies).
Usage: python3 tools/browser/webauthn_chromium.py [--timeout SECONDS] [--flows passkey,second-factor]
       [--log-file PATH] [--chromedriver]
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import rp_server
from ceremony import FLOWS, CeremonyFailed, note, run_flows
from websockets.sync.client import connect


def chromium_binary() -> str:
    # Debian's /usr/bin/chromium is a shell wrapper that adds flags (extensions, GPU rasterization); the real
    # binary is next to its libraries. Either works.
    for path in ("/usr/lib/chromium/chromium", shutil.which("chromium"), shutil.which("google-chrome")):
        if path and os.access(path, os.X_OK):
            return path
    raise SystemExit("chromium not found: apt-get install chromium")


def chromium_args(profile: str, log_file: str) -> list[str]:
    args = [
        "--headless=new",  # the real browser without a window (the old headless shell has no WebAuthn UI)
        # Chromium refuses to start its sandbox as root (the VM's runs): only there it goes without. As any other
        # user (the host's private key) its namespace and seccomp sandbox is on.
        *(["--no-sandbox"] if os.geteuid() == 0 else []),
        "--disable-gpu", "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
        # One process fewer to start. Under emulation (TCG) a child process that takes more than 15 s to connect
        # is killed ("Terminating current process after 15 seconds with no connection"); it happened to the
        # network service, which Chromium then restarted, adding tens of seconds to the start-up.
        "--enable-features=NetworkServiceInProcess2",
    ]
    # Chromium's log with its FIDO device-event log (what chrome://device-log shows): each dialog step, each
    # CTAP request and response. Headless Chromium shows the reason a ceremony stopped nowhere else.
    args += ["--enable-logging", "--v=0", "--vmodule=device_event_log*=1", f"--log-file={log_file}"]
    return args


# Steps of Chromium's WebAuthn dialog that end a ceremony or wait for a human. Headless Chromium draws no dialog,
# so the page's promise just stays pending; its FIDO log names the step, which lets the harness stop at once.
STOP_STEPS = {
    "kMissingCapability": "the key lacks a capability the request needs: resident keys, or user "
                          "verification. Chromium requires UV from a security key for a discoverable credential "
                          "and for a sign-in with an empty allow list, whatever the RP asks: a client PIN or "
                          "built-in UV (getInfo options clientPin / uv); the key's getInfo is in the FIDO log",
    "kClientPinEntry": "Chromium asks for the key's PIN in a dialog (no way to type it in headless mode)",
    "kClientPinSetup": "Chromium asks the user to set a PIN on the key first",
    "kClientPinChange": "Chromium asks the user to change the key's PIN first",
    "kClientPinErrorSoftBlock": "the key's PIN is soft-blocked (power-cycle the key)",
    "kClientPinErrorHardBlock": "the key's PIN is blocked",
    "kRetryInternalUserVerification": "the key's built-in user verification failed",
    "kInlineBioEnrollment": "Chromium offers fingerprint enrolment",
    "kSelectAccount": "Chromium shows an account chooser",
    "kKeyNotRegistered": "the key has no credential for this request",
    "kKeyAlreadyRegistered": "the key already holds an excluded credential",
    "kStorageFull": "the key's credential storage is full",
    "kErrorInternalUnrecognized": "the key's response was refused (see the FIDO log)",
    "kErrorNoAvailableTransports": "Chromium found no usable transport",
    "kTimedOut": "Chromium's own WebAuthn timeout fired",
}


class CeremonyStopped(Exception):
    pass


class FidoLog:
    """Follows the FIDO lines (Chromium's device-event log) in Chromium's log file."""

    def __init__(self, path: str):
        self.path = path
        self.offset = 0
        self.lines: list[str] = []

    def poll(self) -> None:
        """Reads new lines; raises CeremonyStopped when Chromium's dialog reaches a step in STOP_STEPS."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # whole lines only
        self.offset += end
        stop = None
        for line in data[:end].decode(errors="replace").splitlines():
            if "] FIDO: " not in line:
                continue
            line = line.split("] FIDO: ", 1)[1]
            self.lines.append(line)
            step = re.search(r"UI step: (k\w+)", line)
            if step and step.group(1) in STOP_STEPS and not stop:
                stop = step.group(1)
        if stop:
            raise CeremonyStopped(f"Chromium's WebAuthn dialog went to {stop}: {STOP_STEPS[stop]}")


class DevTools:
    """A minimal CDP client on one websocket: one command at a time, events are skipped."""

    def __init__(self, ws_url: str, poll=None):
        self.ws = connect(ws_url, max_size=None, open_timeout=60).__enter__()  # close() exits it
        self.ids = itertools.count(1)
        self.poll = poll  # called about once a second while waiting for a reply

    def call(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        call_id = next(self.ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{method}: no reply within {timeout:.0f} s")
            if self.poll:
                self.poll()
            try:
                message = json.loads(self.ws.recv(timeout=min(left, 1.0)))
            except TimeoutError:
                continue
            if message.get("id") != call_id:
                continue  # an event
            if "error" in message:
                raise RuntimeError(f"{method}: {message['error']}")
            return message["result"]

    def close(self) -> None:
        self.ws.__exit__(None, None, None)


def wait_for_devtools(profile: str, chromium: subprocess.Popen, timeout: float) -> str:
    """Chromium writes the port it picked (--remote-debugging-port=0) to <profile>/DevToolsActivePort."""
    path = os.path.join(profile, "DevToolsActivePort")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if chromium.poll() is not None:
            raise RuntimeError(f"chromium exited with status {chromium.returncode} during start-up")
        try:
            with open(path) as f:
                port = f.readline().strip()
            if port:
                return f"http://127.0.0.1:{port}"
        except FileNotFoundError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"chromium did not open its DevTools port within {timeout:.0f} s")


def page_websocket(http_base: str, url: str, timeout: float) -> str:
    """The websocket of the tab Chromium opened with the start page (not one of its own chrome:// pages)."""
    deadline = time.monotonic() + timeout
    targets: list = []
    while True:
        # Just after start-up, under emulation, Chromium can take longer than one request's timeout to answer
        # (it did, in CI: 30 s): a request that times out is asked again until the deadline.
        try:
            timeout = min(30.0, max(1.0, deadline - time.monotonic()))
            with urllib.request.urlopen(f"{http_base}/json/list", timeout=timeout) as r:
                targets = json.load(r)
        except (OSError, http.client.HTTPException, ValueError) as e:
            # Timeouts, refused or reset connections, a cut-off answer (URLError, RemoteDisconnected and
            # ConnectionResetError are OSErrors; IncompleteRead an HTTPException; a cut-off JSON body a ValueError).
            if time.monotonic() > deadline:
                raise TimeoutError(f"chromium's DevTools did not list its tabs within {timeout:.0f} s: {e!r}") from e
            note(f"DevTools tab list: {e!r}; asking again")
            time.sleep(0.5)
            continue
        pages = [t for t in targets if t.get("type") == "page" and t.get("url", "").startswith(url)]
        if pages:
            return pages[0]["webSocketDebuggerUrl"]
        if time.monotonic() > deadline:
            raise TimeoutError(f"no tab with {url} in chromium: {[t.get('url') for t in targets]}")
        time.sleep(0.5)


def evaluate(call, expression: str, timeout: float) -> dict:
    """Runs `expression` in the page as if the user had clicked (userGesture) and awaits its promise."""
    return call("Runtime.evaluate", {
        "expression": expression,
        "awaitPromise": True,
        "userGesture": True,  # WebAuthn requires a transient user activation
        "returnByValue": True,
    }, timeout)


def load_page(call, url: str, navigate: bool = True) -> None:
    if navigate:
        # Marks the old document, so that the wait below cannot mistake it for the new one.
        call("Runtime.evaluate", {"expression": "window.fidosimOldPage = true"}, 30)
        call("Page.navigate", {"url": url}, 60)  # also cancels a ceremony left pending by a failed flow
    for _ in range(600):  # wait until the page's script has run
        ready = call("Runtime.evaluate", {"expression": "typeof withDeadline == 'function' && !window.fidosimOldPage",
                                          "returnByValue": True}, 30)
        if ready["result"].get("value") is True:
            break
        time.sleep(0.2)
    else:
        raise TimeoutError("the relying party's page did not load")
    note(f"page loaded: {url}")
    # A headless window never has OS focus; WebAuthn rejects (or stalls) requests from unfocused documents.
    call("Emulation.setFocusEmulationEnabled", {"enabled": True}, 30)


def ask_page(call, expression: str, timeout: float):
    """Runs a ceremony's expression with Runtime.evaluate; the server's verdict, or CeremonyFailed."""
    try:
        reply = evaluate(call, expression, timeout)
    except CeremonyStopped as e:
        raise CeremonyFailed(str(e)) from e
    if "exceptionDetails" in reply:
        details = reply["exceptionDetails"]
        raise CeremonyFailed(details.get("exception", {}).get("description") or details)
    return reply["result"].get("value")


def ceremonies(call, url: str, flows: list[str], timeout_s: float, navigate: bool = True) -> int:
    """The steps after start-up, the same for raw CDP and chromedriver; `call(method, params, timeout)`.

    navigate=False: Chromium was started with the page, which only needs to finish loading."""
    load_page(call, url, navigate)
    return run_flows(flows, timeout_s, lambda _name, expression, timeout: ask_page(call, expression, timeout),
                     lambda: load_page(call, url))


def run_cdp(url: str, flows: list[str], timeout_s: float, startup_s: float, log_file: str) -> int:
    profile = tempfile.mkdtemp(prefix="fidosim-chromium-")
    # Started with the page itself: the first page loads while the DevTools connection is set up.
    command = [chromium_binary(), *chromium_args(profile, log_file), "--remote-debugging-port=0", url]
    note("starting chromium: " + " ".join(command))
    output = tempfile.TemporaryFile()
    chromium = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    fido_log = FidoLog(log_file)
    devtools = None
    try:
        http_base = wait_for_devtools(profile, chromium, startup_s)
        note(f"chromium is up, DevTools on {http_base}")
        devtools = DevTools(page_websocket(http_base, url, 120), poll=fido_log.poll)
        status = ceremonies(devtools.call, url, flows, timeout_s, navigate=False)
    except Exception as e:
        note(f"FAILED: {e!r}")
        output.seek(0)  # Chromium's own log goes to log_file; this has what it printed before logging began
        lines = [line for line in output.read().decode(errors="replace").splitlines() if "dbus" not in line]
        if lines:
            print("chromium output (last lines):", *lines[-10:], sep="\n  ")
        status = 1
    finally:
        if devtools:
            try:
                devtools.poll = None
                devtools.call("Browser.close", timeout=10)
            except Exception:
                pass
            devtools.close()
        try:
            chromium.wait(timeout=15)
        except subprocess.TimeoutExpired:
            chromium.kill()
            chromium.wait()
        shutil.rmtree(profile, ignore_errors=True)
    return status


def run_chromedriver(url: str, flows: list[str], timeout_s: float, log_file: str) -> int:
    """The same ceremonies through Selenium and Debian's chromium-driver (optional: pip install selenium)."""
    from selenium import webdriver

    profile = tempfile.mkdtemp(prefix="fidosim-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium_binary()
    for arg in chromium_args(profile, log_file):
        options.add_argument(arg)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    note("starting chromedriver and chromium")
    driver = webdriver.Chrome(options=options, service=service)
    note("chromium is up")
    try:
        return ceremonies(lambda method, params, timeout: driver.execute_cdp_cmd(method, params),
                          url, flows, timeout_s)
    except Exception as e:
        note(f"FAILED: {e!r}")
        return 1
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline for each ceremony (seconds)")
    parser.add_argument("--startup-timeout", type=float, default=180.0, help="deadline for Chromium to start")
    parser.add_argument("--flows", default="passkey",
                        help="comma-separated: passkey (discoverable, empty allow list), second-factor")
    parser.add_argument("--log-file", default=os.environ.get("CHROMIUM_LOG"),
                        help="keep Chromium's log here (default: a temporary file)")
    parser.add_argument("--chromedriver", action="store_true", help="drive Chromium through Selenium instead")
    args = parser.parse_args()
    flows = args.flows.split(",")
    unknown = [f for f in flows if f not in FLOWS]
    if unknown:
        parser.error(f"unknown flow {unknown[0]}: choose from {', '.join(FLOWS)}")
    log_file = args.log_file or os.path.join(tempfile.mkdtemp(prefix="fidosim-chromium-log-"), "chromium.log")
    rp, httpd = rp_server.start(0)
    url = f"http://localhost:{httpd.server_address[1]}/"
    note(f"relying party on {url}")
    try:
        if args.chromedriver:
            status = run_chromedriver(url, flows, args.timeout, log_file)
        else:
            status = run_cdp(url, flows, args.timeout, args.startup_timeout, log_file)
    finally:
        httpd.shutdown()
    if status:
        fido_log = FidoLog(log_file)
        try:
            fido_log.poll()
        except CeremonyStopped:
            pass
        print(f"chromium FIDO log (chrome://device-log; all of Chromium's log is in {log_file}), last lines:",
              *fido_log.lines[-25:], sep="\n  ")
    note("server log: " + json.dumps(rp.log))
    note("chromium: PASS" if status == 0 else "chromium: FAIL")
    return status


if __name__ == "__main__":
    sys.exit(main())
