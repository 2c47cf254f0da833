"""Batch attestation and the metadata statement, verified by python-fido2 and `cryptography` (OpenSSL).

`fidosim attestation provision` gives the key a root CA and leaf certificate; python-fido2's Fido2Server with
an MdsAttestationVerifier built from `fidosim metadata` must then accept the key's packed attestation, and
reject it once the key has another batch.
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fido2.attestation import AttestationType, PackedAttestation, UntrustedAttestation, verify_x509_chain
from fido2.ctap1 import Ctap1
from fido2.ctap2 import Ctap2
from fido2.mds3 import MdsAttestationVerifier, MetadataBlobPayload, MetadataStatement
from fido2.server import Fido2Server
from fido2.webauthn import AttestationConveyancePreference, PublicKeyCredentialRpEntity

from fidosim.testing import RP, SHARED_ROOT, assert_shared_batch, new_cdh, sha256, user

ES256 = [{"type": "public-key", "alg": -7}]
AAGUID = bytes.fromhex("f1d0f1d051574e008a6e000000000001")
AAGUID_OID = x509.ObjectIdentifier("1.3.6.1.4.1.45724.1.1.4")


def fidosim(sim, *args, check=True):
    out = subprocess.run([str(sim.binary), *args], capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def provision(sim, tmp_path, *extra):
    root_pem = tmp_path / "root.pem"
    out = fidosim(sim, "attestation", "provision", "--control", sim.control_path, "--root-out", str(root_pem), *extra)
    assert "batch attestation provisioned" in out.stdout
    return x509.load_pem_x509_certificate(root_pem.read_bytes())


def metadata_verifier(sim):
    statement = json.loads(fidosim(sim, "metadata", "--control", sim.control_path).stdout)
    MetadataStatement.from_dict(statement)  # python-fido2 reads every field
    blob = MetadataBlobPayload.from_dict({
        "legalHeader": "test", "no": 1, "nextUpdate": "2099-01-01",
        "entries": [{
            "aaguid": statement["aaguid"], "metadataStatement": statement,
            "statusReports": [{"status": "NOT_FIDO_CERTIFIED"}], "timeOfLastStatusChange": "2026-01-01",
        }],
    })
    return statement, MdsAttestationVerifier(blob)


def test_packed_batch_attestation_verifies_against_the_root(sim, tmp_path):
    root = provision(sim, tmp_path)
    made = Ctap2(sim.device()).make_credential(cdh := new_cdh(), RP, user("alice"), ES256)
    assert made.fmt == "packed"
    x5c = made.att_stmt["x5c"]
    assert len(x5c) == 1
    result = PackedAttestation().verify(made.att_stmt, made.auth_data, cdh)
    assert result.attestation_type == AttestationType.BASIC
    verify_x509_chain(x5c + [root.public_bytes(serialization.Encoding.DER)])

    leaf = x509.load_der_x509_certificate(x5c[0])
    assert leaf.version == x509.Version.v3
    assert leaf.issuer == root.subject
    subject = {a.oid: a.value for a in leaf.subject}
    assert subject[NameOID.ORGANIZATIONAL_UNIT_NAME] == "Authenticator Attestation"
    assert subject[NameOID.COUNTRY_NAME] == "US" and subject[NameOID.ORGANIZATION_NAME] == "fidosim"
    assert NameOID.COMMON_NAME in subject
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    aaguid_ext = leaf.extensions.get_extension_for_oid(AAGUID_OID)
    assert aaguid_ext.critical is False
    assert aaguid_ext.value.value == b"\x04\x10" + AAGUID
    assert made.auth_data.credential_data.aaguid == AAGUID


def test_fido2_server_with_the_metadata_statement_accepts_the_key(sim, tmp_path):
    provision(sim, tmp_path)
    statement, verifier = metadata_verifier(sim)
    assert statement["attestationTypes"] == ["basic_full"]
    assert statement["aaguid"] == "f1d0f1d0-5157-4e00-8a6e-000000000001"
    assert statement["authenticatorGetInfo"]["versions"] == ["U2F_V2", "FIDO_2_0", "FIDO_2_1_PRE", "FIDO_2_1",
                                                             "FIDO_2_3"]
    assert statement["authenticatorGetInfo"]["aaguid"] == AAGUID.hex()
    assert "encIdentifier" not in statement["authenticatorGetInfo"]

    server = Fido2Server(PublicKeyCredentialRpEntity(id="example.com", name="Example"),
                         attestation=AttestationConveyancePreference.DIRECT, verify_attestation=verifier)
    from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction

    client = Fido2Client(sim.device(), DefaultClientDataCollector("https://example.com"),
                         user_interaction=UserInteraction())
    options, state = server.register_begin(user("bob"), user_verification="discouraged")
    server.register_complete(state, client.make_credential(options.public_key))  # raises if untrusted

    # Another batch: the old metadata no longer vouches for the key.
    provision(sim, tmp_path, "--force")
    options, state = server.register_begin(user("carol"), user_verification="discouraged")
    response = client.make_credential(options.public_key)
    with pytest.raises(UntrustedAttestation):
        verifier.verify_attestation(response.response.attestation_object,
                                    sha256(bytes(response.response.client_data)))


def test_u2f_register_uses_the_batch_certificate(sim, tmp_path):
    provision(sim, tmp_path)
    status_leaf = None
    with sim.control() as ctl:
        from fidosim.control import unb64url

        status_leaf = unb64url(ctl.status()["attestation"]["certificate"])
    app, challenge = sha256(b"https://example.com"), new_cdh()
    registration = Ctap1(sim.device()).register(challenge, app)
    assert registration.certificate == status_leaf
    registration.verify(app, challenge)  # the signature verifies with the certificate's key


def test_a_fresh_key_attests_with_the_shared_batch_and_its_metadata_says_so(sim):
    """Out of the box a key attests as hardware keys do: packed with a batch certificate in x5c, here fidosim's
    shared batch (every fidosim's, so it tells a relying party the model, never the key), chaining to the root in
    tools/attestation/shared-root.pem; U2F register sends the same certificate; `none` stays none."""
    made = Ctap2(sim.device()).make_credential(cdh := new_cdh(), RP, user("a"), ES256)
    assert_shared_batch(made.att_stmt, made.auth_data, cdh)
    leaf = x509.load_der_x509_certificate(made.att_stmt["x5c"][0])
    subject = {a.oid: a.value for a in leaf.subject}
    assert subject[NameOID.COMMON_NAME] == "fidosim shared batch attestation"
    assert subject[NameOID.ORGANIZATIONAL_UNIT_NAME] == "Authenticator Attestation"
    # No AAGUID extension: the one leaf fits every profile's AAGUID; no serial, no user in it.
    assert AAGUID_OID not in [e.oid for e in leaf.extensions]
    app, challenge = sha256(b"https://example.com"), new_cdh()
    registration = Ctap1(sim.device()).register(challenge, app)
    assert registration.certificate == made.att_stmt["x5c"][0]
    registration.verify(app, challenge)
    with sim.control() as ctl:
        assert ctl.status()["attestation"]["type"] == "shared-batch"
    statement, verifier = metadata_verifier(sim)
    assert statement["attestationTypes"] == ["basic_full"]
    assert base64.b64decode(statement["attestationRootCertificates"][0]) == SHARED_ROOT
    verifier.verify_attestation(made, cdh)  # python-fido2's MDS verifier trusts it through the statement's root
    # A relying party that asks for none (attestationFormatsPreference) still gets none.
    none = Ctap2(sim.device()).send_cbor(Ctap2.CMD.MAKE_CREDENTIAL,
                                         {1: new_cdh(), 2: RP, 3: user("b"), 4: ES256, 0x0B: ["none"]})
    assert none[1] == "none" and none[3] == {}


@pytest.mark.sim_args("--profile", str(Path(__file__).resolve().parent / "profiles" / "self-attestation.json"))
def test_a_profile_may_choose_self_attestation(sim):
    made = Ctap2(sim.device()).make_credential(cdh := new_cdh(), RP, user("a"), ES256)
    assert "x5c" not in made.att_stmt
    assert PackedAttestation().verify(made.att_stmt, made.auth_data, cdh).attestation_type == AttestationType.SELF
    out = fidosim(sim, "metadata", "--control", sim.control_path)
    assert json.loads(out.stdout)["attestationTypes"] == ["basic_surrogate"]
    assert "self attestation" in out.stderr


def test_provisioning_twice_needs_force(sim, tmp_path):
    provision(sim, tmp_path)
    with sim.control() as ctl:
        assert ctl.status()["attestation"]["type"] == "batch"
    again = fidosim(sim, "attestation", "provision", "--control", sim.control_path,
                    "--root-out", str(tmp_path / "r2.pem"), check=False)
    assert again.returncode != 0 and "--force" in again.stderr


def test_offline_provisioning_of_an_image(sim, tmp_path, start_sim):
    image = tmp_path / "key.img"
    root_pem = tmp_path / "root.pem"
    fidosim(sim, "attestation", "provision", "--flash", str(image), "--root-out", str(root_pem))
    other = start_sim("--flash", str(image))
    try:
        made = Ctap2(other.device()).make_credential(new_cdh(), RP, user("a"), ES256)
        root = x509.load_pem_x509_certificate(root_pem.read_bytes())
        leaf = x509.load_der_x509_certificate(made.att_stmt["x5c"][0])
        root.public_key().verify(leaf.signature, leaf.tbs_certificate_bytes, ec.ECDSA(hashes.SHA256()))
    finally:
        other.finish()


def test_keys_of_one_batch_share_their_attestation_certificate(sim, tmp_path, start_sim):
    batch = tmp_path / "batch.json"
    first_root = provision(sim, tmp_path, "--batch", str(batch))
    assert (batch.stat().st_mode & 0o777) == 0o600
    assert json.loads(batch.read_text())["format"] == "fidosim-batch-1"
    other = start_sim()
    try:
        root_pem = tmp_path / "root-2.pem"
        out = fidosim(other, "attestation", "provision", "--control", other.control_path, "--root-out", str(root_pem),
                      "--batch", str(batch))
        assert "from the batch" in out.stdout
        assert x509.load_pem_x509_certificate(root_pem.read_bytes()) == first_root
        # Both keys sign packed attestation with one certificate, which chains to the batch's root.
        x5cs = []
        for key in (sim, other):
            made = Ctap2(key.device()).make_credential(cdh := new_cdh(), RP, user("alice"), ES256)
            verified = PackedAttestation().verify(made.att_stmt, made.auth_data, cdh)
            assert verified.attestation_type == AttestationType.BASIC
            x5cs.append(made.att_stmt["x5c"][0])
        assert x5cs[0] == x5cs[1]
        verify_x509_chain([x5cs[0], first_root.public_bytes(serialization.Encoding.DER)])
        # Each has its own enterprise attestation certificate from the same root.
        enterprise = []
        for key in (sim, other):
            status = json.loads(fidosim(key, "ctl", "--control", key.control_path, "--json", "status").stdout)
            der = status["attestation"]["enterpriseCertificate"]
            enterprise.append(x509.load_der_x509_certificate(base64.urlsafe_b64decode(der + "=" * (-len(der) % 4))))
        assert enterprise[0].serial_number != enterprise[1].serial_number
        assert enterprise[0].subject != enterprise[1].subject
        for certificate in enterprise:
            verify_x509_chain([certificate.public_bytes(serialization.Encoding.DER),
                               first_root.public_bytes(serialization.Encoding.DER)])
    finally:
        other.close()


def test_a_batch_is_one_model(sim, tmp_path, start_sim):
    batch = tmp_path / "batch.json"
    provision(sim, tmp_path, "--batch", str(batch))
    other = start_sim("--profile", "yubikey5")
    try:
        out = fidosim(other, "attestation", "provision", "--control", other.control_path, "--batch", str(batch),
                      "--root-out", str(tmp_path / "r.pem"), check=False)
        assert out.returncode != 0 and "a batch is one model of key" in out.stderr, out.stderr
    finally:
        other.close()
