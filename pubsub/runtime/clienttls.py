"""TLS as a client sees it: the context from ``PUBSUB_TLS_*``, and what a failure means.

The client library and the ``pubsub`` client commands take their certificate from
``PUBSUB_TLS_CA`` / ``PUBSUB_TLS_CERT`` / ``PUBSUB_TLS_KEY`` (all three, or none for plain
TCP).  This module reads them without the settings machinery the daemons use
(`pubsub.runtime.settings`, pydantic), so that a client command does not pay for importing
it (about 0.45 s of every call); the daemons' side is `pubsub.runtime.tls`.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from functools import lru_cache
from pathlib import Path

from pubsub.runtime.envnames import ENV_PREFIX

#: The client's TLS files, by environment variable (the daemons' flags are --tls-ca ...).
CLIENT_TLS_ENV = tuple(ENV_PREFIX + name for name in ("TLS_CA", "TLS_CERT", "TLS_KEY"))


class TlsError(Exception):
    """TLS cannot be set up as configured (one line for the operator)."""


def load_context(ctx: ssl.SSLContext, ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    """`ctx` with the CA `ca` and the certificate `cert` (key `key`) loaded, peers' certificates
    required; TlsError naming the file that could not be used."""
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


def connecting_context(ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    """The context of a side that connects (a client, or a daemon dialling another)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # the identity is the certificate's subject, checked by the caller
    return load_context(ctx, ca, cert, key)


@lru_cache(maxsize=8)
def _cached_client(ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    return connecting_context(ca, cert, key)


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
    TCP; a variable set to the empty string counts as not set); TlsError when only some are
    given or a file is unusable."""
    ca, cert, key = (os.environ.get(name) or None for name in CLIENT_TLS_ENV)
    if ca is None and cert is None and key is None:
        return None
    if ca is None or cert is None or key is None:
        raise TlsError(f"{', '.join(CLIENT_TLS_ENV[:2])} and {CLIENT_TLS_ENV[2]} go together")
    return _cached_client(Path(ca), Path(cert), Path(key))
