"""The runtime's admission gate: what a connection, and each message on it, must pass before
the application sees it (`pubsub.runtime.net.Runtime`).

* **Connection caps** (`pubsub.runtime.limits`): at most ``caps.total`` accepted
  connections in all and ``caps.per_source`` per source address (`ConnectionCounts`).  A
  connection over a cap is refused at once (`admit`): counted in ``Stats.refused``, one
  ErrorReply ``too_many``, closed, no reader.
* **TLS identity** (`pubsub.runtime.tls`, `pubsub.runtime.identity`): the identity the
  certificate of an accepted connection names (`identity`); a Hello whose claim the
  certificate does not back (`hello_refusal`: ``identity_mismatch``), and a peer message the
  application's optional ``admits(msg, identity)`` objects to (`sender_refusal`:
  ``forbidden_sender``).
* **Permissions** (`pubsub.runtime.permissions`, with TLS): a client request the
  application's optional ``refuses(msg, identity, authority)`` refuses is answered with
  that refusal and counted as ``permission_denied`` (`permitted`).
* **Publish quotas** (`PublishQuotas`): a publication request over its client's quota is
  answered with the application's ``over_quota`` reply (`over_quota`).

`hello_refusal` and `sender_refusal` return the problem, or None: the connection's input
(`pubsub.runtime.inbound`) counts it and answers with ErrorReply as it does for any bad
input.  `admit`, `permitted` and `over_quota` answer themselves.  Everything here runs
once per connection or once per message that reaches it; the per-frame path of a peer
without TLS does not enter it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Hello
from pubsub.kernel.message import Message, Ref
from pubsub.runtime.application import Application
from pubsub.runtime.connection import Connection
from pubsub.runtime.identity import Identity, hello_problem
from pubsub.runtime.limits import (
    TOO_MANY,
    ConnectionCounts,
    PublishQuotas,
    connection_caps,
    source_of,
)
from pubsub.runtime.permissions import DENIED, Authority
from pubsub.runtime.settings import RuntimeSettings
from pubsub.runtime.stats import LogLimiter, Stats
from pubsub.runtime.tls import peer_identity


class Admission:
    """The admission gate of one runtime (see the module docstring).  `tls`: whether the
    runtime listens with TLS (identities, permissions and ``admits`` only then)."""

    def __init__(
        self,
        app: Application,
        ref: Ref,
        settings: RuntimeSettings,
        stats: Stats,
        limiter: LogLimiter,
        *,
        tls: bool,
    ) -> None:
        self._app = app
        self._ref = ref
        self._settings = settings
        self._stats = stats
        self._limiter = limiter
        self.tls = tls
        #: Resource limits (`pubsub.runtime.limits`).
        self.caps = connection_caps(settings)
        self.counts = ConnectionCounts(self.caps)
        self.quotas = PublishQuotas(settings, settings.max_frame_bytes)
        #: What clients may ask for, with TLS (`pubsub.runtime.permissions`); None without.
        self.authority = Authority(settings.permissions) if tls else None

    # --- connections -------------------------------------------------------------------------
    def identity(self, writer: asyncio.StreamWriter) -> Identity | None:
        """Who the certificate of an accepted connection names (None without TLS)."""
        return peer_identity(writer) if self.tls else None

    def admit(self, conn: Connection) -> bool:
        """Count an accepted connection under its source address; False (and `conn`
        refused, `_refuse`) if that would exceed a cap."""
        source = source_of(conn.address)
        refused = self.counts.admit(source)
        if refused is not None:
            self._refuse(conn, refused)
            return False
        conn.counted_as = source
        return True

    def release(self, conn: Connection) -> None:
        """`conn` is gone: it no longer counts against the caps."""
        if conn.counted_as is not None:
            self.counts.release(conn.counted_as)
            conn.counted_as = None

    def _refuse(self, conn: Connection, reason: str) -> None:
        """Close a connection over a cap at once: counted, one ErrorReply, no reader."""
        self._stats.refused[reason] += 1
        self._limiter.log(
            ("refused", conn.source, reason), logging.WARNING,
            "%s: refused a connection from %s: over the %s cap (%d in all, %d per source)",
            self._ref, conn.address, reason, self.caps.total, self.caps.per_source,
        )
        detail = f"over the {reason} connection cap of {self._ref}"
        conn.write(wire.encode(ErrorReply(code=TOO_MANY, detail=detail)))
        conn.close()

    # --- messages ----------------------------------------------------------------------------
    def hello_refusal(self, conn: Connection, msg: Hello) -> str | None:
        """With TLS, why the certificate of `conn` does not back the claim of its Hello
        (`pubsub.runtime.identity.hello_problem`), or None."""
        return hello_problem(conn.identity, msg.role, msg.ref) if self.tls else None

    def sender_refusal(self, conn: Connection, msg: Message) -> str | None:
        """Why the application does not accept `msg` from the identity of `conn` (its
        optional ``admits(msg, identity)``), or None.  Asked with TLS only."""
        admits = getattr(self._app, "admits", None)
        if admits is None or conn.identity is None:
            return None
        problem: str | None = admits(msg, conn.identity)
        return problem

    def permitted(self, conn: Connection, msg: Message) -> bool:
        """Whether the client at `conn` may make request `msg`: the application's optional
        ``refuses(msg, identity, authority)`` returns the refusal to send, or None
        (`pubsub.runtime.permissions`); refusals are counted as ``permission_denied``."""
        refuses = getattr(self._app, "refuses", None)
        if refuses is None or self.authority is None:
            return True
        refusal = refuses(msg, conn.identity, self.authority)
        if refusal is None:
            return True
        self._stats.error(DENIED)
        self._limiter.log(
            (DENIED, conn.label), logging.WARNING, "%s: refused %s from %s: %s", self._ref, msg.kind,
            conn.identity, getattr(refusal, "detail", ""),
        )
        frame = wire.encode(refusal, self._settings.max_frame_bytes)
        if conn.write(frame):
            self._stats.frames_out[refusal.kind] += 1
            self._stats.bytes_out[refusal.kind] += len(frame)
        return False

    def over_quota(self, conn: Connection, msg: Message) -> bool:
        """Whether publication request `msg` exceeds its client's quota (`PublishQuotas`);
        if so it is counted and answered with the application's ``over_quota(msg, code,
        detail)`` reply (an ErrorReply without one).  The application's optional
        ``publication_size(msg)`` says which requests are publications (None: not one)."""
        size_of = getattr(self._app, "publication_size", None)
        size = None if size_of is None else size_of(msg)
        if size is None:
            return False
        client = conn.identity.name if conn.identity is not None else source_of(conn.address)
        verdict = self.quotas.check(client, size, time.monotonic())
        if verdict is None:
            return False
        code, detail = verdict
        self._stats.quota[code] += 1
        self._limiter.log(
            ("quota", client, code), logging.INFO, "%s: refused a publication of %s: %s: %s",
            self._ref, client, code, detail,
        )
        answer = getattr(self._app, "over_quota", None)
        reply = answer(msg, code, detail) if answer is not None else ErrorReply(code=code, detail=detail)
        frame = wire.encode(reply, self._settings.max_frame_bytes)
        if conn.write(frame):
            self._stats.frames_out[reply.kind] += 1
            self._stats.bytes_out[reply.kind] += len(frame)
        return True
