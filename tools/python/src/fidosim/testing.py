"""What tests of a key share (the interop suite's helpers, needs the fido2 extra and pytest): constants, hashes,
request pieces, error expectations, PIN tokens, and the python-fido2 client and relying-party server every
WebAuthn-level test uses.

    from fidosim.testing import RP, make_client, make_server, register, authenticate, expect_ctap_error

``make_server()`` verifies packed attestation by fidosim's shared batch up to its root (``SHARED_ROOT``, the
certificate of tools/attestation/shared-root.pem, shipped with the package).
"""

from __future__ import annotations

import hashlib
import os
import ssl
import subprocess
import threading

import pytest
from fido2.attestation import AttestationType, PackedAttestation, verify_x509_chain
from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction
from fido2.cose import ES256
from fido2.ctap import CtapError
from fido2.ctap1 import ApduError
from fido2.ctap2 import Ctap2
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.server import Fido2Server
from fido2.webauthn import (
    AttestationConveyancePreference,
    AuthenticatorData,
    PublicKeyCredentialParameters,
    PublicKeyCredentialRpEntity,
    PublicKeyCredentialType,
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

ERR = CtapError.ERR
PERM = ClientPin.PERMISSION
RP_ID = "example.com"
RP = {"id": RP_ID, "name": "Example"}
ORIGIN = "https://example.com"
PIN = "12345678"
UV = UserVerificationRequirement.REQUIRED
CM = CredentialManagement
OTHER_RP = {"id": "other.example", "name": "Other"}
ES256_PARAMS = [{"type": "public-key", "alg": -7}]
EDDSA_PARAMS = [{"type": "public-key", "alg": -8}]
PROTOCOLS = [PinProtocolV1, PinProtocolV2]
PROTOCOL_IDS = ["pinUvAuthProtocol1", "pinUvAuthProtocol2"]


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def new_cdh() -> bytes:
    """A fresh client-data hash."""
    return sha256(os.urandom(32))


def descriptor(cred_id: bytes) -> dict:
    return {"type": "public-key", "id": cred_id}


def user(name: str, user_id: bytes | None = None) -> dict:
    """A user entity, with a random 16-byte id unless `user_id` is given."""
    return {"id": user_id or os.urandom(16), "name": name, "displayName": name.title()}


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


# fidosim's shared batch attestation root (tools/attestation/shared-root.pem), DER.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "shared-root.pem")) as _pem:
    SHARED_ROOT = ssl.PEM_cert_to_DER_cert(_pem.read())


def assert_shared_batch(att_stmt, auth_data, client_data_hash) -> None:
    """Packed basic attestation by fidosim's shared batch: verified by python-fido2, its x5c chaining to the shared
    root."""
    result = PackedAttestation().verify(att_stmt, auth_data, client_data_hash)
    assert result.attestation_type == AttestationType.BASIC
    verify_x509_chain(list(att_stmt["x5c"]) + [SHARED_ROOT])


def make_server(algs=None, *, attestation: str = "shared", rp_id: str = RP_ID) -> Fido2Server:
    """A Fido2Server for `rp_id`. attestation "shared" (a default key): packed attestation by fidosim's shared batch,
    verified with python-fido2 up to the shared root; "self": packed self attestation, verified; "none": no
    attestation is asked for. `algs` limits the COSE algorithms it offers."""
    if attestation == "none":
        server = Fido2Server(
            PublicKeyCredentialRpEntity(id=rp_id, name="Example"), attestation=AttestationConveyancePreference.NONE
        )
    else:
        def verify_packed(attestation_object, client_data_hash):
            assert attestation_object.fmt == "packed"
            if attestation == "shared":
                assert_shared_batch(attestation_object.att_stmt, attestation_object.auth_data, client_data_hash)
                return
            result = PackedAttestation().verify(
                attestation_object.att_stmt, attestation_object.auth_data, client_data_hash
            )
            assert result.attestation_type == AttestationType.SELF

        server = Fido2Server(
            PublicKeyCredentialRpEntity(id=rp_id, name="Example"),
            attestation=AttestationConveyancePreference.DIRECT,
            verify_attestation=verify_packed,
        )
    if algs is not None:
        server.allowed_algorithms = [
            PublicKeyCredentialParameters(type=PublicKeyCredentialType.PUBLIC_KEY, alg=a) for a in algs
        ]
    return server


def token(ctap2, perms, rp_id: str | None = RP_ID, protocol=None, pin: str = PIN):
    """(protocol, pinUvAuthToken) via getPinUvAuthTokenUsingPinWithPermissions (python-fido2's ClientPin)."""
    cp = ClientPin(ctap2, protocol or PinProtocolV2())
    return cp.protocol, cp.get_pin_token(pin, perms, rp_id)


def retries(ctap2, protocol=None) -> int:
    """PIN retries left (getPINRetries)."""
    return ClientPin(ctap2, protocol or PinProtocolV2()).get_pin_retries()[0]


class PinInteraction(UserInteraction):
    """Answers every PIN request with `pin` and records what was asked for."""

    def __init__(self, pin: str | None = PIN):
        self.pin = pin
        self.requests: list[tuple[int, str | None]] = []

    def request_pin(self, permissions, rp_id):
        self.requests.append((permissions, rp_id))
        return self.pin


def make_client(dev, pin: str | None = PIN, extensions=None) -> tuple[Fido2Client, PinInteraction]:
    """A Fido2Client for ORIGIN whose user answers PIN requests with `pin`."""
    ui = PinInteraction(pin)
    kwargs = {"extensions": extensions} if extensions is not None else {}
    return Fido2Client(dev, DefaultClientDataCollector(ORIGIN), user_interaction=ui, **kwargs), ui


def web_user(name: str) -> PublicKeyCredentialUserEntity:
    return PublicKeyCredentialUserEntity(id=os.urandom(32), name=name, display_name=name.title())


def register(server, client, usr, *, rk=ResidentKeyRequirement.REQUIRED, uv=UV, extensions=None, attachment=None):
    """Fido2Client.make_credential; the server checks the attestation. Returns (result, auth_data)."""
    options, state = server.register_begin(
        usr, resident_key_requirement=rk, user_verification=uv, extensions=extensions,
        authenticator_attachment=attachment,
    )
    result = client.make_credential(options.public_key)
    auth_data = server.register_complete(state, result)
    assert result.raw_id == auth_data.credential_data.credential_id
    return result, auth_data


def authenticate(server, client, creds, *, allow=True, uv=UV, extensions=None, index=0):
    """Fido2Client.get_assertion (with an allow list unless `allow` is false); the server verifies the signature.
    Returns (selection, the response at `index`)."""
    options, state = server.authenticate_begin(
        creds if allow else None, user_verification=uv, extensions=extensions
    )
    selection = client.get_assertion(options.public_key)
    response = selection.get_response(index)
    server.authenticate_complete(state, creds, response)
    return selection, response


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


def start_lines(server) -> list[str]:
    """What a FidosimServer started with ``stdout=subprocess.PIPE`` printed as it started: its lines up to the one
    that says it serves its last key (a line "serving a virtual key ..." for each key)."""
    lines: list[str] = []
    serving = 0
    for line in server.process.stdout:
        lines.append(line)
        serving += "serving a virtual key" in line
        if serving == len(server.keys):
            break
    return lines


def make_credential(ctap, rp_id: str = "example.com", name: str = "bob"):
    """An ES256 makeCredential for `rp_id` and a new user `name`."""
    es256 = [{"type": "public-key", "alg": -7}]
    return ctap.make_credential(new_cdh(), {"id": rp_id, "name": "Example"}, user(name), es256)


def make_cred_uv(ctap2: Ctap2, usr: dict, *, rp=RP, rk=True, extensions=None,
                 params=ES256_PARAMS, protocol=None, pin: str = PIN):
    """makeCredential with a fresh mc token (a token is spent by the touch, CTAP 2.1 §6.1.2)."""
    proto, tok = token(ctap2, PERM.MAKE_CREDENTIAL, rp["id"], protocol, pin)
    cdh = new_cdh()
    att = ctap2.make_credential(
        cdh, rp, usr, params, extensions=extensions, options={"rk": rk},
        pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=proto.VERSION,
    )
    assert att.auth_data.is_user_present()
    assert att.auth_data.is_user_verified()
    assert att.auth_data.rp_id_hash == sha256(rp["id"].encode())
    return att


def get_assertion_uv(ctap2: Ctap2, rp_id=RP_ID, allow=None, extensions=None, protocol=None,
                     cdh=None):
    proto, tok = token(ctap2, PERM.GET_ASSERTION, rp_id, protocol)
    cdh = cdh or new_cdh()
    return ctap2.get_assertion(
        rp_id, cdh, allow, extensions=extensions,
        pin_uv_param=proto.authenticate(tok, cdh), pin_uv_protocol=proto.VERSION,
    )


# The core flows' helpers (test_udp_interop and the flash, bench tests).


def make_cred(ctap2: Ctap2, user_id: bytes, *, rk: bool, rp=RP, name="user",
              display_name="User", exclude=None, cdh=None):
    """Ctap2 makeCredential (ES256); returns (AttestationResponse, AttestedCredentialData)."""
    att = ctap2.make_credential(
        cdh or new_cdh(),
        rp,
        {"id": user_id, "name": name, "displayName": display_name},
        ES256_PARAMS,
        exclude_list=exclude,
        options={"rk": True} if rk else None,
    )
    auth_data = att.auth_data
    assert auth_data.flags & AuthenticatorData.FLAG.AT
    assert auth_data.is_user_present()
    assert auth_data.rp_id_hash == sha256(rp["id"].encode())
    cred = auth_data.credential_data
    assert cred is not None and len(cred.credential_id) > 0
    assert isinstance(cred.public_key, ES256)
    return att, cred


def assert_signed(assertion, cdh: bytes, cred) -> None:
    """Signature over authData || clientDataHash verifies with the credential key."""
    assertion.verify(cdh, cred.public_key)  # raises InvalidSignature on failure


def assert_by_id(ctap2: Ctap2, cred, rp_id=RP_ID):
    """getAssertion with an allow list of one credential; checks the signature."""
    cdh = new_cdh()
    a = ctap2.get_assertion(rp_id, cdh, [descriptor(cred.credential_id)])
    assert a.auth_data.rp_id_hash == sha256(rp_id.encode())
    assert a.auth_data.is_user_present()
    # credential may be omitted when the allow list had exactly one entry
    if a.credential is not None and "id" in a.credential:
        assert a.credential["id"] == cred.credential_id
    assert_signed(a, cdh, cred)
    return a


def new_user(name="alice") -> PublicKeyCredentialUserEntity:
    return PublicKeyCredentialUserEntity(
        id=os.urandom(32), name=name, display_name=name.title()
    )


def web_register(server, client, user, resident_key, exclude=None):
    """register_begin -> client.make_credential -> register_complete.

    Returns (RegistrationResponse, AuthenticatorData from register_complete).
    """
    options, state = server.register_begin(
        user,
        credentials=exclude,
        resident_key_requirement=resident_key,
        user_verification=UserVerificationRequirement.DISCOURAGED,
    )
    result = client.make_credential(options.public_key)
    auth_data = server.register_complete(state, result)
    assert auth_data.credential_data is not None
    assert result.raw_id == auth_data.credential_data.credential_id
    return result, auth_data


def web_authenticate(server, client, credentials, allow=True):
    """authenticate_begin -> client.get_assertion -> authenticate_complete.

    Returns the AuthenticationResponse used.
    """
    options, state = server.authenticate_begin(
        credentials if allow else None,
        user_verification=UserVerificationRequirement.DISCOURAGED,
    )
    selection = client.get_assertion(options.public_key)
    assertions = selection.get_assertions()
    assert len(assertions) >= 1
    response = selection.get_response(0)
    server.authenticate_complete(state, credentials, response)
    return response


def assert_signs_like(sim, made: dict) -> None:
    """Every credential id in `made` (id -> the COSE key it was registered with) answers an allow-list
    getAssertion on `sim`, verified with that key."""
    ctap2 = Ctap2(sim.device())
    for cred_id, cose in made.items():
        cdh = new_cdh()
        assertion = ctap2.get_assertion("example.com", cdh, [descriptor(cred_id)])
        cose.verify(bytes(assertion.auth_data) + cdh, assertion.signature)


# Another local user (uid/gid 65534), for the tests of who may reach the key. That user cannot run an interpreter
# under /root (pyenv's, the suite's venv): the system's python3 runs the standard-library snippets.
NOBODY = 65534
OTHER_USER_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"


def as_nobody_command(script: str, *args: str) -> list[str]:
    """The command that runs a Python snippet as the other user (setpriv: needs root)."""
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", OTHER_USER_PYTHON, "-c", script,
            *args]


def as_nobody(script: str, *args: str, timeout: float = 30) -> str:
    """Runs a Python snippet as the other user and returns its standard output (stripped)."""
    result = subprocess.run(as_nobody_command(script, *args), capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


_SEND_LINE = (
    "import socket,sys;s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);"
    "s.sendall(sys.argv[2].encode()+b'\\n');s.settimeout(5);"
    "d=b''\nwhile True:\n c=s.recv(4096)\n if not c: break\n d+=c\nsys.stdout.write(d.decode())"
)


def control_lines_as_nobody(path: str, line: str) -> list[str]:
    """Sends one line to a control socket (a key's or the hub's) as the other user; the lines that came back until
    the key closed the connection. The socket's file permissions must let that user connect."""
    return as_nobody(_SEND_LINE, path, line, timeout=20).splitlines()
