"""A small WebAuthn relying party for browser tests: one page, four JSON endpoints, python-fido2's server.

Run it alone (`python3 tools/browser/rp_server.py --port 8765`, then open http://localhost:8765/ in a browser
with a fidosim key plugged in) or import `start()` from a test harness. The page exposes `register()` and
`authenticate()`, which return the server's verdict; the server verifies attestation and assertion
signatures with `fido2.server.Fido2Server`, independently of the key.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fido2.server import Fido2Server
from fido2.webauthn import (
    AttestedCredentialData,
    AuthenticationResponse,
    PublicKeyCredentialRpEntity,
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>fidosim WebAuthn test</title></head>
<body>
<h1>fidosim WebAuthn test</h1>
<button onclick="register().then(show, show)">Register</button>
<button onclick="authenticate().then(show, show)">Sign in</button>
<pre id="out"></pre>
<script>
function show(x) { document.getElementById('out').textContent = JSON.stringify(x, null, 2); return x; }
async function post(url, body) {
  const r = await fetch(url, {method: 'POST', headers: {'content-type': 'application/json'},
                              body: JSON.stringify(body || {})});
  const text = await r.text();
  if (!r.ok) throw new Error(url + ': ' + r.status + ' ' + text);
  return JSON.parse(text);
}
// discoverable = true: Alice's passkey (resident key, signed in without a user name); false: Bob's
// second-factor credential, which the key cannot find by itself (the server sends its id in allowCredentials).
async function register(discoverable = true) {
  const options = await post('/register/begin', {discoverable});
  const credential = await navigator.credentials.create(
      {publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options.publicKey)});
  return await post('/register/complete', credential.toJSON());
}
async function authenticate(discoverable = true) {
  const options = await post('/authenticate/begin', {discoverable});
  const assertion = await navigator.credentials.get(
      {publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey)});
  return await post('/authenticate/complete', assertion.toJSON());
}
// For harnesses: run a ceremony with a deadline (a headless browser leaves a failed ceremony pending).
function withDeadline(promise, ms) {
  return Promise.race([promise, new Promise((_, reject) =>
      setTimeout(() => reject(new Error('no answer within ' + ms + ' ms')), ms))]);
}
</script>
</body></html>
"""


def make_user(name: str, display_name: str) -> PublicKeyCredentialUserEntity:
    # A fixed user handle: registering again replaces the user's passkey on the key instead of adding one more
    # (with several, a browser would ask which account to use, and in a headless browser nobody answers).
    return PublicKeyCredentialUserEntity(name=name, id=hashlib.sha256(name.encode()).digest()[:16],
                                         display_name=display_name)


class RelyingParty:
    """State of the demo relying party: two users, the credentials registered for them.

    Alice signs in with a passkey (a discoverable credential); Bob with a second-factor credential, which the
    key cannot find by itself: the server sends its id. Two users, because the server excludes a user's
    existing credentials when registering (excludeCredentials): one key holds one credential per user.
    """

    def __init__(self, rp_id: str = "localhost", attestation: str = "none"):
        # "none" is what most relying parties ask for; "direct" makes browsers ask the user first.
        self.server = Fido2Server(
            PublicKeyCredentialRpEntity(name="fidosim browser test", id=rp_id),
            attestation=attestation,
        )
        self.users = {
            True: make_user("alice@example.com", "Alice"),  # passkey
            False: make_user("bob@example.com", "Bob"),  # second factor
        }
        self.credentials: dict[bool, list[AttestedCredentialData]] = {True: [], False: []}
        self.state = None
        self.registering = True  # whose registration is under way (the key of self.users)
        self.log: list[dict] = []
        self.lock = threading.Lock()

    def register_begin(self, body: dict) -> dict:
        discoverable = bool(body.get("discoverable", True))
        options, self.state = self.server.register_begin(
            self.users[discoverable],
            credentials=self.credentials[discoverable],
            resident_key_requirement=(
                ResidentKeyRequirement.REQUIRED if discoverable else ResidentKeyRequirement.DISCOURAGED
            ),
            user_verification=UserVerificationRequirement.PREFERRED,
        )
        self.registering = discoverable
        return dict(options)

    def register_complete(self, response: dict) -> dict:
        auth_data = self.server.register_complete(self.state, response)
        self.credentials[self.registering].append(auth_data.credential_data)
        result = {
            "registered": True,
            "user": self.users[self.registering].name,
            "credentialId": auth_data.credential_data.credential_id.hex(),
            "aaguid": str(auth_data.credential_data.aaguid),
            "signCount": auth_data.counter,
            "flags": int(auth_data.flags),
        }
        self.log.append({"ceremony": "register", **result})
        return result

    def authenticate_begin(self, body: dict) -> dict:
        # Discoverable: an empty allow list, the key finds its passkey for this RP by itself. Otherwise the
        # server lists the credential ids it knows for the user.
        discoverable = bool(body.get("discoverable", True))
        options, self.state = self.server.authenticate_begin(
            credentials=None if discoverable else self.credentials[False],
            user_verification=UserVerificationRequirement.PREFERRED,
        )
        return dict(options)

    def authenticate_complete(self, response: dict) -> dict:
        known = self.credentials[True] + self.credentials[False]
        credential = self.server.authenticate_complete(self.state, known, response)
        user = next(u for d, u in self.users.items() if credential in self.credentials[d])
        auth_data = AuthenticationResponse.from_dict(response).response.authenticator_data
        result = {
            "authenticated": True,
            "user": user.name,
            "credentialId": credential.credential_id.hex(),
            "userHandle": response.get("response", {}).get("userHandle"),
            "signCount": auth_data.counter,
            "flags": int(auth_data.flags),
        }
        self.log.append({"ceremony": "authenticate", **result})
        return result


def make_handler(rp: RelyingParty):
    routes = {
        "/register/begin": rp.register_begin,
        "/register/complete": rp.register_complete,
        "/authenticate/begin": rp.authenticate_begin,
        "/authenticate/complete": rp.authenticate_complete,
    }

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):  # quiet
            pass

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path in ("/", "/index.html"):
                self._send(200, PAGE.encode(), "text/html; charset=utf-8")
            else:
                self._send(404, b"not found", "text/plain")

        def do_POST(self):
            route = routes.get(self.path)
            if route is None:
                self._send(404, b"not found", "text/plain")
                return
            length = int(self.headers.get("content-length", "0"))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                with rp.lock:
                    result = route(body)
                self._send(200, json.dumps(result).encode(), "application/json")
            except Exception as e:  # the verdict goes back to the page
                rp.log.append({"error": f"{self.path}: {e!r}"})
                self._send(400, f"{type(e).__name__}: {e}".encode(), "text/plain")

    return Handler


def start(port: int = 0, rp_id: str = "localhost", attestation: str = "none"):
    """Starts the relying party on localhost in a thread; returns (RelyingParty, http server)."""
    rp = RelyingParty(rp_id, attestation)
    httpd = ThreadingHTTPServer(("127.0.0.1", port), make_handler(rp))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return rp, httpd


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    rp, httpd = start(args.port)
    print(f"relying party on http://localhost:{httpd.server_address[1]}/ (Ctrl-C to stop)")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
