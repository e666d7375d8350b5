"""The outgoing side of the runtime: one `Link` per peer reference (`Links`).

Per peer:

* a bounded queue of encoded frames (the oldest is dropped and counted when it is full);
* one writer task that writes everything queued in one `write` per wake-up (up to
  `WRITE_BATCH_BYTES`), then waits for the socket to drain;
* connects with exponential backoff and jitter; after ``unreachable_after`` consecutive
  failed connects the link reports the peer unreachable once (`Links.on_unreachable`),
  drops its queue (counted) and stays idle until the next frame for that peer;
* one persistent TCP connection per peer pair: of two connections between refs a < b
  both sides keep the one *initiated by a* (then the newer one) and *retire* the other
  without losing frames -- stop writing to it and half-close it (FIN after everything
  already written), keep reading it to the end;
* with TLS (`pubsub.runtime.tls`), the daemon reached must present the certificate of the
  reference dialled (else ``identity_mismatch`` is counted and the connect fails);
* an optional rate limit (`Links.set_rate`): at most R frames per second leave the queue,
  so that congestion can be produced on purpose (the broker's ``link_rate`` admin action,
  paper 002 §9.2); what waits stays in the queue and counts in `queued`;
* counters (`Link.enqueued`, `written`, `dropped`, `enqueued_by_kind`) from which a daemon
  derives what it needs, e.g. the broker's Link Status Table windows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import Counter, deque
from collections.abc import Callable, Iterator
from typing import Any

from pubsub.kernel import wire
from pubsub.kernel.control import Hello
from pubsub.kernel.message import Ref
from pubsub.runtime.connection import Connection, split_ref
from pubsub.runtime.identity import DAEMON_ROLES, Identity
from pubsub.runtime.receiving import connect
from pubsub.runtime.settings import RuntimeSettings
from pubsub.runtime.stats import LogLimiter, Stats
from pubsub.runtime.tls import connect_context, peer_identity

log = logging.getLogger(__name__)

#: Seconds a half-closed (retired) connection waits for the peer's FIN before it is closed.
RETIRE_LINGER = 30.0
#: Bytes written to one connection per writer wake-up at most.
WRITE_BATCH_BYTES = 256 * 1024


class Link:
    """Everything about one peer ref: queued frames, its connections, the writer task."""

    def __init__(self, ref: Ref) -> None:
        self.ref = ref
        self.queue: deque[tuple[str, bytes]] = deque()
        self.conns: list[Connection] = []
        self.wakeup = asyncio.Event()  # frames queued, a connection appeared / vanished, a new rate
        self.conn_added = asyncio.Event()  # ends a reconnect backoff early
        self.task: asyncio.Task[None] | None = None
        self.failures = 0
        #: Frames per second at most (None: as fast as the peer reads).
        self.rate: float | None = None
        self._next_at = 0.0
        #: Frames queued, written to a connection, and dropped (queue full or peer unreachable).
        self.enqueued = 0
        self.written = 0
        self.dropped = 0
        self.enqueued_by_kind: Counter[str] = Counter()

    def open_connections(self) -> int:
        return sum(1 for c in self.conns if not c.closed)


class Links:
    """The per-peer links of one runtime (see the module docstring)."""

    def __init__(
        self,
        me: Ref,
        settings: RuntimeSettings,
        stats: Stats,
        rng: random.Random,
        limiter: LogLimiter,
        *,
        register: Callable[[Connection], None],
        on_unreachable: Callable[[Ref], None],
        spawn: Callable[[Any, str], asyncio.Task[Any]],
    ) -> None:
        self.me = me
        self.settings = settings
        self.stats = stats
        self._rng = rng
        self._limiter = limiter
        self._register = register
        self._on_unreachable = on_unreachable
        self._spawn = spawn
        self._by_ref: dict[Ref, Link] = {}
        self.stopping = False
        #: The context of the connections this side opens (None: plain TCP), `pubsub.runtime.tls`.
        self._ssl = connect_context(settings)

    # --- the mapping -------------------------------------------------------------------------
    def __getitem__(self, ref: Ref) -> Link:
        return self._by_ref[ref]

    def get(self, ref: Ref) -> Link | None:
        return self._by_ref.get(ref)

    def __iter__(self) -> Iterator[Link]:
        return iter(list(self._by_ref.values()))

    def link(self, ref: Ref) -> Link:
        """The link to `ref`, created on first use (`ref` must be a valid reference)."""
        found = self._by_ref.get(ref)
        if found is None:
            found = self._by_ref[ref] = Link(ref)
        return found

    # --- sending -----------------------------------------------------------------------------
    def enqueue(self, link: Link, kind: str, frame: bytes) -> None:
        """Queue one encoded frame (the oldest goes when the queue is full) -- or, when
        nothing waits for the link and its connection takes data, write it at once (one
        task switch less per frame on the hot path)."""
        if not link.queue and link.rate is None and not self.stopping:
            conn = self.active(link)
            if conn is not None and conn.transport.get_write_buffer_size() < WRITE_BATCH_BYTES:
                conn.write(frame)
                link.enqueued += 1
                link.written += 1
                link.enqueued_by_kind[kind] += 1
                self.stats.frames_out[kind] += 1
                self.stats.bytes_out[kind] += len(frame)
                return
        if len(link.queue) >= self.settings.send_queue_bound:
            link.queue.popleft()
            link.dropped += 1
            self.stats.dropped_sends += 1
            self._limiter.log(
                ("queue_full", link.ref),
                logging.WARNING,
                "%s: send queue to %s full, dropping oldest frames",
                self.me,
                link.ref,
            )
        link.queue.append((kind, frame))
        link.enqueued += 1
        link.enqueued_by_kind[kind] += 1
        if link.task is None or link.task.done():
            link.task = self._spawn(self._writer(link), f"writer {link.ref}")
        link.wakeup.set()

    def set_rate(self, ref: Ref, rate: float | None) -> None:
        """Limit the link to `ref` to `rate` frames per second (None lifts the limit)."""
        if rate is not None and not 0 < rate < float("inf"):
            raise ValueError(f"a link rate must be > 0 frames per second, not {rate}")
        link = self.link(ref)
        link.rate = rate
        link.wakeup.set()

    # --- connections -------------------------------------------------------------------------
    def active(self, link: Link) -> Connection | None:
        """The connection frames to the link's peer go out on (None: not connected)."""
        conns = link.conns
        if len(conns) == 1:  # the usual case, on every frame sent
            return conns[0] if conns[0].writable else None
        usable = [c for c in conns if c.writable]
        if not usable:
            return None
        lower = min(self.me, link.ref)
        return max(usable, key=lambda c: (c.initiator == lower, c.seq))

    def adopt(self, link: Link, conn: Connection) -> None:
        """Make `conn` one of the link's connections and retire all but the preferred one."""
        link.conns.append(conn)
        link.failures = 0
        best = self.active(link)
        for other in link.conns:
            if other is not best and other.writable:
                log.debug("%s: retiring %r in favour of %r", self.me, other, best)
                self.stats.connections_retired += 1
                other.close_write()
                asyncio.get_running_loop().call_later(RETIRE_LINGER, other.close)
        link.conn_added.set()
        link.wakeup.set()

    def forget(self, conn: Connection) -> None:
        """`conn` is gone."""
        if conn.peer is None:
            return
        link = self._by_ref.get(conn.peer)
        if link is not None and conn in link.conns:
            link.conns.remove(conn)
            link.wakeup.set()

    # --- shutdown ----------------------------------------------------------------------------
    async def flush(self, timeout: float) -> None:
        """Stop: let the writers empty their queues for at most `timeout` seconds (rate
        limits no longer apply), then count what is left as dropped."""
        self.stopping = True
        writers = [link.task for link in self._by_ref.values() if link.task and not link.task.done()]
        for link in self._by_ref.values():
            link.wakeup.set()
        if writers:
            await asyncio.wait(writers, timeout=timeout)
        for link in self._by_ref.values():
            if link.queue:
                self.stats.dropped_sends += len(link.queue)
                link.dropped += len(link.queue)
                link.queue.clear()

    # --- the writer --------------------------------------------------------------------------
    async def _writer(self, link: Link) -> None:
        stats = self.stats
        while True:
            if not link.queue:
                if self.stopping:
                    return
                link.wakeup.clear()
                await link.wakeup.wait()
                continue
            conn = self.active(link)
            if conn is None:
                await self._connect(link)
                if self.stopping and self.active(link) is None:
                    return  # flush() counts what is left as dropped
                continue
            budget = len(link.queue)
            if link.rate is not None and not self.stopping:
                if not await self._rate_allows(link):
                    continue
                budget = 1
            parts: list[bytes] = []
            size = 0
            while link.queue and budget and size < WRITE_BATCH_BYTES:
                kind, frame = link.queue.popleft()
                parts.append(frame)
                size += len(frame)
                budget -= 1
                stats.frames_out[kind] += 1
                stats.bytes_out[kind] += len(frame)
            link.written += len(parts)
            conn.write(parts[0] if len(parts) == 1 else b"".join(parts))
            try:
                await conn.writer.drain()
            except Exception as exc:  # noqa: BLE001 - any transport failure ends the connection
                log.debug("%s: write to %s failed: %r", self.me, conn.label, exc)
                conn.close()

    async def _rate_allows(self, link: Link) -> bool:
        """Whether the rate limit lets one frame go now; otherwise wait until it may (or
        until something changes) and say no."""
        assert link.rate is not None
        now = asyncio.get_running_loop().time()
        if link._next_at > now:
            link.wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(link.wakeup.wait(), link._next_at - now)
            return False
        link._next_at = max(link._next_at, now) + 1.0 / link.rate
        return True

    async def _connect(self, link: Link) -> None:
        """Connect to link.ref with backoff until a connection exists or the peer is reported."""
        s = self.settings
        while self.active(link) is None:
            host, port = split_ref(link.ref)
            link.conn_added.clear()
            try:
                writer = await asyncio.wait_for(
                    connect(host, port, ssl=self._ssl), s.connect_timeout
                )
                identity = peer_identity(writer) if self._ssl is not None else None
                if self._ssl is not None and not self._is_peer(link, identity, writer):
                    raise ConnectionError(f"{link.ref} presented the certificate of {identity}")
            except (TimeoutError, OSError) as exc:
                link.failures += 1
                self.stats.connect_failures += 1
                log.debug(
                    "%s: connect to %s failed (%d): %r", self.me, link.ref, link.failures, exc
                )
                if self.stopping:
                    return
                if link.failures >= s.unreachable_after:
                    link.failures = 0
                    self._unreachable(link)
                    return
                base = min(
                    s.reconnect_backoff_max, s.reconnect_backoff_min * 2 ** (link.failures - 1)
                )
                delay = base * self._rng.uniform(0.5, 1.0)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(link.conn_added.wait(), delay)
                continue
            conn = Connection(writer, outgoing=True, identity=identity)
            conn.role = "peer"
            conn.peer = link.ref
            conn.initiator = self.me
            conn.write(wire.encode(Hello(ref=self.me, role="peer"), s.max_frame_bytes))
            self.stats.connections_opened += 1
            self._register(conn)
            self.adopt(link, conn)
            log.debug("%s: connected to %s", self.me, link.ref)

    def _is_peer(self, link: Link, identity: Identity | None, writer: asyncio.StreamWriter) -> bool:
        """Whether the daemon reached at link.ref holds the certificate of link.ref; if not,
        the connection is closed and counted (``identity_mismatch``)."""
        if identity is not None and identity.role in DAEMON_ROLES and identity.name == link.ref:
            return True
        self.stats.error("identity_mismatch")
        self._limiter.log(
            ("identity_mismatch", link.ref),
            logging.WARNING,
            "%s: %s presented the certificate of %s; connection refused",
            self.me,
            link.ref,
            identity,
        )
        writer.close()
        return False

    def _unreachable(self, link: Link) -> None:
        dropped = len(link.queue)
        link.queue.clear()
        link.dropped += dropped
        self.stats.dropped_sends += dropped
        self.stats.peers_unreachable += 1
        self._limiter.log(
            ("unreachable", link.ref),
            logging.WARNING,
            "%s: peer %s unreachable after %d connect attempts; dropped %d queued frames",
            self.me,
            link.ref,
            self.settings.unreachable_after,
            dropped,
        )
        self._on_unreachable(link.ref)
