"""Registers a passkey and signs in with it in headless Firefox, driven over WebDriver BiDi.

Firefox speaks WebDriver BiDi itself (`--remote-debugging-port`), so no geckodriver is needed. The key must be
plugged in (a fidosim uhid device) before the ceremonies start.

What it does, step by step (each step is printed with the seconds since start):
  1. starts the relying party (rp_server.py) on a free localhost port;
  2. starts Firefox with a fresh profile (prefs in user.js) and the relying party's page as its start page.
     That matters: WebAuthn in Firefox only runs for a document in the active tab that has focus
     (CredentialsContainer's IsInActiveTab, else "NotAllowedError: CredentialsContainer request is not
     allowed."). Started with about:blank, Firefox puts the keyboard focus in the address bar, and navigating
     the tab over BiDi (or browsingContext.activate) does not move it into the page: document.hasFocus()
     stays false. Started with the page's URL, the page gets the focus (no focusmanager.testmode needed);
  3. opens a BiDi session and waits until the page's script has run (BiDi's session.new alone took 50-115 s
     under emulation in the test VM: the start-up deadlines are generous);
  4. for each flow, runs `register()` and then `authenticate()` on the page with `script.evaluate` and
     `userActivation: true` (WebAuthn needs a user activation), each wrapped in the page's `withDeadline()`:
     the harness keeps its own deadline;
  5. prints the server's verdicts and exits 0 only if the server verified every registration and assertion.

Flows: `passkey` (the default) makes a discoverable credential (residentKey "required", userVerification
"preferred") and signs in with an empty allow list; `second-factor` makes a non-discoverable one and signs in
with its id. Unlike Chromium, Firefox takes "preferred" at its word: a key with neither a PIN nor built-in UV
makes and uses the passkey without user verification.

Usage: python3 tools/browser/webauthn_firefox.py [--timeout SECONDS] [--flows passkey,second-factor]
       [--log-file PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import rp_server
from ceremony import FLOWS, CeremonyFailed, note, run_flows
from websockets.sync.client import connect

PREFS = {
    # WebAuthn over USB HID (authenticator-rs), no software token.
    "security.webauth.webauthn_enable_usbtoken": True,
    "security.webauth.webauthn_enable_softtoken": False,
    # Without this Firefox asks the user before it passes on a key's attestation ("direct").
    "security.webauth.webauthn_testing_allow_direct_attestation": True,
    # Quiet start-up: no first-run pages, no network chatter.
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "datareporting.policy.dataSubmissionEnabled": False,
    "toolkit.telemetry.reportingpolicy.firstRun": False,
    "app.update.disabledForTesting": True,
    "browser.region.network.url": "",
    "network.connectivity-service.enabled": False,
    "messaging-system.rsexperimentloader.enabled": False,
    "app.normandy.enabled": False,
}

class BiDi:
    """A minimal WebDriver BiDi client: one command at a time, events are skipped."""

    def __init__(self, url: str):
        self.ws = connect(url, max_size=None, open_timeout=60).__enter__()  # close() exits it
        self.ids = itertools.count(1)

    def call(self, method: str, params: dict, timeout: float = 60.0) -> dict:
        call_id = next(self.ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{method}: no reply within {timeout:.0f} s")
            message = json.loads(self.ws.recv(timeout=left))
            if message.get("id") != call_id:
                continue  # an event
            if message.get("type") == "error":
                raise RuntimeError(f"{method}: {message.get('error')}: {message.get('message')}")
            return message["result"]

    def close(self) -> None:
        self.ws.__exit__(None, None, None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect_bidi(port: int, firefox: subprocess.Popen, timeout: float) -> BiDi:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if firefox.poll() is not None:
            raise RuntimeError(f"firefox exited with status {firefox.returncode} during start-up")
        try:
            return BiDi(f"ws://127.0.0.1:{port}/session")
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"firefox did not open its WebDriver BiDi port within {timeout:.0f} s")


def evaluate(bidi: BiDi, context: str, expression: str, timeout: float = 60.0) -> dict:
    return bidi.call("script.evaluate", {
        "expression": expression,
        "target": {"context": context},
        "awaitPromise": True,
        "userActivation": True,  # WebAuthn requires a transient user activation
    }, timeout)


def wait_for_page(bidi: BiDi, context: str, url: str) -> None:
    for _ in range(300):  # the page may still be loading
        try:
            ready = evaluate(bidi, context, "typeof withDeadline == 'function' && !window.fidosimOldPage", 30)
            if ready.get("result", {}).get("value") is True:
                break
        except RuntimeError:
            pass
        time.sleep(0.5)
    else:
        raise TimeoutError("the relying party's page did not load")
    focus = evaluate(bidi, context, "document.hasFocus()")["result"]["value"]
    note(f"page loaded: {url} (document.hasFocus() = {str(focus).lower()})")


def ask_page(bidi: BiDi, context: str, expression: str, timeout: float):
    """Runs a ceremony's expression with script.evaluate; the server's verdict, or CeremonyFailed."""
    expression += ".then(r => JSON.stringify(r), e => JSON.stringify({error: String(e)}))"
    result = evaluate(bidi, context, expression, timeout)
    if result.get("type") != "success":
        raise CeremonyFailed(json.dumps(result))
    value = json.loads(result["result"]["value"])
    if "error" in value:
        raise CeremonyFailed(value["error"])
    return value


def ceremonies(bidi: BiDi, url: str, flows: list[str], timeout_s: float) -> int:
    # Firefox answers session.new only once its window has finished starting up: 50-115 s in the test VM.
    bidi.call("session.new", {"capabilities": {}}, 300)
    note("BiDi session open")
    contexts = bidi.call("browsingContext.getTree", {}, 60)["contexts"]
    context = next((c["context"] for c in contexts if c["url"].startswith(url)), contexts[0]["context"])
    wait_for_page(bidi, context, url)

    def fresh_page():
        evaluate(bidi, context, "window.fidosimOldPage = true")
        bidi.call("browsingContext.reload", {"context": context}, 60)
        wait_for_page(bidi, context, url)

    return run_flows(flows, timeout_s, lambda _name, expression, timeout: ask_page(bidi, context, expression, timeout),
                     fresh_page)


def run(url: str, flows: list[str], timeout_s: float, startup_s: float, log_file: str | None) -> int:
    profile = tempfile.mkdtemp(prefix="fidosim-firefox-")
    with open(os.path.join(profile, "user.js"), "w") as f:
        for key, value in PREFS.items():
            f.write(f"user_pref({json.dumps(key)}, {json.dumps(value)});\n")
    port = free_port()
    binary = shutil.which("firefox-esr") or shutil.which("firefox") or "/usr/bin/firefox-esr"
    # The page is the start page, so that it (and not the address bar) has the focus: see the module docstring.
    command = [binary, "--headless", "--no-remote", "--profile", profile, f"--remote-debugging-port={port}", url]
    note("starting firefox: " + " ".join(command))
    output = open(log_file, "w+b") if log_file else tempfile.TemporaryFile()
    env = {**os.environ, "MOZ_HEADLESS": "1"}
    if log_file:  # Firefox's WebAuthn log and that of its USB HID stack (authenticator-rs)
        env.update(MOZ_LOG="timestamp,webauthn:5,WebAuthnHandler:5", RUST_LOG="authenticator=debug,authrs_bridge=debug")
    firefox = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    bidi = None
    try:
        bidi = connect_bidi(port, firefox, startup_s)
        note(f"firefox is up, WebDriver BiDi on port {port}")
        status = ceremonies(bidi, url, flows, timeout_s)
    except Exception as e:
        note(f"FAILED: {e!r}")
        status = 1
    finally:
        if bidi:
            try:
                bidi.call("browser.close", {}, 10)
            except Exception:
                pass
            bidi.close()
        try:
            firefox.wait(timeout=15)
        except subprocess.TimeoutExpired:
            firefox.kill()
            firefox.wait()
        shutil.rmtree(profile, ignore_errors=True)
    if status:
        output.seek(0)
        lines = [line for line in output.read().decode(errors="replace").splitlines() if line.strip()]
        print("firefox output (last lines):", *lines[-15:], sep="\n  ")
    return status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline for each ceremony (seconds)")
    parser.add_argument("--startup-timeout", type=float, default=180.0, help="deadline for Firefox to start")
    parser.add_argument("--flows", default="passkey",
                        help="comma-separated: passkey (discoverable, empty allow list), second-factor")
    parser.add_argument("--log-file", default=os.environ.get("FIREFOX_LOG"),
                        help="keep Firefox's output here, with its WebAuthn debug log")
    args = parser.parse_args()
    flows = args.flows.split(",")
    unknown = [f for f in flows if f not in FLOWS]
    if unknown:
        parser.error(f"unknown flow {unknown[0]}: choose from {', '.join(FLOWS)}")
    rp, httpd = rp_server.start(0)
    url = f"http://localhost:{httpd.server_address[1]}/"
    note(f"relying party on {url}")
    try:
        status = run(url, flows, args.timeout, args.startup_timeout, args.log_file)
    finally:
        httpd.shutdown()
    note("server log: " + json.dumps(rp.log))
    note("firefox: PASS" if status == 0 else "firefox: FAIL")
    return status


if __name__ == "__main__":
    sys.exit(main())
