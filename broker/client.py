"""The client library of the SCOT broker mode (asyncio): advertise, publish, subscribe, status.

One `BrokerClient` is one connection to one broker (the client's host broker)::

    async with BrokerClient("127.0.0.1:7101", client_id="pub1") as client:
        await client.advertise('symbol = "IBM" and price > 0')      # id "a-<hash of the filter>"
        await client.publish({"symbol": "IBM", "price": 101.5})    # or 'symbol="IBM",price=101.5'
    async with BrokerClient("127.0.0.1:7105") as client:
        async with await client.subscribe('symbol = "IBM" and price > 100') as sub:
            async for d in sub:                                    # broker.cores.messages.Deliver
                print(d.publisher, d.pid, d.attrs)

Ownership (`broker.sessions`): advertisements are filed under the client id and outlive the
connection (withdraw them with `unadvertise`); a publication is routed only if it conforms to
one of its client id's advertisements at this broker.  Subscriptions belong to the connection:
closing the client (or a `Subscription`) unsubscribes them.  An advertisement needs one
round trip to the host region before the broker knows which other clusters want its
publications (the CIV bits of §8), and a subscription must reach its cluster: publish after
both have settled (the tests poll `status`).

Every request gets exactly one answer, in order; `publish` returns once the host broker
accepted (routed) the publication -- there is no end-to-end acknowledgement in the paper's
model.  Failures raise `pubsub.client.connection.ClientError` (``code``, one-line message): the
broker's refusals as `BrokerRefused` (``not_advertised``, ``duplicate_id``, ``unknown_id``,
``bad_publication``, ``bad_client``, ``bad_id``), ``bad_filter`` / ``bad_attrs`` for text that
does not parse, ``timeout``, ``connection``; a broken connection ends every subscription
with `pubsub.client.connection.ConnectionLost`.

The connection itself is the skip ring client's (`pubsub.client.connection`): opened with
`connect_checked` (role ``broker``: Hello, and the status answer checked within the handshake
bound), read with `read_message`, closed with `close_writer`.  What is the broker's own is
above it: answers matched by order, and deliveries queued per subscription.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections import deque
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any

import xxhash

from broker.cores.language.filters import Filter
from broker.cores.language.text import attrs_from_json, parse_attrs, parse_filter
from broker.cores.language.values import FilterError, Value
from broker.cores.messages import (
    Attrs,
    ClientAdvertise,
    ClientPublish,
    ClientRefused,
    ClientSessionRequest,
    ClientSubscribe,
    ClientUnadvertise,
    ClientUnsubscribe,
    Deliver,
    DeliveryGap,
)
from pubsub.client.connection import ClientError, ConnectionLost, close_writer, connect_checked, read_message
from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.message import Message
from pubsub.runtime.streams import ReceivedMessages

#: Seconds a request may take.
DEFAULT_TIMEOUT = 5.0
#: Deliveries a subscription buffers before the connection stops being read (backpressure).
SUBSCRIPTION_BUFFER = 10_000


class BrokerRefused(ClientError):
    """The broker refused an operation (`code` from its `ClientRefused`)."""


def to_filter(value: Filter | str) -> Filter:
    """A `Filter`, parsing text (``symbol = "IBM" and price > 100``); ClientError if bad."""
    if isinstance(value, Filter):
        return value
    try:
        return parse_filter(value)
    except FilterError as exc:
        raise ClientError("bad_filter", f"bad filter {value[:80]!r}: {exc}") from None


def to_attrs(value: Mapping[str, Value] | str) -> dict[str, Value]:
    """A publication's attributes from a map, ``name=value,...`` text or a JSON object."""
    try:
        if isinstance(value, str):
            text = value.strip()
            return attrs_from_json(text) if text.startswith("{") else parse_attrs(text)
        from broker.cores.language.values import validate_publication

        return validate_publication(value)
    except FilterError as exc:
        raise ClientError("bad_attrs", f"bad publication {str(value)[:80]!r}: {exc}") from None


def advertisement_id(adv: Filter) -> str:
    """The default id of an advertisement: ``a-`` and a hash of its canonical text, so that
    `pubsub unadvertise --filter` finds what `pubsub advertise --filter` filed."""
    return "a-" + xxhash.xxh3_64_hexdigest(adv.to_text().encode("utf-8"))


