"""TLS for the runtime and the clients: contexts built from the settings, the peer's identity.

Daemons (`RuntimeSettings.tls_ca` / ``tls_cert`` / ``tls_key``) speak mutual TLS on their
one port: the server side requires a certificate issued by the cluster CA from whoever
connects (daemon or client), the connecting side presents its own and checks the server's
against the same CA.  Names are not checked by `ssl` (``check_hostname`` is off): who the
other side is comes from the certificate's subject (`pubsub.runtime.identity`), and the
runtime compares it with what the connection claims (its Hello, or the reference it
dialled).

Clients (the client library and the ``pubsub`` command) take their certificate from
``PUBSUB_TLS_CA`` / ``PUBSUB_TLS_CERT`` / ``PUBSUB_TLS_KEY`` (`ClientTlsSettings`); with
none set they connect in plain TCP, as before.

`listen_problem` is the safe default: a daemon refuses an address that is not loopback
without TLS unless it was started with ``--insecure``.
"""

from __future__ import annotations

import asyncio
import ssl
from functools import lru_cache
from pathlib import Path

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pubsub.runtime.connection import split_ref
from pubsub.runtime.identity import DAEMON_ROLES, Identity, IdentityError
from pubsub.runtime.settings import ENV_PREFIX, RuntimeSettings, is_loopback


class TlsError(Exception):
    """TLS cannot be set up as configured (one line for the operator)."""


class ClientTlsSettings(BaseSettings):
    """A client's certificate, from ``PUBSUB_TLS_CA`` / ``_CERT`` / ``_KEY``."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    tls_ca: Path | None = Field(None, description="the cluster CA certificate (PEM)")
    tls_cert: Path | None = Field(None, description="the client's certificate (PEM)")
    tls_key: Path | None = Field(None, description="the key of tls_cert (PEM)")

    @model_validator(mode="after")
    def _complete(self) -> ClientTlsSettings:
        given = [self.tls_ca is not None, self.tls_cert is not None, self.tls_key is not None]
        if any(given) and not all(given):
            raise ValueError("PUBSUB_TLS_CA, PUBSUB_TLS_CERT and PUBSUB_TLS_KEY go together")
        return self


def _load(ctx: ssl.SSLContext, ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    for what, path in (("CA certificate", ca), ("certificate", cert), ("key", key)):
        try:  # ssl's own error would not say which file it could not open
            path.open("rb").close()
        except OSError as exc:
            raise TlsError(f"cannot read the TLS {what} {path}: {exc.strerror or exc}") from None
    try:
        ctx.load_verify_locations(cafile=str(ca))
    except ssl.SSLError as exc:
        raise TlsError(f"cannot load the TLS CA certificate {ca}: not a PEM certificate ({exc})") from None
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise TlsError(f"the TLS key {key} does not belong to the certificate {cert}") from None
        raise TlsError(
            f"cannot load the TLS certificate {cert} with the key {key}: not a PEM certificate and key ({exc})"
        ) from None
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def server_context(settings: RuntimeSettings) -> ssl.SSLContext | None:
    """The listening side's context (client certificates required), None without TLS."""
    if settings.tls_ca is None or settings.tls_cert is None or settings.tls_key is None:
        return None
    return _load(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), settings.tls_ca, settings.tls_cert, settings.tls_key)


