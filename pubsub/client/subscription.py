"""Reading a node's publications: `Subscription`, one Follow stream (live, or a history
read to its end), `HistoryPage`, and `parse_cursor` for the resume points streams take.
`pubsub.client.library.Client.subscribe` and `Client.history_page` open them; the
library's docstring describes numbering, cursors and resuming.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from pubsub.client.connection import Channel, ClientError, ConnectionLost, Connector
from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Reply
from pubsub.kernel.message import Message, Ref, Topic
from pubsub.publications.messages import Delivery, Follow


def parse_cursor(since: int | str, incarnation: str | None = None) -> tuple[int, str | None]:
    """(number, incarnation) of a resume point: a local number, or a cursor
    "INCARNATION:N" as `Subscription.cursor` gives it; ClientError for anything else."""
    if isinstance(since, int) and not isinstance(since, bool):
        if since < 0:
            raise ClientError("bad_since", f"since must not be negative, got {since}")
        return since, incarnation
    text = str(since)
    found, sep, number = text.rpartition(":")
    if not number.isdigit() or (sep and found and not all(c in "0123456789abcdef" for c in found)):
        raise ClientError("bad_since", f"{text!r} is not a local number or a cursor INCARNATION:N")
    return int(number), (found or incarnation) if sep else incarnation


class SubscriptionClient(Protocol):
    """What a `Subscription` needs of the client it belongs to (`pubsub.client.library.Client`)."""

    node: Ref
    timeout: float
    connector: Connector

    async def join(self, topic: str) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """What `Client.history_page` read: the deliveries and the node store's incarnation
    (a delivery's cursor is "INCARNATION:LOCAL_SEQ")."""

    deliveries: list[Delivery]
    incarnation: str | None


class Subscription:
    """One Follow stream: an async iterator of `Delivery` (or, with a callback and no task
    switch per delivery, `consume`), and an async context manager.

    `last_seq` is the local number of the last delivery handed out (or `since`); `latest`
    is what the node held when the stream began; `incarnation` the node store's incarnation
    (from the node's reply), and `cursor` the two together, "INCARNATION:N", to resume from.
    """

    def __init__(
        self,
        client: SubscriptionClient,
        topic: Topic,
        since: int,
        new_only: bool,
        *,
        join: bool,
        live: bool,
        incarnation: str | None = None,
        from_now: bool = False,
        published_from_ms: int = 0,
    ) -> None:
        if since < 0:
            raise ClientError("bad_since", f"since must not be negative, got {since}")
        self.incarnation = incarnation
        self.from_now = from_now
        self.reset = False
        self.client = client
        self.topic = topic
        self.since = since
        self.new_only = new_only
        self.join = join
        self.live = live
        self.last_seq = since
        self.latest: int | None = None
        #: Publications published before this wall-clock ms are skipped (0: none): what a
        #: `new_only` stream's node chose (`Follow.published_from_ms`); give it again to
        #: `Client.subscribe` when resuming such a stream from its cursor.
        self.published_from_ms = published_from_ms
        self._channel: Channel | None = None
        self._started = False
        self._ended = False

    async def open(self) -> Subscription:
        """Join (if asked), connect and start the stream; idempotent."""
        if self._started:
            return self
        client = self.client
        if self.join:
            await client.join(self.topic)
        channel = self._channel = await client.connector.open()
        try:
            channel.send(Follow(
                self.topic, self.since, self.new_only, self.live, self.incarnation, self.from_now,
                self.published_from_ms,
            ))
            async with asyncio.timeout(client.timeout):
                first = await channel.read()
        except TimeoutError:
            await self.close()
            raise ClientError("timeout", f"{client.node} did not start the stream") from None
        except (asyncio.IncompleteReadError, ConnectionError, OSError, wire.WireError) as exc:
            await self.close()
            raise ClientError("connection", f"{client.node}: stream failed to start: {exc}") from None
        if isinstance(first, ErrorReply):
            await self.close()
            raise ClientError(first.code, f"{client.node} refused the stream ({first.code}): {first.detail}")
        if not isinstance(first, Reply):
            await self.close()
            raise ClientError("protocol", f"{client.node} started the stream with {first.kind!r}")
        self.since = int(first.body.get("since", self.since))
        self.last_seq = self.since
        self.latest = int(first.body.get("latest", 0))
        self.incarnation = first.body.get("incarnation") or self.incarnation
        self.reset = bool(first.body.get("reset", False))
        self.published_from_ms = int(first.body.get("published_from_ms", self.published_from_ms))
        self._started = True
        return self

    @property
    def cursor(self) -> str:
        """Where this stream is: "INCARNATION:N" (N = `last_seq`), to resume from."""
        return f"{self.incarnation or ''}:{self.last_seq}"

    async def close(self) -> None:
        """End the stream (the node notices and stops)."""
        channel, self._channel = self._channel, None
        self._ended = True
        if channel is not None:
            await channel.close()

    async def __aenter__(self) -> Subscription:
        return await self.open()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self

    async def __anext__(self) -> Delivery:
        if not self._started and not self._ended:
            await self.open()
        if self._ended or self._channel is None:
            raise StopAsyncIteration
        try:
            msg = await self._channel.read()
        except (asyncio.IncompleteReadError, ConnectionError, OSError, wire.WireError) as exc:
            raise self._lost(exc) from None
        return self._delivered(msg)

    async def consume(self, on_delivery: Callable[[Delivery], object]) -> None:
        """Call `on_delivery(delivery)` for each delivery, in order, until the stream ends:
        what ``async for delivery in sub`` does, without a task switch per delivery.

        Deliveries are handed over from the callback that received them from the
        connection, so `on_delivery` must not block (it may start tasks); the stream reads
        no further while it runs.  Returns when the node ends the stream (as iteration
        stops); raises what iteration would raise (`ConnectionLost`, `ClientError`), and
        whatever `on_delivery` raises, after which the stream stays open and can be read on
        (`last_seq` counts the delivery it was given).
        """
        if not self._started and not self._ended:
            await self.open()
        channel = self._channel
        if self._ended or channel is None:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def hand_over() -> None:
            try:
                while not done.done():
                    try:
                        msg = channel.take_message()
                    except (asyncio.IncompleteReadError, ConnectionError, OSError, wire.WireError) as exc:
                        raise self._lost(exc) from None
                    if msg is None:
                        return
                    on_delivery(self._delivered(msg))
            except StopAsyncIteration:
                done.set_result(None)
            except Exception as exc:  # noqa: BLE001 - handed to the caller of consume
                done.set_exception(exc)

        channel.on_ready(hand_over)
        try:
            hand_over()  # what arrived before
            await done
        finally:
            channel.on_ready(None)

    def _lost(self, exc: BaseException) -> ConnectionLost:
        """The stream broke (`exc` from reading it): it is over."""
        self._ended = True
        node = self.client.node
        if isinstance(exc, asyncio.IncompleteReadError):  # also a stream cut inside a frame
            return ConnectionLost("connection", f"{node} closed the stream after local #{self.last_seq}")
        return ConnectionLost("connection", f"stream from {node} broke after local #{self.last_seq}: {exc}")

    def _delivered(self, msg: Message) -> Delivery:
        """The delivery `msg` is; StopAsyncIteration at the node's end of the stream,
        ClientError for an error or anything else (the stream is then over)."""
        if isinstance(msg, Delivery):
            self.last_seq = msg.local_seq
            return msg
        self._ended = True
        node = self.client.node
        if isinstance(msg, Reply) and msg.body.get("end"):
            raise StopAsyncIteration
        if isinstance(msg, ErrorReply):
            raise ClientError(msg.code, f"{node} ended the stream: {msg.code}: {msg.detail}")
        raise ClientError("protocol", f"{node} sent an unexpected {msg.kind!r} on the stream")


__all__ = [
    "HistoryPage",
    "Subscription",
    "SubscriptionClient",
    "parse_cursor",
]