class Subscription:
    """One subscription on a `BrokerClient`'s connection: an async iterator of `Deliver`."""

    def __init__(self, client: BrokerClient, sub_id: str, sub: Filter) -> None:
        self.client = client
        self.id = sub_id
        self.filter = sub
        #: The broker's answer: ``{"ok", "op", "id", "uid", "broker"}``.
        self.reply: dict[str, Any] = {}
        #: The gap notices of a session (`DeliveryGap`) that iterating over deliveries passed.
        self.gaps: list[DeliveryGap] = []
        self._queue: asyncio.Queue[Deliver | DeliveryGap | ClientError] = asyncio.Queue(SUBSCRIPTION_BUFFER)
        self._ended = False

    async def close(self) -> None:
        """Unsubscribe (if the connection still works) and end the iteration."""
        if self._ended:
            return
        self._ended = True
        self.client._subs.pop(self.id, None)
        if self.client.usable:
            with contextlib.suppress(ClientError):
                await self.client.unsubscribe(self.id)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __aiter__(self) -> AsyncIterator[Deliver]:
        return self

    async def __anext__(self) -> Deliver:
        while True:
            item = await self.next_event()
            if isinstance(item, Deliver):
                return item
            self.gaps.append(item)

    def notice(self, gap: DeliveryGap) -> None:
        """Put a gap notice into this subscription's stream (a client that re-subscribed
        after its session was lost, `broker.resilient`)."""
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(gap)

    async def next_event(self) -> Deliver | DeliveryGap:
        """The next delivery or, in a session, gap notice (`broker.durable`)."""
        if self._ended and self._queue.empty():
            raise StopAsyncIteration
        item = await self._queue.get()
        if isinstance(item, ClientError):
            self._ended = True
            raise item
        return item

    async def get(self, timeout: float) -> Deliver:
        """The next delivery within `timeout` seconds (TimeoutError otherwise)."""
        async with asyncio.timeout(timeout):
            return await self.__anext__()


