"""TLS for the daemons: contexts built from the settings, the peer's identity.

Daemons (`RuntimeSettings.tls_ca` / ``tls_cert`` / ``tls_key``) speak mutual TLS on their
one port: the server side requires a certificate issued by the cluster CA from whoever
connects (daemon or client), the connecting side presents its own and checks the server's
against the same CA.  Names are not checked by `ssl` (``check_hostname`` is off): who the
other side is comes from the certificate's subject (`pubsub.runtime.identity`), and the
runtime compares it with what the connection claims (its Hello, or the reference it
dialled).

Clients (the client library and the ``pubsub`` command) take their certificate from
``PUBSUB_TLS_CA`` / ``PUBSUB_TLS_CERT`` / ``PUBSUB_TLS_KEY`` (`pubsub.runtime.clienttls`,
which also loads the files for both sides); with none set they connect in plain TCP.

`listen_problem` is the safe default: a daemon refuses an address that is not loopback
without TLS unless it was started with ``--insecure``.
"""

from __future__ import annotations

import asyncio
import ssl

from pubsub.runtime.clienttls import TlsError, connecting_context, load_context
from pubsub.runtime.connection import split_ref
from pubsub.runtime.identity import DAEMON_ROLES, Identity, IdentityError
from pubsub.runtime.settings import RuntimeSettings, is_loopback


def server_context(settings: RuntimeSettings) -> ssl.SSLContext | None:
    """The listening side's context (client certificates required), None without TLS."""
    if settings.tls_ca is None or settings.tls_cert is None or settings.tls_key is None:
        return None
    return load_context(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), settings.tls_ca, settings.tls_cert, settings.tls_key)


def connect_context(settings: RuntimeSettings) -> ssl.SSLContext | None:
    """A daemon's context for the connections it opens, None without TLS."""
    if settings.tls_ca is None or settings.tls_cert is None or settings.tls_key is None:
        return None
    return connecting_context(settings.tls_ca, settings.tls_cert, settings.tls_key)


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
