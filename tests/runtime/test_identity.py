"""The pure parts of TLS: certificate identities, the Hello check, the skip ring's admission
rules, the listen rule and the settings (`pubsub.runtime.identity`, `pubsub.runtime.tls`,
`pubsub.skipring.admission`)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from pubsub.kernel.message import Ref, Topic
from pubsub.publications.messages import LeaveTopic
from pubsub.runtime.certificates import identity_from_der, identity_of, issue, load_ca, make_ca, write_pair
from pubsub.runtime.clienttls import TlsError, client_context
from pubsub.runtime.identity import Identity, IdentityError, check_name, file_stem, hello_problem
from pubsub.runtime.settings import RuntimeSettings, SettingsError, load
from pubsub.runtime.tls import check_own, connect_context, listen_problem, server_context
from pubsub.skipring.admission import node_admits, supervisor_admits
from pubsub.skipring.messages import Check, Ping, SetData, Subscribe, Unsubscribe

NODE = "127.0.0.1:7001"
OTHER = "127.0.0.1:7002"
SUP = "127.0.0.1:7000"


@pytest.fixture(scope="module")
def ca() -> tuple[x509.Certificate, object]:
    return make_ca()


def test_issued_certificate_names_role_and_reference(ca: tuple) -> None:
    cert, _ = issue(ca[0], ca[1], "node", NODE)
    assert identity_of(cert) == Identity("node", NODE)
    assert cert.issuer == ca[0].subject
    ou = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value
    assert ou == "node"
    from cryptography.hazmat.primitives.serialization import Encoding

    assert identity_from_der(cert.public_bytes(Encoding.DER)) == Identity("node", NODE)


def test_names_are_checked() -> None:
    assert check_name("client", "alice") == "alice"
    with pytest.raises(IdentityError, match="HOST:PORT"):
        check_name("node", "alice")
    with pytest.raises(IdentityError, match="unknown role"):
        check_name("root", "x")
    with pytest.raises(IdentityError):
        check_name("admin", "")


def test_a_certificate_without_an_identity_is_refused(ca: tuple) -> None:
    with pytest.raises(IdentityError, match="unreadable"):
        identity_from_der(b"not a certificate")
    ca_cert = ca[0]  # names no OU
    with pytest.raises(IdentityError, match="names no"):
        identity_of(ca_cert)


@pytest.mark.parametrize(
    ("identity", "role", "ref", "refused"),
    [
        (Identity("node", NODE), "peer", NODE, False),
        (Identity("supervisor", SUP), "peer", SUP, False),
        (Identity("node", NODE), "peer", OTHER, True),  # claims another node's reference
        (Identity("node", NODE), "peer", SUP, True),  # claims the supervisor's
        (Identity("client", "alice"), "peer", NODE, True),  # a client speaking as a daemon
        (Identity("client", "alice"), "client", None, False),
        (Identity("node", NODE), "client", None, False),  # a daemon may be a client
        (None, "client", None, True),
    ],
)
def test_hello_must_match_the_certificate(
    identity: Identity | None, role: str, ref: str | None, refused: bool
) -> None:
    assert (hello_problem(identity, role, ref) is not None) is refused


def test_node_admits_configuration_only_from_its_supervisor() -> None:
    topic = Topic("t")
    set_data = SetData(topic, None, None, None)
    assert node_admits(set_data, "supervisor", SUP, SUP) is None
    assert node_admits(Ping(1), "supervisor", SUP, SUP) is None
    assert node_admits(set_data, "node", OTHER, SUP) is not None
    assert node_admits(set_data, "supervisor", "127.0.0.1:9999", SUP) is not None
    check = Check.__new__(Check)  # a ring message; its fields do not matter here
    assert node_admits(check, "node", OTHER, SUP) is None
    assert node_admits(check, "broker", OTHER, SUP) is not None


def test_supervisor_admits_ring_changes_only_from_the_node_named() -> None:
    topic = Topic("t")
    assert supervisor_admits(Subscribe(topic, Ref(NODE)), "node", NODE) is None
    assert supervisor_admits(Subscribe(topic, Ref(OTHER)), "node", NODE) is not None
    assert supervisor_admits(Unsubscribe(topic, Ref(OTHER)), "node", NODE) is not None
    assert supervisor_admits(Subscribe(topic, Ref(NODE)), "broker", NODE) is not None
    assert supervisor_admits(LeaveTopic(topic), "client", "alice") is not None


def test_listen_rule() -> None:
    plain = RuntimeSettings()
    assert listen_problem("127.0.0.1", plain) is None
    assert listen_problem("localhost", plain) is None
    assert "--insecure" in (listen_problem("0.0.0.0", plain) or "")
    assert listen_problem("0.0.0.0", RuntimeSettings(insecure=True)) is None


def _files(tmp_path: Path, ca: tuple, role: str, name: str) -> tuple[Path, Path, Path]:
    write_pair(tmp_path, "ca", ca[0], ca[1])
    cert, key = issue(ca[0], ca[1], role, name)
    crt, keyfile = write_pair(tmp_path, file_stem(role, name), cert, key)
    return tmp_path / "ca.crt", crt, keyfile


def test_contexts_from_settings(tmp_path: Path, ca: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    ca_file, crt, key = _files(tmp_path, ca, "node", NODE)
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert load_ca(tmp_path)[0] == ca[0]
    settings = RuntimeSettings(tls_ca=ca_file, tls_cert=crt, tls_key=key)
    assert settings.tls
    server = server_context(settings)
    assert server is not None and server.verify_mode == ssl.CERT_REQUIRED
    client = connect_context(settings)
    assert client is not None and client.verify_mode == ssl.CERT_REQUIRED
    assert server_context(RuntimeSettings()) is None
    with pytest.raises(TlsError, match="cannot load"):
        server_context(RuntimeSettings(tls_ca=ca_file, tls_cert=crt, tls_key=ca_file))
    for name in ("PUBSUB_TLS_CA", "PUBSUB_TLS_CERT", "PUBSUB_TLS_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert client_context() is None
    monkeypatch.setenv("PUBSUB_TLS_CA", str(ca_file))
    with pytest.raises(TlsError, match="go together"):
        client_context()
    monkeypatch.setenv("PUBSUB_TLS_CERT", str(crt))
    monkeypatch.setenv("PUBSUB_TLS_KEY", str(key))
    assert client_context() is not None
    for name in ("PUBSUB_TLS_CA", "PUBSUB_TLS_CERT", "PUBSUB_TLS_KEY"):  # empty: not set
        monkeypatch.setenv(name, "")
    assert client_context() is None
    monkeypatch.setenv("PUBSUB_TLS_KEY", str(ca_file / "missing"))
    with pytest.raises(TlsError, match="go together"):
        client_context()


def test_tls_settings_go_together(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="go together"):
        load(RuntimeSettings, {}, tls_ca=tmp_path / "ca.crt")


def test_a_daemon_needs_a_certificate_naming_it(tmp_path: Path, ca: tuple) -> None:
    ca_file, crt, key = _files(tmp_path, ca, "node", NODE)
    check_own(RuntimeSettings(tls_ca=ca_file, tls_cert=crt, tls_key=key), NODE)
    with pytest.raises(TlsError, match="not a daemon at"):
        check_own(RuntimeSettings(tls_ca=ca_file, tls_cert=crt, tls_key=key), OTHER)
    _, client_crt, client_key = _files(tmp_path, ca, "client", "alice")
    with pytest.raises(TlsError, match="names client alice"):
        check_own(RuntimeSettings(tls_ca=ca_file, tls_cert=client_crt, tls_key=client_key), NODE)
