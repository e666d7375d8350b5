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
* ``new_only`` starts at the latest number at the time of the request (history skipped);
* without ``live`` the stream ends after the publications held at the time of the
  request, with a Reply ``{"end": true, "topic", "latest", "delivered"}`` (``pubsub
  history``); with it the stream goes on until the client closes the connection.

Backpressure.  A stream never queues more than one batch (at most `batch` publications
and about `batch_bytes` of payload) beyond what the client's socket accepts: after each
batch it waits for the connection to drain.  A client that falls behind is therefore
served from the store when it reads again; nothing is dropped, and a slow client costs the
node memory for one batch only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from pubsub.kernel.control import ErrorReply, Reply
from pubsub.kernel.message import Topic
from pubsub.skipring.messages import Delivery, Follow
from pubsub.runtime.connection import ClientSession
from pubsub.node.store import PublicationStore, Stored, StoreError

log = logging.getLogger(__name__)

DEFAULT_BATCH = 128
DEFAULT_BATCH_BYTES = 256 * 1024

Spawn = Callable[[Coroutine[Any, Any, None], str], object]


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
    )


@dataclass(eq=False)
class Stream:
    """One client's Follow: where it is, where it ends (None: live), how to wake it."""

    topic: Topic
    cursor: int
    end: int | None
    session: ClientSession
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    delivered: int = 0


class Deliveries:
    """Every open stream of one node, fed from its store."""

    def __init__(
        self,
        store: PublicationStore,
        *,
        batch: int = DEFAULT_BATCH,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> None:
        if batch < 1 or batch_bytes < 1:
            raise ValueError("batch and batch_bytes must be positive")
        self.store = store
        self.batch = batch
        self.batch_bytes = batch_bytes
        self.streams: dict[Topic, set[Stream]] = {}
        #: Deliveries written to clients since start.
        self.delivered = 0
        #: Streams opened since start.
        self.opened = 0

    def open(self, msg: Follow, session: ClientSession, spawn: Spawn) -> None:
        """Start the stream `msg` asks for on `session` (see the module docstring)."""
        latest = self.store.latest(msg.topic)
        since = latest if msg.new_only else max(0, msg.since)
        session.streaming = True
        session.send(
            Reply(
                body={
                    "ok": True,
                    "topic": msg.topic,
                    "since": since,
                    "latest": latest,
                    "live": msg.live,
                }
            )
        )
        stream = Stream(msg.topic, since, None if msg.live else latest, session)
        self.streams.setdefault(msg.topic, set()).add(stream)
        session.on_close(stream.wake.set)
        self.opened += 1
        spawn(self._run(stream), f"follow {msg.topic} {session.address}")

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
                limit = self.store.latest(stream.topic) if stream.end is None else stream.end
                if stream.cursor < limit:
                    self._send_batch(stream, limit)
                    await session.drain()
                    continue
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
                await stream.wake.wait()
        except StoreError as exc:
            log.error("stream of %s to %s stopped: %s", stream.topic, session.address, exc)
            session.send(ErrorReply(code="store_error", detail=str(exc)[:400]))
        finally:
            streams = self.streams.get(stream.topic)
            if streams is not None:
                streams.discard(stream)
                if not streams:
                    del self.streams[stream.topic]

    def _send_batch(self, stream: Stream, limit: int) -> None:
        rows = self.store.read(
            stream.topic,
            stream.cursor,
            limit=min(self.batch, limit - stream.cursor),
            max_bytes=self.batch_bytes,
        )
        if not rows:  # only damaged rows in the range (the store logged them): skip them
            stream.cursor = limit
            return
        for stored in rows:
            if stored.local_seq > limit:
                break
            if stream.session.send(delivery_of(stored)):
                stream.delivered += 1
                self.delivered += 1
            elif stream.session.closed:
                return
            else:  # cannot be framed (counted by the runtime); never retried forever
                log.error("cannot deliver %s #%d: too large for a frame", stored.topic, stored.local_seq)
            stream.cursor = stored.local_seq
