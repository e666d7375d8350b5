"""Cluster certificates (X.509, `cryptography`): issuing them (`make_ca`, `issue`;
``pubsub certs``), writing and loading them, and reading the identity one names
(`pubsub.runtime.identity` holds the identities themselves and the rule binding them to a
Hello, and imports no cryptography: a daemon without TLS never loads it).

Leaf certificates carry Ed25519 keys (the CA keeps an ECDSA P-256 key): TLS 1.3 accepts
them, and a node's TLS key is also the key it signs its publications with
(`pubsub.node.signing`); `fingerprint` names such a key (hex SHA-256 of its 32 raw bytes),
as revocation lists do.  Tested with the identities (tests/runtime/test_identity.py).
"""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID

from pubsub.runtime.identity import DAEMON_ROLES, Identity, IdentityError, check_name

#: Organization of every subject a cluster CA issues.
ORGANIZATION = "pubsub cluster"
#: Validity of issued certificates and of the CA, days.
VALID_DAYS = 825

#: The keys this module makes: the CA's (ECDSA P-256) and the leaf certificates' (Ed25519).
PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


def subject(role: str, name: str) -> x509.Name:
    """The subject of the certificate of `role` `name`."""
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role),
            x509.NameAttribute(NameOID.COMMON_NAME, check_name(role, name)),
        ]
    )


def identity_of(cert: x509.Certificate) -> Identity:
    """The identity `cert` names; IdentityError if its subject names none."""
    def one(oid: x509.ObjectIdentifier) -> str:
        attrs = cert.subject.get_attributes_for_oid(oid)
        if len(attrs) != 1 or not isinstance(attrs[0].value, str):
            raise IdentityError(f"certificate subject {cert.subject.rfc4514_string()!r} names no {oid._name}")
        return attrs[0].value

    role, name = one(NameOID.ORGANIZATIONAL_UNIT_NAME), one(NameOID.COMMON_NAME)
    return Identity(role, check_name(role, name))


def identity_from_pem(pem: bytes) -> Identity:
    """The identity of a PEM certificate (a daemon's own, read from its file); ValueError
    (IdentityError among them) when it is not one."""
    return identity_of(x509.load_pem_x509_certificate(pem))


def identity_from_der(der: bytes) -> Identity:
    """The identity of a DER certificate (what ``SSLObject.getpeercert(True)`` returns)."""
    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError as exc:
        raise IdentityError(f"unreadable certificate: {exc}") from None
    return identity_of(cert)


def fingerprint(key: x509.Certificate | ed25519.Ed25519PublicKey) -> str:
    """The fingerprint of an Ed25519 public key (or a certificate's): hex SHA-256 of its 32
    raw bytes.  IdentityError for another kind of key."""
    public = key.public_key() if isinstance(key, x509.Certificate) else key
    if not isinstance(public, ed25519.Ed25519PublicKey):
        raise IdentityError(
            f"the certificate's key is {type(public).__name__}, not Ed25519 (reissue it: pubsub certs issue --force)"
        )
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    digest = hashes.Hash(hashes.SHA256())
    digest.update(raw)
    return digest.finalize().hex()


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _validity() -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC)
    return now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALID_DAYS)


def make_ca(name: str = "pubsub cluster CA") -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A new cluster CA: a self-signed certificate and its key."""
    key = _key()
    name_ = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, name),
        ]
    )
    start, end = _validity()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name_)
        .issuer_name(name_)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue(
    ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, role: str, name: str
) -> tuple[x509.Certificate, ed25519.Ed25519PrivateKey]:
    """A certificate for `role` `name` signed by the CA, usable by both ends of a connection
    (daemons accept and connect), and its new Ed25519 key."""
    key = ed25519.Ed25519PrivateKey.generate()
    start, end = _validity()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject(role, name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if role in DAEMON_ROLES:
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(name)]), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _san(ref: str) -> x509.GeneralName:
    import ipaddress

    host = ref.rpartition(":")[0]
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def write_pair(directory: Path, stem: str, cert: x509.Certificate, key: PrivateKey) -> tuple[Path, Path]:
    """Write ``stem.crt`` and ``stem.key`` (mode 0600) into `directory`; their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    crt, keyfile = directory / f"{stem}.crt", directory / f"{stem}.key"
    crt.write_bytes(cert_pem(cert))
    keyfile.touch(mode=0o600)
    keyfile.chmod(0o600)
    keyfile.write_bytes(key_pem(key))
    return crt, keyfile


def load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """The CA ``ca.crt`` / ``ca.key`` in `directory`; IdentityError if missing or not one."""
    try:
        cert = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
        key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
    except (OSError, ValueError) as exc:
        raise IdentityError(f"no usable CA in {directory} (ca.crt, ca.key): {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise IdentityError(f"{directory / 'ca.key'} is not an EC key made by pubsub certs")
    return cert, key
