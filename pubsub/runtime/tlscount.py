"""Counting failed TLS handshakes on a daemon's port.

asyncio (and uvloop) complete the server side of a TLS handshake before the runtime sees
the connection, and a handshake that fails never reaches it: the event loop closes the
socket and at most logs in debug mode.  The one place every handshake passes through is
the `ssl.SSLObject` the loop makes with ``SSLContext.wrap_bio``; `count_handshakes` sets
the context's ``sslobject_class`` to a subclass that counts, by reason, each handshake
that raised (and each that never finished: a peer that went silent or away before the end,
counted when the object is dropped).

Reasons (the ``reason`` label of pubsub_tls_handshake_failures, a fixed set): ``certificate``
(no certificate, one of another CA, expired, rejected by the other side), ``protocol`` (not
TLS at all, such as plain pubsub frames or HTTP, or a version or cipher the two cannot
agree on), ``closed`` (the peer closed the connection inside the handshake), ``incomplete``
(the handshake never finished: a timeout) and ``other``.
"""

from __future__ import annotations

import ssl
from collections import Counter
from typing import Any, ClassVar

REASONS = ("certificate", "protocol", "closed", "incomplete", "other")

_PROTOCOL_MARKS = ("WRONG_VERSION", "HTTP", "UNSUPPORTED_PROTOCOL", "RECORD_LAYER", "PACKET_LENGTH",
                   "UNEXPECTED_MESSAGE", "NO_SHARED_CIPHER", "VERSION_TOO_LOW", "NO_PROTOCOLS",
                   "UNKNOWN_PROTOCOL", "DECRYPTION_FAILED", "BAD_RECORD")


def reason_of(exc: BaseException) -> str:
    """The REASONS entry a handshake exception stands for."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "certificate"
    if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionError)):
        return "closed"
    text = f"{getattr(exc, 'reason', '') or ''} {exc}".upper()
    if "CERTIFICATE" in text or "UNKNOWN_CA" in text:
        return "certificate"
    if any(mark in text for mark in _PROTOCOL_MARKS):
        return "protocol"
    if "EOF" in text:
        return "closed"
    return "other"


class _CountingObject(ssl.SSLObject):
    """An SSLObject that tells `failures` how its handshake went (subclassed per counter)."""

    failures: ClassVar[Counter[str]]

    _outcome: str | None = None  # "done", or the REASONS entry it failed with

    def do_handshake(self) -> None:
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except (ssl.SSLError, OSError) as exc:
            if self._outcome is None:
                self._outcome = reason_of(exc)
                self.failures[self._outcome] += 1
            raise
        self._outcome = "done"

    def __del__(self) -> None:
        if self._outcome is not None:
            return
        try:
            server = self.server_side
        except AttributeError:  # never fully made
            return
        if server:
            self._outcome = "incomplete"
            self.failures["incomplete"] += 1


def count_handshakes(context: ssl.SSLContext, failures: Counter[str]) -> None:
    """Make every server-side handshake of `context` count its failures in `failures`."""
    cls: Any = type("CountingSSLObject", (_CountingObject,), {"failures": failures})
    context.sslobject_class = cls
