"""Registers a passkey and signs in with it in headless Chromium, driven by chromium-driver (Selenium).

The key must be plugged in (a fidosim uhid device) before Chromium starts: Chromium enumerates hidraw devices
when it starts. Prints one line per ceremony with the server's verdict; exits non-zero on any failure.
Usage: python3 tools/browser/webauthn_chromium.py [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile

from selenium import webdriver

import rp_server

CEREMONY = "withDeadline({name}(), {ms})"


def run(timeout_s: float) -> int:
    rp, httpd = rp_server.start(0)
    url = f"http://localhost:{httpd.server_address[1]}/"
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="fidosim-chromium-")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--user-data-dir={profile}", "--no-first-run"):
        options.add_argument(arg)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    failures = 0
    try:
        driver.set_script_timeout(timeout_s + 10)
        driver.get(url)
        driver.execute_cdp_cmd("Emulation.setFocusEmulationEnabled", {"enabled": True})
        for name in ("register", "authenticate"):
            reply = driver.execute_cdp_cmd("Runtime.evaluate", {
                "expression": CEREMONY.format(name=name, ms=int(timeout_s * 1000)),
                "awaitPromise": True,
                "userGesture": True,
                "returnByValue": True,
            })
            if "exceptionDetails" in reply:
                detail = reply["exceptionDetails"].get("exception", {}).get("description") or reply["exceptionDetails"]
                print(f"chromium {name}: FAILED: {detail}")
                failures += 1
                break
            value = reply["result"].get("value")
            print(f"chromium {name}: {json.dumps(value)}")
            ok = value and (value.get("registered") if name == "register" else value.get("authenticated"))
            if not ok:
                failures += 1
                break
    finally:
        driver.quit()
        httpd.shutdown()
    print("chromium: server log:", json.dumps(rp.log))
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="deadline for each ceremony")
    sys.exit(run(parser.parse_args().timeout))
