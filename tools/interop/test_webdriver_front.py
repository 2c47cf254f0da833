"""`fidosim webdriver`'s HTTP endpoint from outside, with a stand-in driver (a small HTTP server given the port as
chromedriver is: `--port=N`) so that what is checked is the front: requests it does not answer reach the driver
unchanged, the WebAuthn extension commands add a real private key and reach its control socket, bad HTTP gets a
clear error, and another local user is refused (the browser tests run it with chromedriver:
tools/python/examples/browser/test_selenium_virtual_authenticator.py)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.parse

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

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
    endpoint = urllib.parse.urlsplit(record["webdriver"])
    record["port"], record["prefix"] = endpoint.port, endpoint.path
    assert re.fullmatch(r"/[0-9a-f]{32}", record["prefix"]), record["webdriver"]
    yield record
    process.terminate()
    process.wait(timeout=30)


def call(front: dict, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", front["port"], timeout=30)
    connection.request(method, front["prefix"] + path, body=None if body is None else json.dumps(body),
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def test_other_requests_reach_the_driver_unchanged(front):
    status, answer = call(front, "POST", "/session/abc/url", {"url": "http://localhost/"})
    assert status == 200
    # Under the driver's own secret path (chromedriver's --url-base), which the client never sees.
    assert answer["value"] == {"method": "POST", "path": front["driverUrlBase"] + "/session/abc/url",
                               "body": '{"url": "http://localhost/"}'}


def test_only_the_secret_url_gets_in(front):
    """The endpoint's URL (printed, and in the 0600 ready file) has a secret path: a program that finds the port
    but not the path gets 404 and reaches neither the driver nor the keys."""
    for path in ("/status", "/session/abc/url", "/" + "0" * 32 + "/status", front["prefix"] + "x/status"):
        connection = http.client.HTTPConnection("127.0.0.1", front["port"], timeout=30)
        connection.request("GET", path)
        response = connection.getresponse()
        assert response.status == 404, path
        assert json.loads(response.read())["value"]["error"] == "unknown command"
    assert call(front, "GET", "/status")[0] == 200


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


def raw_request(front: dict, head: str, body: bytes = b"") -> tuple[int, str]:
    with socket.create_connection(("127.0.0.1", front["port"]), timeout=10) as s:
        s.sendall(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, answer.decode(errors="replace")


def test_a_web_page_is_never_a_webdriver_client(front):
    """A page the owner visits may POST across sites (its browser adds Origin) or be rebound to 127.0.0.1 (its requests
    carry the page's own Host): both are refused, and no key is added."""
    body = json.dumps({"protocol": "ctap2", "transport": "usb"}).encode()
    port = front["port"]
    head = (f"POST {front['prefix']}/session/s9/webauthn/authenticator HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Origin: https://evil.example\r\nContent-Type: text/plain\r\n")
    status, answer = raw_request(front, head, body)
    assert status == 403 and "Origin" in answer
    status, answer = raw_request(front, f"GET {front['prefix']}/status HTTP/1.1\r\nHost: rebound.example:{port}\r\n")
    assert status == 403 and "rebound.example" in answer
    assert FidosimHub(path=front["hub"]).list_virtual_authenticators() == []
    assert call(front, "GET", "/status")[0] == 200, "a client that names the endpoint gets in"


def test_a_webdriver_client_names_no_file(front, tmp_path):
    """Add Virtual Authenticator's `flash` and `profile` name files the key would open as its owner: from a client,
    only `memory` and built-in profiles are taken."""
    image = tmp_path / "chosen-by-the-client.img"
    status, answer = call(front, "POST", "/session/s8/webauthn/authenticator",
                          {"protocol": "ctap2", "transport": "usb", "flash": str(image)})
    assert status == 400 and answer["value"]["error"] == "invalid argument", answer
    status, answer = call(front, "POST", "/session/s8/webauthn/authenticator",
                          {"protocol": "ctap2", "transport": "usb", "profile": str(tmp_path / "fifo")})
    assert status == 400 and "built-in profile" in answer["value"]["message"], answer
    assert not image.exists() and FidosimHub(path=front["hub"]).list_virtual_authenticators() == []
    status, answer = call(front, "POST", "/session/s8/webauthn/authenticator",
                          {"protocol": "ctap2", "transport": "usb", "profile": "yubikey5", "flash": "memory"})
    assert status == 200, answer
    assert call(front, "DELETE", "/session/s8")[0] == 200


def test_arguments_are_checked_as_chromedriver_checks_them(front):
    """Missing or null protocol or transport, a transport a USB key cannot be, a credential without signCount, and a
    resident credential on a U2F authenticator: invalid argument (400), as chromedriver answers."""
    add = "/session/s7/webauthn/authenticator"
    for body in ({}, {"transport": "usb"}, {"protocol": "ctap2"}, {"protocol": None, "transport": "usb"},
                 {"protocol": "ctap2", "transport": None}):
        status, answer = call(front, "POST", add, body)
        assert status == 400 and answer["value"]["error"] == "invalid argument", (body, answer)
    status, answer = call(front, "POST", add, {"protocol": "ctap2", "transport": "ble"})
    assert status == 400 and "USB security key, which cannot be ble" in answer["value"]["message"]
    status, u2f = call(front, "POST", add, {"protocol": "ctap1/u2f", "transport": "usb"})
    assert status == 200, u2f
    credential = {"credentialId": "AQID", "rpId": "example.com", "privateKey": "AAAA", "isResidentCredential": True,
                  "userHandle": "AQ", "signCount": 0}
    status, answer = call(front, "POST", f"{add}/{u2f['value']}/credential", credential)
    assert status == 400 and "U2F authenticator cannot hold a resident credential" in answer["value"]["message"]
    # A credential without a counter (signCount null, as chromedriver takes it) reports 0.
    status, ctap2 = call(front, "POST", add, {"protocol": "ctap2", "transport": "usb"})
    assert status == 200, ctap2
    private = base64.urlsafe_b64encode(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(serialization.Encoding.DER,
                                                              serialization.PrivateFormat.PKCS8,
                                                              serialization.NoEncryption())).rstrip(b"=").decode()
    counterless = {"credentialId": "AQIDBA", "rpId": "example.com", "privateKey": private,
                   "isResidentCredential": False, "signCount": None}
    status, answer = call(front, "POST", f"{add}/{ctap2['value']}/credential", counterless)
    assert status == 200, answer
    status, answer = call(front, "GET", f"{add}/{ctap2['value']}/credentials")
    assert status == 200 and [c["signCount"] for c in answer["value"]] == [0], answer
    del credential["signCount"]
    credential["isResidentCredential"] = False
    status, answer = call(front, "POST", f"{add}/{u2f['value']}/credential", credential)
    assert status == 400 and "signCount" in answer["value"]["message"]
    assert call(front, "DELETE", "/session/s7")[0] == 200


def test_idle_connections_hold_at_most_their_places(front):
    """Connections that send nothing hold at most the front's 16 places (each for at most 30 s): the next client is
    told 503 at once instead of waiting, and gets in as soon as they close."""
    idle = [socket.create_connection(("127.0.0.1", front["port"]), timeout=10) for _ in range(16)]
    try:
        deadline = time.monotonic() + 10
        status = 0
        while status != 503 and time.monotonic() < deadline:
            status = call_status(front)
        assert status == 503
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 20
    while call_status(front) != 200:
        assert time.monotonic() < deadline, "the places were not given back"
        time.sleep(0.05)


def call_status(front: dict) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", front["port"], timeout=30)
    connection.request("GET", front["prefix"] + "/status")
    return connection.getresponse().status
