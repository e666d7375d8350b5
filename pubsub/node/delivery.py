"""Delivery of stored publications to a node's clients: one stream per Follow request.

A client that sends ``Follow(topic, since, new_only, live)`` gets a Reply (``{"ok": true,
"topic", "since", "latest", "live"}``) and then one `Delivery` frame per publication of the
topic with local sequence number > since, in that order, on the same connection.  The
numbers come from the node's store (`pubsub.node.store`), so:

* **exactly once per stream, no gaps**: the stream keeps a cursor (the last number it
  sent) and only moves it forward; local numbers are contiguous, so a client that reads
  numbers 1..N has seen everything the node held up to N;
* **resume**: a client that reconnects with since = the last number it processed gets the
  rest, nothing twice;
* **only what is durable**: the store's latest number moves only after the commit that
  wrote the publication, and streams read nothing beyond it;
* **cursors name the store's incarnation** (`pubsub.node.store`): the reply carries
  ``incarnation``; a client resuming with ``since`` > 0 names it too.  A cursor from
  another incarnation (the node lost or never had a durable store and restarted) is
  refused with ``cursor_incarnation``, and a cursor beyond the node's latest number with
  ``cursor_beyond_end`` -- never silently served from the wrong place.  With ``from_now``
  such a stream starts at the latest number instead (the reply says ``"reset": true``);
* **retention** (`pubsub.node.retention`): a cursor N is refused with ``cursor_expired``
  when retention removed some publication numbered above N -- the client would miss it --
  and a stream ends with that code when retention removes a publication it has not
  delivered yet (one that had gone already when the stream began excepted: since = 0
  means "what the node holds"); numbers stay unique, so the gaps retention leaves are
  the only ones;
* ``new_only`` starts at the latest number at the time of the request (history skipped)
  and skips, for the stream's whole life, publications published more than
  `NEW_ONLY_SKEW_MS` before the request (by `Publication.published_ms`, the first
  node's wall clock; 0, unknown, is delivered): what a node that is just joining the
  topic fetches afterwards is history too.  The reply's ``published_from_ms`` names the
  bound; a client resuming the stream gives it again (``Follow.published_from_ms``), and
  the skipped publications still move the stream's cursor;
* without ``live`` the stream ends after the publications held at the time of the
  request, with a Reply ``{"end": true, "topic", "latest", "delivered"}`` (``pubsub
  history``); with it the stream goes on until the client closes the connection, or until
  the node leaves the topic: it then delivers what it holds and ends with the error
  ``not_member`` (the client resumes from its cursor once the node runs the topic again).
  A live stream of a topic the node does not run (never joined, or leaving) is refused
  with that code at once: nothing would ever arrive on it.  Reading what a node holds of a
  topic it no longer runs (without ``live``) is allowed.

From memory first.  What a commit wrote is handed to `committed` right after the commit
(the node calls it on the event loop) and kept in a bounded per-topic tail (`recent`, the
last `recent_limit` publications); a stream whose cursor lies inside that tail is served
from it without touching SQLite.  Only a stream that is further behind (history, a late
joiner, a slow client) reads the store, on the store's own thread (`pubsub.node.writer`),
so a read never stalls the event loop either.  A live stream whose task waits at the end of
the topic -- a follower that keeps up -- gets a commit's publications written right inside
`committed`, without a task switch per commit (`_deliver_now`).

Backpressure.  A stream never queues more than one batch (at most `batch` publications
and about `batch_bytes` of payload) beyond what the client's socket accepts: after each
batch, written to the socket at once, it waits for the connection to drain (and `committed`
writes to a stream only while its connection is below the high-water mark).  A client that
falls behind is therefore served from the store when it reads again; nothing is dropped,
and a slow client costs the node memory for one batch only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from pubsub.kernel.control import ErrorReply, Reply
from pubsub.kernel.message import Topic
from pubsub.kernel.wire import UNENCODABLE
from pubsub.node.rowcodec import Stored
from pubsub.node.store import PublicationStore, StoreError
from pubsub.node.writer import StoreThread
from pubsub.publications.hotpath import delivery_payload
from pubsub.publications.messages import Delivery, Follow, MsgId
from pubsub.runtime.connection import ClientSession

log = logging.getLogger(__name__)

DEFAULT_BATCH = 128
DEFAULT_BATCH_BYTES = 256 * 1024
#: Publications per topic kept in memory after their commit, for streams at the tail.
DEFAULT_RECENT = 4096
#: How far the nodes' wall clocks may differ, ms: a ``new_only`` stream delivers what was
#: published at most this long before it was asked for (module docstring).
NEW_ONLY_SKEW_MS = 1000
#: How a refused cursor's error names the way to start at the node's end instead, for the
#: command line, the library and the HTTP API alike.
FROM_NOW = "from now (the stream's from-now option: subscribe --from-now, from_now=True, ?from_now=true)"

Spawn = Callable[[Coroutine[Any, Any, None], str], object]


def _not_running(topic: Topic) -> str:
    return (
        f"this node does not run {topic!r} (it never joined it, or is leaving it): a live stream would wait "
        "forever; make it join first (subscribe without --no-join, join=True, ?join=true), or read what it "
        "holds without following (pubsub history)"
    )


def delivery_of(stored: Stored) -> Delivery:
    """The Delivery frame of one stored publication."""
    p = stored.publication
    return Delivery(
        topic=stored.topic,
        local_seq=stored.local_seq,
        publisher=p.publisher,
        seq=p.seq,
        key=p.key,
        payload=p.payload,
        stored_at_ms=stored.stored_at_ms,
        published_ms=p.published_ms,
        msg_id=MsgId(p.msg_id),
    )


def send_deliveries(session: ClientSession, rows: list[Stored]) -> list[int] | None:
    """Write the Deliveries of `rows` to `session` with one write (`ClientSession.send_many`'s
    answer: None if the client is gone, else the indices skipped).  To a socket each is
    packed straight from its row (`delivery_payload`, issue 11); a session that takes
    message objects, or a row with a value the packer refuses (the generic encoder then
    skips and counts just that one), gets `Delivery` messages."""
    if session.encodes:
        try:
            payloads = [delivery_payload(s.topic, s.local_seq, s.publication, s.stored_at_ms) for s in rows]
        except UNENCODABLE:
            pass
        else:
            return session.send_encoded("delivery", payloads)
    return session.send_many([delivery_of(stored) for stored in rows])


@dataclass(eq=False)
class Stream:
    """One client's Follow: where it is, where it ends (None: live), how to wake it."""

    topic: Topic
    cursor: int
    end: int | None
    session: ClientSession
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    delivered: int = 0
    #: Retention's highest removed number when the stream began (those gaps are accepted).
    accepted: int = 0
    #: Whether its task waits at the stream's end for the next commit (see `committed`).
    parked: bool = False
    #: Publications published before this wall-clock ms are skipped (0: none).
    published_from_ms: int = 0
    #: Why a live stream ends at `end` with an error instead of a Reply (the node left the
    #: topic, `Deliveries.left`), else None.
    ended_by: ErrorReply | None = None


