"""`fidosim webdriver`'s HTTP endpoint from outside, with a stand-in driver (a small HTTP server given the port as
chromedriver is: `--port=N`) so that what is checked is the front: requests it does not answer reach the driver
unchanged, the WebAuthn extension commands add a real private key and reach its control socket, bad HTTP gets a
clear error, and another local user is refused (the browser tests run it with chromedriver:
tools/python/examples/browser/test_selenium_virtual_authenticator.py)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from fidosim import FidosimHub, find_binary
from fidosim.testing import as_nobody

STAND_IN_DRIVER = textwrap.dedent("""
    import json, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    port = int(next(a for a in sys.argv if a.startswith("--port=")).split("=")[1])
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args): pass
        def answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.dumps({"value": {"method": self.command, "path": self.path,
                                         "body": self.rfile.read(length).decode()}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        do_GET = do_POST = do_DELETE = answer
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()
""")


@pytest.fixture(scope="module")
def front():
    directory = tempfile.mkdtemp(prefix="fidosim-front-")
    driver = os.path.join(directory, "driver.py")
    with open(driver, "w") as f:
        f.write(f"#!{sys.executable}\n" + STAND_IN_DRIVER)
    os.chmod(driver, 0o755)
    ready = os.path.join(directory, "ready.json")
    process = subprocess.Popen([str(find_binary()), "webdriver", "--webdriver-port", "0", "--driver", driver,
                                "--ready-file", ready, "--log-level", "warning"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(ready):
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with open(ready) as f:
        record = json.load(f)
    record["port"] = int(record["webdriver"].rsplit(":", 1)[1])
    yield record
    process.terminate()
    process.wait(timeout=30)


def call(front: dict, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", front["port"], timeout=30)
    connection.request(method, path, body=None if body is None else json.dumps(body),
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def test_other_requests_reach_the_driver_unchanged(front):
    status, answer = call(front, "POST", "/session/abc/url", {"url": "http://localhost/"})
    assert status == 200
    assert answer["value"] == {"method": "POST", "path": "/session/abc/url", "body": '{"url": "http://localhost/"}'}


def test_webauthn_commands_are_answered_with_real_keys(front):
    status, answer = call(front, "POST", "/session/s1/webauthn/authenticator",
                          {"protocol": "ctap2", "transport": "usb", "hasResidentKey": True,
                           "hasUserVerification": True, "isUserConsenting": True, "isUserVerified": True})
    assert status == 200
    authenticator = answer["value"]
    [key] = FidosimHub(path=front["hub"]).list_virtual_authenticators()
    assert key["authenticatorId"] == authenticator and key["transport"]["devnode"].startswith("/dev/hidraw")
    base = f"/session/s1/webauthn/authenticator/{authenticator}"
    assert call(front, "GET", base + "/credentials") == (200, {"value": []})
    # Another session does not reach this one's key; an unknown credential is invalid argument.
    status, answer = call(front, "GET", f"/session/other/webauthn/authenticator/{authenticator}/credentials")
    assert status == 400 and answer["value"]["error"] == "invalid argument"
    status, answer = call(front, "DELETE", base + "/credentials/AAAA")
    assert status == 400 and answer["value"]["error"] == "invalid argument"
    status, answer = call(front, "POST", base + "/uv", {"isUserVerified": "yes"})
    assert status == 400
    # Deleting the session (forwarded to the driver) removes its keys.
    assert call(front, "DELETE", "/session/s1")[0] == 200
    assert FidosimHub(path=front["hub"]).list_virtual_authenticators() == []


def test_bad_http_gets_a_clear_error(front):
    with socket.create_connection(("127.0.0.1", front["port"]), timeout=10) as s:
        s.sendall(b"POST /session HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        answer = s.recv(65536).decode()
    assert answer.startswith("HTTP/1.1 400 ") and "Transfer-Encoding" in answer
    with socket.create_connection(("127.0.0.1", front["port"]), timeout=10) as s:
        s.sendall(b"\x00\xff garbage\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 400 ")
    assert call(front, "GET", "/status")[0] == 200, "the front goes on"


@pytest.mark.skipif(os.geteuid() != 0, reason="setpriv to another uid needs root")
def test_another_user_is_refused(front):
    script = ("import http.client,sys;c=http.client.HTTPConnection('127.0.0.1',int(sys.argv[1]),timeout=10);"
              "c.request('GET','/status');r=c.getresponse();print(r.status, r.read().decode())")
    status, body = as_nobody(script, str(front["port"])).split(" ", 1)
    assert status == "403" and "permission denied" in json.loads(body)["value"]["message"]
    assert call(front, "GET", "/status")[0] == 200, "the owner still gets in"
