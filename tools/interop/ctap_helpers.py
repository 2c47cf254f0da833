"""Small helpers the interop test files share: hashes, request pieces and error expectations."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest
from fido2.ctap import CtapError
from fido2.ctap1 import ApduError


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def new_cdh() -> bytes:
    """A fresh client-data hash."""
    return sha256(os.urandom(32))


def descriptor(cred_id: bytes) -> dict:
    return {"type": "public-key", "id": cred_id}


def user(name: str) -> dict:
    """A user entity with a random 16-byte id."""
    return {"id": os.urandom(16), "name": name, "displayName": name.title()}


def expect_ctap_error(code, fn, *args, **kwargs) -> CtapError:
    """Calls fn and requires it to fail with CTAP status `code`."""
    with pytest.raises(CtapError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, f"expected {code!s}, got {info.value.code!s}"
    return info.value


def expect_apdu_error(sw: int, fn, *args, **kwargs) -> ApduError:
    """Calls fn and requires it to fail with U2F status word `sw`."""
    with pytest.raises(ApduError) as info:
        fn(*args, **kwargs)
    assert info.value.code == sw, f"expected SW {sw:04X}, got {info.value.code:04X}"
    return info.value


def self_attested_server(rp_id: str = "example.com"):
    """A Fido2Server for `rp_id` that requires packed self attestation and verifies it with python-fido2."""
    from fido2.attestation import AttestationType, PackedAttestation
    from fido2.server import Fido2Server
    from fido2.webauthn import AttestationConveyancePreference, PublicKeyCredentialRpEntity

    def verify_packed(attestation_object, client_data_hash):
        assert attestation_object.fmt == "packed"
        result = PackedAttestation().verify(
            attestation_object.att_stmt, attestation_object.auth_data, client_data_hash
        )
        assert result.attestation_type == AttestationType.SELF

    return Fido2Server(
        PublicKeyCredentialRpEntity(id=rp_id, name="Example"),
        attestation=AttestationConveyancePreference.DIRECT,
        verify_attestation=verify_packed,
    )


def in_background(fn, *args, **kwargs):
    """Runs fn in a thread (a request that waits for a person); the returned function joins it and returns fn's
    result or raises its exception."""
    box = {}

    def run():
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            box["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join(timeout=20):
        thread.join(timeout)
        assert not thread.is_alive(), "the request did not end"
        if "error" in box:
            raise box["error"]
        return box["result"]

    return join


def make_credential(ctap, rp_id: str = "example.com", name: str = "bob"):
    """An ES256 makeCredential for `rp_id` and a new user `name`."""
    es256 = [{"type": "public-key", "alg": -7}]
    return ctap.make_credential(new_cdh(), {"id": rp_id, "name": "Example"}, user(name), es256)