class Deliveries:
    """Every open stream of one node, fed from its store."""

    def __init__(
        self,
        store: PublicationStore,
        *,
        reads: StoreThread | None = None,
        batch: int = DEFAULT_BATCH,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        recent_limit: int = DEFAULT_RECENT,
    ) -> None:
        if batch < 1 or batch_bytes < 1 or recent_limit < 1:
            raise ValueError("batch, batch_bytes and recent_limit must be positive")
        self.store = store
        self.reads = reads
        self.batch = batch
        self.batch_bytes = batch_bytes
        self.recent_limit = recent_limit
        #: Per topic, the latest committed publications, contiguous in local number.
        self.recent: dict[Topic, list[Stored]] = {}
        self.streams: dict[Topic, set[Stream]] = {}
        #: Deliveries written to clients since start.
        self.delivered = 0
        #: Streams opened since start, and refused by code (cursor_incarnation, ...).
        self.opened = 0
        self.refused: Counter[str] = Counter()
        #: The highest local number of a topic that retention removed (`pubsub.node.retention`).
        self.removed_through: Callable[[Topic], int] = lambda topic: 0
        #: Whether the node runs a topic now (a member, not leaving); a live stream of
        #: another is refused with ``not_member``.
        self.runs: Callable[[Topic], bool] = lambda topic: True

    def open(self, msg: Follow, session: ClientSession, spawn: Spawn) -> None:
        """Start the stream `msg` asks for on `session` (see the module docstring)."""
        latest = self.store.latest(msg.topic)
        incarnation = self.store.incarnation
        since = latest if msg.new_only else max(0, msg.since)
        published_from_ms = max(0, msg.published_from_ms)
        if msg.new_only and not published_from_ms:
            published_from_ms = int(time.time() * 1000) - NEW_ONLY_SKEW_MS
        reset = False
        if msg.live and not self.runs(msg.topic):
            self.refused["not_member"] += 1
            session.send(ErrorReply(code="not_member", detail=_not_running(msg.topic)))
            return
        problem = self._cursor_problem(msg, since, latest)
        if problem is not None:
            if not msg.from_now:
                self.refused[problem[0]] += 1
                session.send(ErrorReply(code=problem[0], detail=problem[1]))
                return
            since, reset = latest, True
        session.streaming = True
        session.send(
            Reply(
                body={
                    "ok": True,
                    "topic": msg.topic,
                    "since": since,
                    "latest": latest,
                    "live": msg.live,
                    "incarnation": incarnation,
                    "reset": reset,
                    "published_from_ms": published_from_ms,
                }
            )
        )
        stream = Stream(msg.topic, since, None if msg.live else latest, session, published_from_ms=published_from_ms)
        stream.accepted = self.removed_through(msg.topic)
        self.streams.setdefault(msg.topic, set()).add(stream)
        session.on_close(stream.wake.set)
        self.opened += 1
        spawn(self._run(stream), f"follow {msg.topic} {session.address}")

    def _cursor_problem(self, msg: Follow, since: int, latest: int) -> tuple[str, str] | None:
        """Why the stream cannot start at `since` (code, one line), or None."""
        if msg.new_only or since == 0:
            return None
        if msg.incarnation is not None and msg.incarnation != self.store.incarnation:
            return (
                "cursor_incarnation",
                f"cursor {msg.incarnation}:{since} belongs to another incarnation of this node's "
                f"store (now {self.store.incarnation}: it was lost, or the node keeps no store "
                f"and restarted); resume {FROM_NOW} or from 0",
            )
        removed = self.removed_through(msg.topic)
        if removed > since:
            return (
                "cursor_expired",
                f"publications of {msg.topic!r} after cursor {since} were removed by the topic's "
                f"retention or a purge (up to #{removed}); resume from 0 (what the node still holds) or {FROM_NOW}",
            )
        if since > latest:
            return (
                "cursor_beyond_end",
                f"cursor {since} is beyond this node's latest number {latest} for {msg.topic!r} "
                f"(incarnation {self.store.incarnation}); resume {FROM_NOW} or from 0",
            )
        return None

    def committed(self, written: list[Stored]) -> None:
        """A commit wrote these (in local order per topic): keep them as the topics' tails,
        then serve the topics' streams -- a live stream parked at its end gets them written
        on the spot (`_deliver_now`), any other is woken."""
        fresh: dict[Topic, list[Stored]] = {}
        for stored in written:
            tail = self.recent.get(stored.topic)
            if tail is None or (tail and tail[-1].local_seq + 1 != stored.local_seq):
                tail = self.recent[stored.topic] = []  # first, or not contiguous: start over
            tail.append(stored)
            fresh.setdefault(stored.topic, []).append(stored)
        for topic, rows in fresh.items():
            tail = self.recent[topic]
            if len(tail) > 2 * self.recent_limit:
                del tail[: len(tail) - self.recent_limit]
            for stream in self.streams.get(topic, ()):
                try:
                    served = self._deliver_now(stream, rows)
                except Exception:  # noqa: BLE001 - the commit's acknowledgements must still go out
                    log.exception("stream of %s to %s: writing at the commit failed", topic, stream.session.address)
                    served = False
                if not served:
                    stream.wake.set()  # its task takes over, as for any stream not at its end

    def _deliver_now(self, stream: Stream, rows: list[Stored]) -> bool:
        """Write `rows`, what one commit just wrote for the stream's topic, to a stream that
        is right at its end, without waking its task: the common case, a live follower that
        keeps up (issue 11: no per-publication task switch).  The same checks as the task's
        and one batch at most; False, and nothing done, whenever anything else holds -- the
        task then does the work as before."""
        session = stream.session
        if (
            not stream.parked
            or stream.wake.is_set()
            or stream.end is not None
            or stream.cursor + 1 != rows[0].local_seq
            or len(rows) > self.batch
            or not session.takes_more()
            or self.removed_through(stream.topic) > max(stream.cursor, stream.accepted)
            or sum([len(stored.publication.payload) for stored in rows]) > self.batch_bytes
        ):
            return False
        return self._send_batch(stream, rows[-1].local_seq, rows)

    def left(self, topic: Topic) -> None:
        """The node is leaving `topic`: each live stream of it delivers what is durable now
        and then ends with ``not_member`` (module docstring)."""
        latest = self.store.latest(topic)
        for stream in self.streams.get(topic, ()):
            if stream.end is None:
                stream.end = latest
                stream.ended_by = ErrorReply(
                    code="not_member",
                    detail=f"the node left {topic!r} after #{latest}; resume from the stream's cursor once it "
                    "runs the topic again",
                )
                stream.wake.set()

    def pruned(self, topic: Topic) -> None:
        """Retention removed publications of `topic`: its tail in memory may hold them, so it
        is dropped (the next commit starts a new one), and its streams look again."""
        self.recent.pop(topic, None)
        self.notify(topic)

    def notify(self, topic: Topic) -> None:
        """New publications of `topic` are durable: wake its streams."""
        for stream in self.streams.get(topic, ()):
            stream.wake.set()

    def count(self) -> int:
        """Open streams."""
        return sum(len(streams) for streams in self.streams.values())

    def counts(self) -> dict[Topic, int]:
        """Open streams per topic."""
        return {topic: len(streams) for topic, streams in self.streams.items() if streams}

    async def _run(self, stream: Stream) -> None:
        session = stream.session
        try:
            while not session.closed:
                removed = self.removed_through(stream.topic)
                if removed > max(stream.cursor, stream.accepted):
                    self.refused["cursor_expired"] += 1
                    session.send(ErrorReply(
                        code="cursor_expired",
                        detail=f"retention or a purge removed publications of {stream.topic!r} after "
                        f"#{stream.cursor} (up to #{removed}) before this stream delivered them; resume from 0 "
                        f"or {FROM_NOW}",
                    ))
                    return
                limit = self.store.latest(stream.topic) if stream.end is None else stream.end
                if stream.cursor < limit:
                    self._send_batch(stream, limit, await self._rows(stream, limit))
                    await session.drain()
                    continue
                if stream.ended_by is not None:
                    session.send(stream.ended_by)
                    return
                if stream.end is not None:
                    session.send(
                        Reply(
                            body={
                                "end": True,
                                "topic": stream.topic,
                                "latest": stream.end,
                                "delivered": stream.delivered,
                            }
                        )
                    )
                    return
                stream.wake.clear()
                if self.store.latest(stream.topic) > stream.cursor:
                    continue  # something became durable between the look and the clear
                stream.parked = True
                try:
                    await stream.wake.wait()
                finally:
                    stream.parked = False
        except StoreError as exc:
            log.error("stream of %s to %s stopped: %s", stream.topic, session.address, exc)
            session.send(ErrorReply(code="store_error", detail=str(exc)[:400]))
        finally:
            streams = self.streams.get(stream.topic)
            if streams is not None:
                streams.discard(stream)
                if not streams:
                    del self.streams[stream.topic]

    async def _rows(self, stream: Stream, limit: int) -> list[Stored]:
        """The next batch after the stream's cursor: from the topic's tail in memory when
        it covers the cursor, else read from the store on the store's thread."""
        want = min(self.batch, limit - stream.cursor)
        tail = self.recent.get(stream.topic)
        if tail and tail[0].local_seq <= stream.cursor + 1 <= tail[-1].local_seq:
            first = stream.cursor + 1 - tail[0].local_seq
            rows: list[Stored] = []
            size = 0
            for stored in tail[first : first + want]:
                rows.append(stored)
                size += len(stored.publication.payload)
                if size >= self.batch_bytes:
                    break
            return rows
        if self.reads is None:
            return self.store.read(stream.topic, stream.cursor, want, self.batch_bytes)
        read = self.reads.submit(self.store.read, stream.topic, stream.cursor, want, self.batch_bytes)
        return await asyncio.wrap_future(read)

    def _send_batch(self, stream: Stream, limit: int, rows: list[Stored]) -> bool:
        """Write `rows` up to local number `limit` to the stream's client and move its
        cursor; False if the client is gone."""
        if rows and rows[-1].local_seq > limit:
            rows = [stored for stored in rows if stored.local_seq <= limit]
        if not rows:  # only damaged rows in the range (the store logged them): skip them
            stream.cursor = limit
            return True
        through = rows[-1].local_seq
        if stream.published_from_ms:  # a new-only stream: what was published before it is history
            floor = stream.published_from_ms
            rows = [stored for stored in rows if not 0 < stored.publication.published_ms < floor]
            if not rows:
                stream.cursor = through
                return True
        skipped = send_deliveries(stream.session, rows)
        if skipped is None:
            return False  # the client is gone
        for i in skipped:  # cannot be framed (counted by the runtime); never retried forever
            log.error("cannot deliver %s #%d: too large for a frame", rows[i].topic, rows[i].local_seq)
        sent = len(rows) - len(skipped)
        stream.delivered += sent
        self.delivered += sent
        stream.cursor = through
        return True
