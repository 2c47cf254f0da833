"""A client for the control socket of `fidosim serve` (standard library only).

    from fidosim import FidosimControl

    with FidosimControl(name="default") as key:          # or FidosimControl(path="/run/user/1000/fidosim/x.sock")
        key.presence("prompt")
        key.add_credential(credential_id=b"...", rp_id="example.com", private_key=pkcs8_der, resident=False)
        event = key.wait_for_event(lambda e: e["event"] == "prompt", timeout=10)
        key.touch()

The protocol is newline-delimited JSON (firmware-spec/control.md): requests `{"id", "command", "params"}`,
responses `{"id", "ok", "result" | "error"}`, and, after `subscribe`, event lines `{"event", ...}`.
Binary values (credential ids, keys, user handles) are base64url without padding on the wire; this module
takes and returns `bytes`.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import time
from collections import deque
from typing import Any, Callable, Iterator


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def default_socket_path(name: str = "default") -> str:
    """Where `fidosim serve --name NAME` puts its socket."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        return os.path.join(runtime, "fidosim", name + ".sock")
    data = os.environ.get("XDG_DATA_HOME", "")
    if not data.startswith("/"):
        data = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "fidosim", name + ".sock")


class ControlError(Exception):
    """The simulator refused a request: `code` is the protocol's error code, `message` says why.

    Each code of firmware-spec/control.md has its own subclass (``NotFoundError`` for `not-found`, ...), so a test
    can catch exactly the refusal it expects; ``ControlError`` catches them all."""

    code = "?"

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    @staticmethod
    def of(code: str, message: str) -> "ControlError":
        """The error for `code`: its subclass, or ControlError itself for a code this module does not know."""
        return _ERRORS.get(code, ControlError)(code, message)


class ParseError(ControlError):
    """`parse-error`: the line sent was not JSON."""


class InvalidRequestError(ControlError):
    """`invalid-request`: JSON, but not a request object."""


class UnknownCommandError(ControlError):
    """`unknown-command`: no such command."""


class InvalidParamsError(ControlError):
    """`invalid-params`: a parameter is missing, unknown, of the wrong type or out of range."""


class TooLargeError(ControlError):
    """`too-large`: the line was longer than 1 MiB."""


class NotFoundError(ControlError):
    """`not-found`: the credential named does not exist."""


class FailedError(ControlError):
    """`failed`: the key could not do it (a full store, a failed flash write, ...); the message has the status."""


class PermissionDeniedError(ControlError):
    """`permission-denied`: the socket belongs to another user."""


class ProtocolError(ControlError):
    """The simulator sent something this client did not expect."""


_ERRORS = {
    "parse-error": ParseError,
    "invalid-request": InvalidRequestError,
    "unknown-command": UnknownCommandError,
    "invalid-params": InvalidParamsError,
    "too-large": TooLargeError,
    "not-found": NotFoundError,
    "failed": FailedError,
    "permission-denied": PermissionDeniedError,
    "protocol": ProtocolError,
}