def _client(ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # the identity is the certificate's subject, checked by the caller
    return _load(ctx, ca, cert, key)


def connect_context(settings: RuntimeSettings) -> ssl.SSLContext | None:
    """A daemon's context for the connections it opens, None without TLS."""
    if settings.tls_ca is None or settings.tls_cert is None or settings.tls_key is None:
        return None
    return _client(settings.tls_ca, settings.tls_cert, settings.tls_key)


@lru_cache(maxsize=8)
def _cached_client(ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    return _client(ca, cert, key)


#: Appended to "closed the connection" errors of a client without TLS settings: a TLS
#: daemon closes a plain connection without a word.
PLAIN_HINT = (
    " (if it requires TLS, give a client certificate: PUBSUB_TLS_CA, PUBSUB_TLS_CERT and "
    "PUBSUB_TLS_KEY, `pubsub certs issue DIR client NAME`)"
)


def closed_hint(context: ssl.SSLContext | None) -> str:
    """`PLAIN_HINT` when the connection was plain TCP (`context` None), else nothing."""
    return PLAIN_HINT if context is None else ""


#: What to check when a TLS connection fails in or right after its handshake.
CA_HINT = (
    "check that our certificate (PUBSUB_TLS_CERT) is signed by the cluster's CA and that "
    "PUBSUB_TLS_CA is that CA's certificate (`pubsub certs issue DIR client NAME`, DIR "
    "holding the cluster's CA)"
)


def handshake_failure(addr: str, exc: BaseException | None, context: ssl.SSLContext | None) -> str | None:
    """One line for a TLS connection to `addr` that failed in its handshake or before the
    daemon's first reply (`exc`: what connecting or that first read raised; None: the daemon
    closed the connection without a reply); None for plain TCP (`context` None) or another
    failure.

    A daemon refuses a certificate of another CA in the handshake, and with TLS 1.3, whose
    client side of the handshake ends before the server has checked the client's
    certificate, that refusal reaches the client only as a reset or a close before any
    reply."""
    if context is None:
        return None
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"TLS handshake with {addr} failed: we refused its certificate "
            f"({exc.verify_message}); {CA_HINT}"
        )
    if isinstance(exc, ssl.SSLError):
        reason = (exc.reason or "").lower().replace("_", " ") or str(exc)
        if exc.reason == "WRONG_VERSION_NUMBER":  # the answer was no TLS record at all
            return (
                f"TLS handshake with {addr} failed ({reason}): it does not speak TLS (a daemon "
                "started without --tls-*? then connect without PUBSUB_TLS_*)"
            )
        return f"TLS handshake with {addr} failed ({reason}); {CA_HINT}"
    if exc is None or isinstance(exc, (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError)):
        return (
            f"{addr} closed the connection during or right after the TLS handshake, before any reply: "
            f"it most likely refused our certificate; {CA_HINT}"
        )
    return None


def client_context() -> ssl.SSLContext | None:
    """The context of the client library and the CLI, from ``PUBSUB_TLS_*`` (None: plain
    TCP); TlsError when those are incomplete or unusable."""
    try:
        s = ClientTlsSettings()
    except ValidationError as exc:
        raise TlsError("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None
    if s.tls_ca is None or s.tls_cert is None or s.tls_key is None:
        return None
    return _cached_client(s.tls_ca, s.tls_cert, s.tls_key)


def check_own(settings: RuntimeSettings, ref: str, role: str | None = None) -> None:
    """TlsError unless the daemon certificate of `settings` names `ref` (and `role`, when
    given: a daemon with the certificate of a client, or of another daemon, would be
    refused by every peer)."""
    if settings.tls_cert is None:
        return
    from pubsub.runtime.certificates import identity_from_pem  # with TLS only: loads cryptography

    try:
        identity = identity_from_pem(settings.tls_cert.read_bytes())
    except (OSError, ValueError) as exc:
        raise TlsError(f"cannot use the certificate {settings.tls_cert}: {exc}") from None
    if identity.role not in ((role,) if role else DAEMON_ROLES) or identity.name != ref:
        raise TlsError(
            f"the certificate {settings.tls_cert} names {identity}, not a {role or 'daemon'} at {ref} "
            f"(issue one with: pubsub certs issue DIR {role or 'node'} {ref})"
        )


def check_daemon(settings: RuntimeSettings, ref: str, role: str) -> None:
    """TlsError unless the `role` daemon at `ref` may listen there as `settings` say
    (`listen_problem`), the TLS files of `settings` (if any) load and the certificate names
    it (`check_own`): what a daemon's command, or an application that embeds one, checks
    with its settings, so that it refuses to start before it opens anything."""
    check_listen(settings, ref)
    server_context(settings)
    check_own(settings, ref, role)


def check_listen(settings: RuntimeSettings, ref: str) -> None:
    """TlsError if a daemon may not listen on `ref` as `settings` say (`listen_problem`)."""
    problem = listen_problem(split_ref(ref)[0], settings)
    if problem is not None:
        raise TlsError(f"{ref}: refusing to listen: {problem}")


def peer_identity(writer: asyncio.StreamWriter | asyncio.BaseTransport) -> Identity | None:
    """The identity in the certificate the other side of a TLS connection (a stream's writer
    or a transport) presented; None if it presented none or one that names no identity."""
    sslobj = writer.get_extra_info("ssl_object")
    der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
    if not der:
        return None
    from pubsub.runtime.certificates import identity_from_der  # a TLS connection: cryptography is in use

    try:
        return identity_from_der(der)
    except IdentityError:
        return None


def listen_problem(host: str, settings: RuntimeSettings) -> str | None:
    """Why a daemon may not listen on `host` as configured, or None."""
    if settings.tls or settings.insecure or is_loopback(host):
        return None
    return (
        f"{host} is not a loopback address and TLS is off: anyone who reaches it could forge "
        "protocol messages.  Give --tls-ca/--tls-cert/--tls-key (pubsub certs), or start "
        "with --insecure (PUBSUB_INSECURE=1) to accept that"
    )
