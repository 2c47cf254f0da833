"""Every credential algorithm fidosim offers, checked from outside: Fido2Server registers and authenticates with
each, `cryptography` (OpenSSL) verifies raw CTAP signatures against keys it builds itself from the COSE keys,
credential management returns the attested key, and the control plane's PKCS#8 export and import work both ways.

Run:  FIDOSIM_BIN=.build/debug/fidosim python3 -m pytest -p no:cacheprovider -q tools/interop/test_algorithms_interop.py
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from fido2.ctap2 import Ctap2
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.pin import ClientPin
from fido2.webauthn import ResidentKeyRequirement, UserVerificationRequirement

from fidosim.testing import (
    PERM,
    PIN,
    RP,
    RP_ID,
    authenticate,
    descriptor,
    make_client,
    make_server,
    new_cdh,
    register,
    token,
    user,
    web_user,
)

try:
    from cryptography.hazmat.primitives.asymmetric import mldsa
except ImportError:  # cryptography before 47
    mldsa = None

pytestmark = pytest.mark.sim_args("--presence-delay", "0")
SELF_ATTESTATION = Path(__file__).resolve().parent / "profiles" / "self-attestation.json"

# COSE id: (name, kty, crv, coordinate size, hash) for the EC2 and OKP keys; ML-DSA: (name, kty, None, public size);
# RSA: (name, kty, None, modulus size, hash).
ALGORITHMS = {
    -7: ("ES256", 2, 1, 32, hashes.SHA256),
    -8: ("EdDSA", 1, 6, 32, None),
    -35: ("ES384", 2, 2, 48, hashes.SHA384),
    -36: ("ES512", 2, 3, 66, hashes.SHA512),
    -9: ("ESP256", 2, 1, 32, hashes.SHA256),
    -51: ("ESP384", 2, 2, 48, hashes.SHA384),
    -52: ("ESP512", 2, 3, 66, hashes.SHA512),
    -19: ("Ed25519", 1, 6, 32, None),
    -49: ("ML-DSA-65", 7, None, 1952, None),
    -50: ("ML-DSA-87", 7, None, 2592, None),
    -257: ("RS256", 3, None, 256, hashes.SHA256),
    -37: ("PS256", 3, None, 256, hashes.SHA256),
    -47: ("ES256K", 2, 8, 32, hashes.SHA256),
}
CURVES = {1: ec.SECP256R1, 2: ec.SECP384R1, 3: ec.SECP521R1, 8: ec.SECP256K1}
IDS = [ALGORITHMS[a][0] for a in ALGORITHMS]


def openssl_verifier(cose: dict, alg: int):
    """A verify(signature, message) built by `cryptography` from the COSE key's members, which must be exactly the
    registry's for the algorithm (not through python-fido2's CoseKey)."""
    name, kty, crv, size, hash_type = ALGORITHMS[alg]
    assert cose[1] == kty and cose[3] == alg, cose
    if kty == 2:
        assert set(cose) == {1, 3, -1, -2, -3} and cose[-1] == crv
        assert len(cose[-2]) == size and len(cose[-3]) == size
        key = ec.EllipticCurvePublicNumbers(
            int.from_bytes(cose[-2], "big"), int.from_bytes(cose[-3], "big"), CURVES[crv]()
        ).public_key()
        return lambda sig, msg: key.verify(sig, msg, ec.ECDSA(hash_type()))
    if kty == 3:
        assert set(cose) == {1, 3, -1, -2} and len(cose[-1]) == size and cose[-1][0] != 0
        assert cose[-2] == b"\x01\x00\x01"
        key = rsa.RSAPublicNumbers(int.from_bytes(cose[-2], "big"), int.from_bytes(cose[-1], "big")).public_key()
        if alg == -257:
            return lambda sig, msg: key.verify(sig, msg, padding.PKCS1v15(), hashes.SHA256())
        pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
        return lambda sig, msg: key.verify(sig, msg, pss, hashes.SHA256())
    if kty == 1:
        assert set(cose) == {1, 3, -1, -2} and cose[-1] == 6 and len(cose[-2]) == 32
        return Ed25519PublicKey.from_public_bytes(cose[-2]).verify
    assert set(cose) == {1, 3, -1} and len(cose[-1]) == size
    if mldsa is None:
        pytest.skip("this cryptography has no ML-DSA")
    cls = mldsa.MLDSA65PublicKey if alg == -49 else mldsa.MLDSA87PublicKey
    return cls.from_public_bytes(cose[-1]).verify


def params(*algs):
    return [{"type": "public-key", "alg": a} for a in algs]


@pytest.mark.parametrize("alg", list(ALGORITHMS), ids=IDS)
def test_getinfo_lists_every_algorithm(sim, alg):
    assert {"alg": alg, "type": "public-key"} in Ctap2(sim.device()).info.algorithms


@pytest.mark.parametrize("alg", list(ALGORITHMS), ids=IDS)
@pytest.mark.parametrize("resident", [True, False], ids=["discoverable", "non-discoverable"])
@pytest.mark.sim_args("--presence-delay", "0", "--profile", str(SELF_ATTESTATION))
def test_raw_ctap_signatures_verify_with_openssl(sim, alg, resident):
    """With self attestation (a profile's choice) each algorithm's own key signs its attestation too."""
    ctap2 = Ctap2(sim.device())
    cdh = new_cdh()
    att = ctap2.make_credential(cdh, RP, user("alg"), params(alg), options={"rk": resident})
    cred = att.auth_data.credential_data
    assert len(cred.credential_id) <= ctap2.info.max_cred_id_length
    verify = openssl_verifier(dict(cred.public_key), alg)
    assert att.fmt == "packed" and att.att_stmt["alg"] == alg and "x5c" not in att.att_stmt
    verify(att.att_stmt["sig"], bytes(att.auth_data) + cdh)

    cdh = new_cdh()
    allow = None if resident else [descriptor(cred.credential_id)]
    got = ctap2.get_assertion(RP_ID, cdh, allow)
    assert got.credential["id"] == cred.credential_id
    verify(got.signature, bytes(got.auth_data) + cdh)
    with pytest.raises(InvalidSignature):
        verify(got.signature, bytes(got.auth_data) + hashlib.sha256(b"other").digest())


@pytest.mark.parametrize("alg", list(ALGORITHMS), ids=IDS)
def test_fido2server_registers_and_authenticates(sim, alg):
    server = make_server([alg])
    client, _ = make_client(sim.device(), pin=None)
    result, auth_data = register(
        server, client, web_user("alg"), rk=ResidentKeyRequirement.DISCOURAGED,
        uv=UserVerificationRequirement.DISCOURAGED,
    )
    assert auth_data.credential_data.public_key[3] == alg
    authenticate(server, client, [auth_data.credential_data], uv=UserVerificationRequirement.DISCOURAGED)


def test_the_first_supported_entry_wins(sim):
    ctap2 = Ctap2(sim.device())
    att = ctap2.make_credential(new_cdh(), RP, user("order"), params(-1000, -51, -7), options={"rk": False})
    assert att.auth_data.credential_data.public_key[3] == -51


def test_a_non_discoverable_rsa_credential_is_kept_on_the_key_and_names_no_user(sim):
    ctap2 = Ctap2(sim.device())
    att = ctap2.make_credential(new_cdh(), RP, user("rsa"), params(-257), options={"rk": False})
    cred_id = att.auth_data.credential_data.credential_id
    got = ctap2.get_assertion(RP_ID, new_cdh(), [descriptor(cred_id)])
    assert got.user is None
    with sim.control() as ctl:
        (listed,) = ctl.get_credentials()
    assert listed["credentialId"] == cred_id and listed["isResidentCredential"] is False


def test_credential_management_returns_the_attested_key(sim):
    ctap2 = Ctap2(sim.device())
    ClientPin(ctap2).set_pin(PIN)
    made = {}
    for alg in ALGORITHMS:
        protocol, mc = token(ctap2, PERM.MAKE_CREDENTIAL)
        cdh = new_cdh()
        att = ctap2.make_credential(
            cdh, RP, user(f"u{-alg}"), params(alg), options={"rk": True},
            pin_uv_param=protocol.authenticate(mc, cdh), pin_uv_protocol=protocol.VERSION,
        )
        made[att.auth_data.credential_data.credential_id] = dict(att.auth_data.credential_data.public_key)
    protocol, cm = token(ctap2, PERM.CREDENTIAL_MGMT, rp_id=None)
    listed = CredentialManagement(ctap2, protocol, cm).enumerate_creds(hashlib.sha256(RP_ID.encode()).digest())
    assert len(listed) == len(ALGORITHMS)
    for c in listed:
        cred_id = c[CredentialManagement.RESULT.CREDENTIAL_ID]["id"]
        assert dict(c[CredentialManagement.RESULT.PUBLIC_KEY]) == made[cred_id]


def public_of(private_key):
    return private_key.public_key().public_bytes(serialization.Encoding.DER,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo)


@pytest.mark.parametrize("alg", list(ALGORITHMS), ids=IDS)
def test_exported_pkcs8_is_the_credentials_key(sim, alg):
    ctap2 = Ctap2(sim.device())
    att = ctap2.make_credential(new_cdh(), RP, user("exp"), params(alg), options={"rk": True})
    cose = dict(att.auth_data.credential_data.public_key)
    with sim.control() as ctl:
        (exported,) = ctl.get_credentials()
    assert exported["algorithm"] == ALGORITHMS[alg][0]
    if alg in (-49, -50) and mldsa is None:
        pytest.skip("this cryptography has no ML-DSA")
    private = serialization.load_der_private_key(exported["privateKey"], None)
    cdh = new_cdh()
    got = ctap2.get_assertion(RP_ID, cdh, [descriptor(exported["credentialId"])])
    openssl_verifier(cose, alg)(got.signature, bytes(got.auth_data) + cdh)
    # The exported private key belongs to the attested public key.
    if alg in (-49, -50):
        assert private.public_key().public_bytes_raw() == cose[-1]
    elif ALGORITHMS[alg][1] == 3:
        assert private.public_key().public_numbers().n.to_bytes(256, "big") == cose[-1]
    elif ALGORITHMS[alg][1] == 2:
        numbers = private.public_key().public_numbers()
        assert numbers.x.to_bytes(ALGORITHMS[alg][3], "big") == cose[-2]
    else:
        assert private.public_key().public_bytes_raw() == cose[-2]


def generated_keys():
    keys = [("P-384", ec.generate_private_key(ec.SECP384R1()), -35),
            ("P-521", ec.generate_private_key(ec.SECP521R1()), -36),
            ("secp256k1", ec.generate_private_key(ec.SECP256K1()), -47),
            ("RSA-2048", rsa.generate_private_key(65537, 2048), -257)]
    if mldsa is not None:
        keys.append(("ML-DSA-65", mldsa.MLDSA65PrivateKey.generate(), -49))
        keys.append(("ML-DSA-87", mldsa.MLDSA87PrivateKey.generate(), -50))
    return keys


@pytest.mark.parametrize("name,private,alg", generated_keys(), ids=[k[0] for k in generated_keys()])
def test_an_imported_key_signs_for_its_public_key(sim, name, private, alg):
    pkcs8 = private.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
    cred_id = b"imported-" + name.encode()
    with sim.control() as ctl:
        ctl.add_credential(cred_id, RP_ID, pkcs8, resident=False)
        (listed,) = ctl.get_credentials()
    assert listed["algorithm"] == ALGORITHMS[alg][0]
    assert public_of(serialization.load_der_private_key(listed["privateKey"], None)) == public_of(private)
    cdh = new_cdh()
    got = Ctap2(sim.device()).get_assertion(RP_ID, cdh, [descriptor(cred_id)])
    message = bytes(got.auth_data) + cdh
    if alg in (-49, -50):
        private.public_key().verify(got.signature, message)
    elif alg == -257:
        private.public_key().verify(got.signature, message, padding.PKCS1v15(), hashes.SHA256())
    else:
        private.public_key().verify(got.signature, message, ec.ECDSA(ALGORITHMS[alg][4]()))
