"""Who a TLS peer is: the identity a cluster certificate names, and its check against Hello.

A cluster's certificates are issued by its own CA (`make_ca`, `issue`; ``pubsub certs``).
Each names one identity in its subject:

* ``OU`` (organizational unit): the role -- ``supervisor``, ``node`` or ``broker`` for a
  daemon, ``client`` or ``admin`` for whoever runs the client library or the CLI;
* ``CN`` (common name): for a daemon its reference ``host:port`` (the address it listens on
  and claims in its Hello), for a client or an admin a free name.

Leaf certificates carry Ed25519 keys (the CA keeps an ECDSA P-256 key): TLS 1.3 accepts
them, and a node's TLS key is also the key it signs its publications with
(`pubsub.node.signing`); `fingerprint` names such a key (hex SHA-256 of its 32 raw bytes),
as revocation lists do.

`hello_problem` is the one rule binding a connection to its certificate: a connection that
says ``Hello(ref, role="peer")`` must hold a daemon certificate naming exactly that ref; a
client connection (``Hello(ref=None, role="client")``) may hold any certificate of the
cluster's CA.  Everything here is pure (no sockets), so it is tested directly
(tests/runtime/test_identity.py).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID

from pubsub.kernel import wire

#: Roles of daemons: their certificate's CN is their reference.
DAEMON_ROLES = ("supervisor", "node", "broker")
#: Every role a certificate may name.
ROLES = (*DAEMON_ROLES, "client", "admin")
#: Organization of every subject a cluster CA issues.
ORGANIZATION = "pubsub cluster"
#: Validity of issued certificates and of the CA, days.
VALID_DAYS = 825

#: The keys this module makes: the CA's (ECDSA P-256) and the leaf certificates' (Ed25519).
PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


class IdentityError(ValueError):
    """A certificate or a name that cannot be an identity of the cluster (one line)."""


@dataclass(frozen=True)
class Identity:
    """The role and name (a reference for a daemon) a certificate names."""

    role: str
    name: str

    def __str__(self) -> str:
        return f"{self.role} {self.name}"


def check_name(role: str, name: str) -> str:
    """`name` if it may be the CN of a `role` certificate; IdentityError otherwise."""
    if role not in ROLES:
        raise IdentityError(f"unknown role {role!r} (one of {', '.join(ROLES)})")
    if role in DAEMON_ROLES:
        try:
            wire.validate_ref(name)
        except wire.WireError:
            raise IdentityError(f"a {role} certificate names its reference HOST:PORT, not {name!r}") from None
    elif not name or len(name) > 64 or not name.isprintable():
        raise IdentityError(f"a {role} name is 1-64 printable characters, not {name!r}")
    return name


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


def identity_from_der(der: bytes) -> Identity:
    """The identity of a DER certificate (what ``SSLObject.getpeercert(True)`` returns)."""
    try:
        cert = x509.load_der_x509_certificate(der)
    except ValueError as exc:
        raise IdentityError(f"unreadable certificate: {exc}") from None
    return identity_of(cert)


def hello_problem(identity: Identity | None, role: str, ref: str | None) -> str | None:
    """Why a connection whose certificate names `identity` may not say Hello(`ref`, `role`),
    or None if it may.  `identity` None means a certificate that names no identity."""
    if identity is None:
        return "the certificate names no identity of this cluster"
    if role == "peer":
        if identity.role not in DAEMON_ROLES:
            return f"a {identity.role} certificate ({identity.name}) cannot speak as a peer daemon"
        if ref != identity.name:
            return f"Hello claims {ref!r} but the certificate names {identity}"
    return None


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


# --------------------------------------------------------------------------- issuing
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


# --------------------------------------------------------------------------- files
def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def file_stem(role: str, name: str) -> str:
    """The file name (without .crt / .key) of the certificate of `role` `name`."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return f"{role}-{safe}"


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