class FidosimControl:
    """One connection to a running virtual key's control socket."""

    def __init__(self, path: str | None = None, name: str = "default", timeout: float = 10.0):
        self.path = path or default_socket_path(name)
        self.timeout = timeout
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._sock.connect(self.path)
        self._buffer = b""
        self._events: deque[dict] = deque()
        self._next_id = 1

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "FidosimControl":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- wire ----------------------------------------------------------------

    def send_line(self, line: bytes) -> None:
        """Sends raw bytes and a newline (tests use it for malformed requests)."""
        self._sock.sendall(line + b"\n")

    def read_message(self, timeout: float | None = None) -> dict:
        """The next JSON line the simulator sends (a response or an event)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no message from the simulator")
            self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(65536)
            except socket.timeout as error:
                raise TimeoutError("no message from the simulator") from error
            if not chunk:
                raise ConnectionError("the simulator closed the control connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def request(self, command: str, /, **params: Any) -> Any:
        """Sends a command and returns its result; raises a ControlError subclass when the simulator refuses it.
        Parameters that are None are left out."""
        return self._exchange(command, {k: v for k, v in params.items() if v is not None})

    def _exchange(self, command: str, params: dict) -> Any:
        request_id = self._next_id
        self._next_id += 1
        body = {"id": request_id, "command": command}
        if params:
            body["params"] = params
        self.send_line(json.dumps(body).encode())
        while True:
            message = self.read_message()
            if "event" in message:
                self._events.append(message)
                continue
            if message.get("id") != request_id:
                raise ProtocolError("protocol", f"unexpected response {message!r}")
            if not message.get("ok"):
                error = message.get("error") or {}
                raise ControlError.of(error.get("code", "?"), error.get("message", ""))
            return message.get("result")

    # -- WebDriver-style credential commands ---------------------------------

    def add_credential(self, credential_id: bytes, rp_id: str, private_key: bytes, resident: bool,
                       user_handle: bytes | None = None, sign_count: int = 0, user_name: str | None = None,
                       user_display_name: str | None = None, large_blob: bytes | None = None,
                       backup_eligibility: bool | None = None, backup_state: bool | None = None) -> dict:
        """Adds a credential; private_key is PKCS#8 DER (P-256/384/521, secp256k1, Ed25519, RSA, ML-DSA)."""
        return self.request(
            "addCredential", credentialId=b64url(credential_id), isResidentCredential=resident, rpId=rp_id,
            privateKey=b64url(private_key), userHandle=b64url(user_handle) if user_handle else None,
            signCount=sign_count, userName=user_name, userDisplayName=user_display_name,
            largeBlob=b64url(large_blob) if large_blob is not None else None,
            backupEligibility=backup_eligibility, backupState=backup_state,
        )

    def get_credentials(self) -> list[dict]:
        """Every credential, with credentialId, privateKey and userHandle decoded to bytes."""
        out = []
        for c in self.request("getCredentials")["credentials"]:
            c = dict(c)
            for key in ("credentialId", "privateKey", "userHandle", "largeBlob"):
                if key in c:
                    c[key] = unb64url(c[key])
            out.append(c)
        return out

    def remove_credential(self, credential_id: bytes) -> None:
        self.request("removeCredential", credentialId=b64url(credential_id))

    def set_credential_properties(self, credential_id: bytes, backup_eligibility: bool | None = None,
                                  backup_state: bool | None = None, sign_count: int | None = None) -> None:
        """WebDriver's Set Credential Properties: the backup state (and the eligibility it was made with), and
        Chromium's signCount: -1 removes the credential's counter (its assertions report 0), a number raises the
        key's one counter to it (it never goes back)."""
        self.request("setCredentialProperties", credentialId=b64url(credential_id),
                     backupEligibility=backup_eligibility, backupState=backup_state, signCount=sign_count)

    def remove_all_credentials(self) -> int:
        return self.request("removeAllCredentials")["removed"]

    def set_user_verified(self, verified: bool) -> None:
        self.request("setUserVerified", isUserVerified=verified)

    def set_automatic_presence_simulation(self, enabled: bool) -> str:
        """True: approve after 200 ms; false: prompt. Returns the presence mode in words."""
        return self.request("setAutomaticPresenceSimulation", enabled=enabled)["presence"]

    # -- the device ----------------------------------------------------------

    def power_cycle(self, off_ms: int | None = None) -> None:
        """Unplugs the key and plugs it back in (after off_ms, or at the next power_cycle when off_ms is given)."""
        self.request("powerCycle", offMs=off_ms)

    def presence(self, mode: str, delay_ms: int | None = None) -> str:
        """mode: approve, deny, prompt or approveNext."""
        return self.request("presence", mode=mode, delayMs=delay_ms)["presence"]

    def touch(self, duration_ms: int | None = None) -> dict:
        """Answers the request waiting for the user: `{answered, command?, rpId?, reason?}`."""
        return self.request("touch", durationMs=duration_ms)

    def refuse(self) -> dict:
        """Refuses the request waiting for the user (`n` at the terminal): `{answered, command?, rpId?}`."""
        return self.request("refuse")

    def status(self) -> dict:
        return self.request("status")

    def set_option(self, **options: bool) -> dict:
        """resetWindow, alwaysUv, fingerprintSensor."""
        return self.request("setOption", **options)

    def inject_fault(self, kind: str, **params: Any) -> dict:
        """kind: status (command, status, count), keyStoreFull (afterCredentials), flashWriteFailure (count),
        dropReports (direction, count), responseOverride (isBogusSignature, isBadUP, isBadUV, count)."""
        return self.request("injectFault", kind=kind, **params)

    def clear_faults(self) -> dict:
        return self.request("clearFaults")

    def trace(self, path: str | None, format: str | None = None) -> dict:
        """Starts recording HID reports and CTAP messages to path (jsonl or pcapng), or stops with None."""
        params: dict = {"path": path}
        if format is not None:
            params["format"] = format
        return self._exchange("trace", params)

    def set_attestation(self, private_key: bytes, certificate: bytes, root_certificate: bytes,
                        enterprise_private_key: bytes | None = None,
                        enterprise_certificate: bytes | None = None) -> dict:
        """A batch attestation (PKCS#8 P-256 key, DER certificates), optionally with the enterprise pair."""
        return self.request(
            "setAttestation", privateKey=b64url(private_key), certificate=b64url(certificate),
            rootCertificate=b64url(root_certificate),
            enterprisePrivateKey=b64url(enterprise_private_key) if enterprise_private_key else None,
            enterpriseCertificate=b64url(enterprise_certificate) if enterprise_certificate else None,
        )["attestation"]

    # -- events --------------------------------------------------------------

    def subscribe(self) -> None:
        self.request("subscribe")

    def unsubscribe(self) -> None:
        self.request("unsubscribe")

    def events(self, timeout: float | None = None) -> Iterator[dict]:
        """Events as they come, until `timeout` seconds pass without one."""
        while True:
            if self._events:
                yield self._events.popleft()
                continue
            try:
                message = self.read_message(timeout)
            except TimeoutError:
                return
            if "event" in message:
                yield message

    def wait_for_event(self, predicate: Callable[[dict], bool], timeout: float = 10.0) -> dict:
        """The first event for which predicate is true; raises TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the expected event did not come")
            for event in self.events(timeout=left):
                if predicate(event):
                    return event
                if time.monotonic() >= deadline:
                    break
