"""Makes fidosim's shared batch attestation (firmware-spec/security.md, "Attestation"): a root CA and one leaf that
every fidosim key uses unless it is given its own batch. Run once; its output is the body of
Sources/CTAPCore/Credentials/SharedBatchAttestation.swift (the hex of the root and leaf certificates and of the leaf's
raw P-256 private key). The root's private key is not kept: nothing else can ever be issued under this root.

    python3 tools/attestation/make_shared_batch.py
"""

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

NOT_BEFORE = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
NOT_AFTER = datetime.datetime(2099, 12, 31, 23, 59, 59, tzinfo=datetime.timezone.utc)


def name(common_name: str) -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fidosim"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Authenticator Attestation"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


root_key = ec.generate_private_key(ec.SECP256R1())
root_name = name("fidosim shared attestation root")
root = (x509.CertificateBuilder()
        .subject_name(root_name).issuer_name(root_name)
        .public_key(root_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOT_BEFORE).not_valid_after(NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(root_key.public_key()), critical=False)
        .sign(root_key, hashes.SHA256()))

leaf_key = ec.generate_private_key(ec.SECP256R1())
leaf = (x509.CertificateBuilder()
        .subject_name(name("fidosim shared batch attestation")).issuer_name(root_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOT_BEFORE).not_valid_after(NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(root_key.public_key()), critical=False)
        .sign(root_key, hashes.SHA256()))

raw = leaf_key.private_numbers().private_value.to_bytes(32, "big")
print("root:", root.public_bytes(serialization.Encoding.DER).hex())
print("leaf:", leaf.public_bytes(serialization.Encoding.DER).hex())
print("key:", raw.hex())
