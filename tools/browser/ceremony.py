"""The ceremonies both browser harnesses run, whatever drives the browser (DevTools, WebDriver BiDi, Selenium).

Each flow registers a credential and then signs in with it, calling the relying party's page (rp_server.py:
`register(discoverable)` and `authenticate(discoverable)`, each under the page's `withDeadline()`), and passes only
when the server verified both. A harness supplies `ask(name, expression, timeout)`, which runs one expression on
the page and returns the server's verdict object or raises CeremonyFailed with the reason.
"""

from __future__ import annotations

import json
import time

T0 = time.monotonic()

FLOWS = {
    # name: whether the credential is discoverable (a passkey: resident key, sign-in with an empty allow list)
    "passkey": True,
    "second-factor": False,
}


class CeremonyFailed(Exception):
    """A ceremony that did not reach the server's verdict: the browser refused it, stopped it, or timed out."""


def note(text: str) -> None:
    """A step of the run, with the seconds since the harness started."""
    print(f"[{time.monotonic() - T0:6.1f}s] {text}", flush=True)


def run_flow(flow: str, timeout_s: float, ask) -> bool:
    """Registers a credential and signs in with it; True if the server verified both."""
    discoverable = "true" if FLOWS[flow] else "false"
    for name, verdict in (("register", "registered"), ("authenticate", "authenticated")):
        what = "create" if name == "register" else "get"
        note(f"{flow} {name}: calling navigator.credentials.{what}()")
        expression = f"withDeadline({name}({discoverable}), {int(timeout_s * 1000)})"
        try:
            value = ask(name, expression, timeout_s + 30)
        except CeremonyFailed as e:
            note(f"{flow} {name}: FAILED: {e}")
            return False
        note(f"{flow} {name}: server says {json.dumps(value)}")
        if not (isinstance(value, dict) and value.get(verdict)):
            return False
    return True


def run_flows(flows: list[str], timeout_s: float, ask, fresh_page) -> int:
    """Every flow in turn (a fresh page after a failed one: its ceremony may still be pending); 0 if all passed."""
    results: dict[str, bool] = {}
    for flow in flows:
        if results and not all(results.values()):
            fresh_page()
        results[flow] = run_flow(flow, timeout_s, ask)
    note("results: " + ", ".join(f"{flow} {'PASS' if ok else 'FAIL'}" for flow, ok in results.items()))
    return 0 if all(results.values()) else 1
