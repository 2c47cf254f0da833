"""Registers a passkey and signs in with it in headless Firefox ESR, driven over WebDriver BiDi.

Firefox speaks WebDriver BiDi itself (`--remote-debugging-port`), so no geckodriver is needed: this script
starts Firefox with a fresh profile, opens the relying party's page and runs each ceremony with
`script.evaluate` and user activation. The key must be plugged in (a fidosim uhid device). Prints one line per
ceremony with the server's verdict; exits non-zero on any failure.
Usage: python3 tools/browser/webauthn_firefox.py [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from websockets.sync.client import connect

import rp_server

PREFS = {
    "security.webauth.webauthn_enable_usbtoken": True,
    "security.webauth.webauthn_enable_softtoken": False,
    # Without this Firefox asks the user before it passes on a key's attestation.
    "security.webauth.webauthn_testing_allow_direct_attestation": True,
    "browser.shell.checkDefaultBrowser": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "toolkit.telemetry.reportingpolicy.firstRun": False,
}


class BiDi:
    """A minimal WebDriver BiDi client: one command at a time, events ignored."""

    def __init__(self, url: str):
        self.ws = connect(url, max_size=None, open_timeout=30)
        self.next_id = 0

    def call(self, method: str, params: dict, timeout: float = 60.0) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") != self.next_id:
                continue  # an event
            if message.get("type") == "error":
                raise RuntimeError(f"{method}: {message.get('error')}: {message.get('message')}")
            return message["result"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(timeout_s: float) -> int:
    rp, httpd = rp_server.start(0)
    url = f"http://localhost:{httpd.server_address[1]}/"
    profile = tempfile.mkdtemp(prefix="fidosim-firefox-")
    with open(os.path.join(profile, "user.js"), "w") as f:
        for key, value in PREFS.items():
            f.write(f"user_pref({json.dumps(key)}, {json.dumps(value)});\n")
    port = free_port()
    binary = shutil.which("firefox-esr") or shutil.which("firefox") or "/usr/bin/firefox-esr"
    log = tempfile.TemporaryFile()
    firefox = subprocess.Popen(
        [binary, "--headless", "--no-remote", "--profile", profile, f"--remote-debugging-port={port}",
         "about:blank"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "MOZ_HEADLESS": "1"},
    )
    failures = 0
    try:
        bidi = None
        for _ in range(300):
            try:
                bidi = BiDi(f"ws://127.0.0.1:{port}/session")
                break
            except OSError:
                time.sleep(0.2)
        if bidi is None:
            raise RuntimeError("Firefox did not open its WebDriver BiDi port")
        bidi.call("session.new", {"capabilities": {}})
        context = bidi.call("browsingContext.getTree", {})["contexts"][0]["context"]
        bidi.call("browsingContext.navigate", {"context": context, "url": url, "wait": "complete"})
        for name in ("register", "authenticate"):
            expression = (f"withDeadline({name}(), {int(timeout_s * 1000)})"
                          ".then(r => JSON.stringify(r), e => JSON.stringify({error: String(e)}))")
            result = bidi.call("script.evaluate", {
                "expression": expression,
                "target": {"context": context},
                "awaitPromise": True,
                "userActivation": True,
            }, timeout=timeout_s + 30)
            if result.get("type") != "success":
                print(f"firefox {name}: FAILED: {json.dumps(result)}")
                failures += 1
                break
            value = json.loads(result["result"]["value"])
            print(f"firefox {name}: {json.dumps(value)}")
            ok = value.get("registered") if name == "register" else value.get("authenticated")
            if not ok:
                failures += 1
                break
        try:
            bidi.call("session.end", {}, timeout=5)
        except Exception:
            pass
    except Exception as e:
        print(f"firefox: FAILED: {e!r}")
        failures += 1
    finally:
        firefox.terminate()
        try:
            firefox.wait(timeout=10)
        except subprocess.TimeoutExpired:
            firefox.kill()
        httpd.shutdown()
        if failures:
            log.seek(0)
            print("firefox output (last lines):")
            print("\n".join(log.read().decode(errors="replace").splitlines()[-30:]))
    print("firefox: server log:", json.dumps(rp.log))
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline for each ceremony")
    sys.exit(run(parser.parse_args().timeout))