class BrokerClient:
    """A connection to one broker (see the module docstring)."""

    def __init__(
        self,
        broker: str,
        *,
        client_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_frame: int = wire.DEFAULT_MAX_FRAME,
    ) -> None:
        self.broker = broker
        self.client_id = client_id or f"c-{secrets.token_hex(4)}"
        self.timeout = timeout
        self.max_frame = max_frame
        self._reader: ReceivedMessages | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: deque[asyncio.Future[Message]] = deque()
        self._subs: dict[str, Subscription] = {}
        self._error: ClientError | None = None
        self._sub_ids = itertools.count(1)
        self._pid_prefix = secrets.token_hex(4)
        self._pids = itertools.count(1)
        #: In a session: the number of the last delivery received (`open_session`).
        self.last_seq = 0

    # --- connection -----------------------------------------------------------------------------
    async def connect(self) -> BrokerClient:
        """Open the connection (ClientError ``connection`` when the broker is unreachable)."""
        if self._writer is None:
            reader, writer = await connect_checked(self.broker, self.timeout, self.max_frame, "broker")
            self._reader, self._writer = reader, writer
            self._task = asyncio.get_running_loop().create_task(self._read_loop(reader))
        return self

    @property
    def usable(self) -> bool:
        return self._error is None and self._writer is not None and not self._writer.is_closing()

    async def close(self) -> None:
        """Close the connection (the broker ends its subscriptions)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._fail(ConnectionLost("connection", "the client was closed"))
        writer, self._writer = self._writer, None
        await close_writer(writer)

    async def __aenter__(self) -> BrokerClient:
        return await self.connect()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _read_loop(self, reader: ReceivedMessages) -> None:
        try:
            while True:
                msg = await read_message(reader)
                if isinstance(msg, (Deliver, DeliveryGap)):
                    if isinstance(msg, Deliver):
                        self.last_seq = max(self.last_seq, msg.seq)
                    for sub_id in msg.sub_ids:
                        sub = self._subs.get(sub_id)
                        if sub is not None and not sub._ended:
                            await sub._queue.put(msg)
                elif isinstance(msg, (Reply, ClientRefused, ErrorReply)):
                    if not self._pending:
                        detail = getattr(msg, "detail", "")
                        self._fail(ClientError("protocol", f"{self.broker} sent an unexpected {msg.kind}: {detail}"))
                        return
                    future = self._pending.popleft()
                    if not future.done():
                        future.set_result(msg)
                else:
                    self._fail(ClientError("protocol", f"{self.broker} sent an unexpected {msg.kind!r}"))
                    return
        except asyncio.IncompleteReadError:
            self._fail(ConnectionLost("connection", f"{self.broker} closed the connection"))
        except wire.WireError as exc:
            self._fail(ConnectionLost("connection", f"bad frame from {self.broker}: {exc}"))
        except (ConnectionError, OSError) as exc:
            self._fail(ConnectionLost("connection", f"connection to {self.broker} lost: {exc}"))

    def _fail(self, error: ClientError) -> None:
        if self._error is None:
            self._error = error
        pending, self._pending = self._pending, deque()
        for future in pending:
            if not future.done():
                future.set_exception(error)
        for sub in list(self._subs.values()):
            with contextlib.suppress(asyncio.QueueFull):
                sub._queue.put_nowait(error)
        self._subs.clear()

    async def _request(self, msg: Message, what: str) -> dict[str, Any]:
        await self.connect()
        if self._error is not None:
            raise ClientError(self._error.code, str(self._error))
        try:
            frame = wire.encode(msg, self.max_frame)
        except wire.WireError as exc:
            raise ClientError(exc.code, f"cannot send {what}: {exc.detail}") from None
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending.append(future)
        assert self._writer is not None
        self._writer.write(frame)
        try:
            await self._writer.drain()
            async with asyncio.timeout(self.timeout):
                reply = await future
        except TimeoutError:
            # Answers are matched by order: after a lost one the connection is unusable.
            self._fail(ClientError("timeout", f"no answer from {self.broker} to {what} within {self.timeout:g} s"))
            raise ClientError("timeout", f"no answer from {self.broker} to {what} within {self.timeout:g} s") from None
        except (ConnectionError, OSError) as exc:
            self._fail(ConnectionLost("connection", f"connection to {self.broker} lost: {exc}"))
            raise ClientError("connection", f"connection to {self.broker} lost: {exc}") from None
        if isinstance(reply, ClientRefused):
            raise BrokerRefused(reply.code, f"{self.broker} refused {what}: {reply.code}: {reply.detail}")
        if isinstance(reply, ErrorReply):
            raise ClientError(reply.code, f"{self.broker} refused {what}: {reply.code}: {reply.detail}")
        assert isinstance(reply, Reply)
        return reply.body

    # --- operations -----------------------------------------------------------------------------
    async def advertise(self, adv: Filter | str, adv_id: str | None = None) -> dict[str, Any]:
        """Advertise `adv` under this client id (default id: `advertisement_id`)."""
        flt = to_filter(adv)
        ident = advertisement_id(flt) if adv_id is None else adv_id
        return await self._request(ClientAdvertise(self.client_id, ident, flt), f"advertisement {ident}")

    async def unadvertise(self, adv: Filter | str | None = None, *, adv_id: str | None = None) -> dict[str, Any]:
        """Withdraw an advertisement of this client id, named by id or by its filter."""
        if adv_id is None:
            if adv is None:
                raise ClientError("bad_request", "unadvertise needs the advertisement's id or filter")
            adv_id = advertisement_id(to_filter(adv))
        return await self._request(ClientUnadvertise(self.client_id, adv_id), f"unadvertise {adv_id}")

    async def publish(self, attrs: Mapping[str, Value] | str, pid: str | None = None) -> str:
        """Publish; returns the publication id once the host broker routed it."""
        clean = to_attrs(attrs)
        ident = f"{self.client_id}/{self._pid_prefix}-{next(self._pids)}" if pid is None else pid
        body = await self._request(ClientPublish(self.client_id, ident, Attrs(clean)), f"publication {ident}")
        return str(body.get("pid", ident))

    async def subscribe(self, sub: Filter | str, sub_id: str | None = None) -> Subscription:
        """Subscribe on this connection; the `Subscription` yields the matching deliveries."""
        flt = to_filter(sub)
        ident = f"s{next(self._sub_ids)}" if sub_id is None else sub_id
        subscription = Subscription(self, ident, flt)
        self._subs[ident] = subscription  # before the request: a delivery may follow the reply at once
        try:
            subscription.reply = await self._request(
                ClientSubscribe(self.client_id, ident, flt), f"subscription {ident}"
            )
        except BaseException:
            self._subs.pop(ident, None)
            raise
        return subscription

    async def open_session(self, token: str = "", after: int = 0) -> dict[str, Any]:
        """Open a session on this connection (token "") or resume session `token` after
        delivery number `after`; the answer says whether it was resumed (``resumed``; then
        ``subscriptions`` names the session's) and carries the token.  Open it before
        subscribing (`broker.durable`); to resume, `adopt` the session's subscriptions first,
        since what the broker hands over follows its answer at once."""
        body = await self._request(ClientSessionRequest(self.client_id, token, after), "session")
        self.last_seq = after if body.get("resumed") else 0
        return body

    def adopt(self, sub: Filter | str, sub_id: str) -> Subscription:
        """A `Subscription` for a resumed session's subscription `sub_id` (no request: the
        broker has it already)."""
        subscription = Subscription(self, sub_id, to_filter(sub))
        subscription.reply = {"ok": True, "op": "subscribe", "id": sub_id, "resumed": True}
        self._subs[sub_id] = subscription
        return subscription

    async def unsubscribe(self, sub_id: str) -> dict[str, Any]:
        """End a subscription of this connection."""
        self._subs.pop(sub_id, None)
        return await self._request(ClientUnsubscribe(self.client_id, sub_id), f"unsubscribe {sub_id}")

    async def status(self) -> dict[str, Any]:
        """The broker's status (README: SCOT broker mode)."""
        return await self._request(StatusRequest(), "status")


__all__ = [
    "BrokerClient",
    "BrokerRefused",
    "Subscription",
    "advertisement_id",
    "to_attrs",
    "to_filter",
]
