"""The client library: what an application (and the ``pubsub`` command) uses to talk to a node.

Everything is asynchronous (asyncio)::

    async with Client("127.0.0.1:7001") as client:
        await client.join("news")                       # the node subscribes to the topic
        ack = await client.publish("news", b"hello")    # durable at a member when it returns
        async with client.subscribe("news", since=0) as sub:
            async for delivery in sub:                  # pubsub.publications.messages.Delivery
                print(delivery.local_seq, delivery.payload)
                if delivery.local_seq == ack.local_seq:  # a live stream never ends by itself
                    break
        history = await client.history("news")          # what the node holds now

Publishing.  `publish` returns an `Ack` once a member of the topic holds the publication:
the node itself when it is a configured member of the topic, otherwise the member it handed
the publication over to; `Ack.durable` says whether that member's store survives its
process.  Every publication carries a message id (`msg_id`, generated when not given); a
call that gets no answer (a timeout, a lost connection) or an ``unknown`` answer is retried
with the same id, up to `retries` times, and the node answers a repeat as a duplicate
(`Ack.duplicate`) instead of publishing twice.  It raises `PublishError` with a
machine-readable ``code``: ``payload_too_large``, ``no_members`` (nobody subscribes to the
topic), ``handover_failed``, ``store_error`` -- all of which mean nothing was stored -- or
``unknown`` (the retries ran out without an answer: it may or may not be stored; retrying
later with the same id is safe within the node's window).  Many `publish` calls may run
concurrently; they share one connection and are matched to their answers by number.

Subscribing.  `subscribe` (optionally after asking the node to join the topic) opens a
stream: every publication the node holds or will store, each exactly once and in the
node's local order, numbered 1, 2, 3, ... (`Delivery.local_seq`).  By default it starts at
the beginning (the whole history); ``since=N`` resumes after number N (what a client that
reconnects passes: `Subscription.last_seq`), ``new_only=True`` skips the history.  A
number is only meaningful for one incarnation of the node's store: pass the stream's
`Subscription.incarnation` along (``incarnation=``), or its `Subscription.cursor`
("INCARNATION:N") as ``since``, and the node refuses a cursor from another incarnation or
beyond its end (``cursor_incarnation``, ``cursor_beyond_end``) -- or, with
``from_now=True``, starts from its latest number instead.  If the connection breaks,
iteration raises `ConnectionLost`; open a new subscription with ``since=sub.cursor`` to
continue without gaps or repeats.

Transport.  A `Client` reaches its node through a `Connector`: TCP to ``HOST:PORT`` by
default (`TcpConnector`), or, for a node running in the same process, in memory
(`pubsub.client.embedded.EmbeddedNode.client`); everything above holds the same either way.

Other failures raise `ClientError`, whose message is one line for an operator.

Where the parts live: the connection layer (`connect_checked`, `Channel`, `Connector`,
`TcpConnector`, `ClientError`, `ConnectionLost`) in `pubsub.client.connection`, which the
broker mode's client (`broker.client`) shares; `Ack`, `PublishError` and the shared
publishing connection in `pubsub.client.publishing`; `Subscription`, `HistoryPage` and
`parse_cursor` in `pubsub.client.subscription`.  This module holds `Client` and re-exports
those names (`__all__`): ``from pubsub.client.library import Client, PublishError`` is the
import an application writes.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from types import TracebackType
from typing import Any

from pubsub.client.connection import (
    Channel,
    ClientError,
    ConnectionLost,
    Connector,
    TcpConnector,
    connect_checked,
)
from pubsub.client.publishing import Ack, Publisher, PublishError, Unanswered, check_msg_id, check_payload
from pubsub.client.subscription import HistoryPage, Subscription, parse_cursor
from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.message import Message, Ref, Topic
from pubsub.publications.messages import (
    Delivery,
    JoinTopic,
    LeaveTopic,
    MsgId,
    Payload,
    PublishAck,
    PublishFailed,
    PublishRequest,
)

#: Seconds a request (join, status, ...) may take.
DEFAULT_TIMEOUT = 5.0
#: Seconds a publication may take to be acknowledged (a hand-over may need retries).
DEFAULT_PUBLISH_TIMEOUT = 15.0
#: Retries of a publication that got no answer or an ``unknown`` one.
DEFAULT_RETRIES = 3
#: Seconds before the first retry (doubled for each further one).
RETRY_BACKOFF = 0.2
#: Reads a history from 0 makes when retention keeps overtaking it (`Client.history_page`).
HISTORY_ATTEMPTS = 3


def _topic(topic: str) -> Topic:
    try:
        return wire.validate_topic(topic)
    except wire.WireError as exc:
        raise ClientError("bad_topic", exc.detail) from None


class Client:
    """A connection to one node (see the module docstring)."""

    def __init__(
        self,
        node: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        publish_timeout: float = DEFAULT_PUBLISH_TIMEOUT,
        max_frame: int = wire.DEFAULT_MAX_FRAME,
        connector: Connector | None = None,
    ) -> None:
        self.node = Ref(node)
        self.timeout = timeout
        self.publish_timeout = publish_timeout
        self.max_frame = max_frame
        #: How the node is reached: TCP to `node` unless given (`pubsub.client.embedded`).
        self.connector: Connector = connector or TcpConnector(self.node, timeout, max_frame)
        self._publisher: Publisher | None = None
        self._publisher_lock = asyncio.Lock()
        #: Calls inside `_publishing_connection`'s slow path (waiting for the lock or the connection).
        self._waiting_for_publisher = 0
        self._ids = itertools.count(1)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the publishing connection (subscriptions are closed by their owners)."""
        publisher, self._publisher = self._publisher, None
        if publisher is not None:
            await publisher.close()

    # ------------------------------------------------------------------ requests
    async def _request(self, msg: Message) -> dict[str, Any]:
        reply = await self.connector.request(msg)
        if isinstance(reply, ErrorReply):
            raise ClientError(reply.code, f"{self.node} refused the request: {reply.code}: {reply.detail}")
        if not isinstance(reply, Reply):
            raise ClientError("protocol", f"{self.node} answered with an unexpected {reply.kind!r}")
        return reply.body

    async def join(self, topic: str) -> dict[str, Any]:
        """Ask the node to subscribe to `topic` (it joins the topic's skip ring)."""
        return await self._request(JoinTopic(topic=_topic(topic)))

    async def leave(self, topic: str) -> dict[str, Any]:
        """Ask the node to unsubscribe from `topic`."""
        return await self._request(LeaveTopic(topic=_topic(topic)))

    async def status(self) -> dict[str, Any]:
        """The node's status (README: `status --node`)."""
        return await self._request(StatusRequest())

    # ------------------------------------------------------------------ publishing
    async def _publishing_connection(self) -> Publisher:
        """The shared connection, opened if need be.  Calls get it in the order they were
        made (and send at once, in that order): a call that finds it open does not overtake
        earlier calls still waiting while it opened."""
        publisher = self._publisher
        if publisher is not None and publisher.usable and not self._waiting_for_publisher:
            return publisher
        self._waiting_for_publisher += 1
        try:
            async with self._publisher_lock:  # first come, first served
                if self._publisher is None or not self._publisher.usable:
                    if self._publisher is not None:
                        await self._publisher.close()
                        self._publisher = None
                    try:
                        channel = await self.connector.open()
                    except ClientError as exc:
                        raise PublishError(exc.code, str(exc)) from None
                    self._publisher = Publisher(self.node, channel)
                return self._publisher
        finally:
            self._waiting_for_publisher -= 1

    async def publish(
        self, topic: str, payload: bytes | str, *, msg_id: str | None = None, retries: int = DEFAULT_RETRIES
    ) -> Ack:
        """Publish `payload` (str is sent as UTF-8) on `topic` (see the module docstring):
        with `msg_id` (1..64 printable ASCII characters; generated when None), retried with
        that id up to `retries` times while the outcome is unknown."""
        name = _topic(topic)
        data = check_payload(payload)
        ident = uuid.uuid4().hex if msg_id is None else check_msg_id(msg_id)
        attempt = 0
        sent = False  # did any attempt get its request onto the wire?
        while True:
            try:
                return await self._publish_once(name, data, ident)
            except Unanswered as exc:
                sent = True
                last: PublishError = exc
            except PublishError as exc:
                if exc.code not in ("unknown", "connection"):
                    raise
                sent = sent or exc.code == "unknown"
                last = exc
            if attempt >= retries:
                if not sent:
                    raise last  # nothing ever left: certainly not stored
                raise PublishError(
                    "unknown",
                    f"{last.detail} -- after {attempt + 1} attempt(s) with message id {ident}: the "
                    "publication may or may not be stored; publishing again with that id is safe",
                ) from None
            await asyncio.sleep(RETRY_BACKOFF * (2**attempt))
            attempt += 1

    async def _publish_once(self, name: Topic, data: bytes, msg_id: str) -> Ack:
        """One attempt: `Unanswered` when the request was sent and no answer came,
        PublishError "connection" when the node could not be reached (nothing sent)."""
        publisher = await self._publishing_connection()
        request_id = next(self._ids)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        publisher.pending[request_id] = future
        try:
            request = PublishRequest(topic=name, payload=Payload(data), id=request_id, msg_id=MsgId(msg_id))
            publisher.channel.send(request)
            await publisher.drain()
            async with asyncio.timeout(self.publish_timeout):
                answer = await future
        except TimeoutError:
            raise Unanswered(
                "timeout", f"no acknowledgement from {self.node} within {self.publish_timeout:g} s"
            ) from None
        except wire.WireError as exc:
            raise PublishError("payload_too_large", str(exc)) from None
        except (ConnectionError, OSError) as exc:
            raise Unanswered("connection", f"connection to {self.node} lost: {exc}") from None
        finally:
            publisher.pending.pop(request_id, None)
        if isinstance(answer, PublishFailed):
            raise PublishError(answer.code, f"{self.node}: {answer.code}: {answer.detail}")
        assert isinstance(answer, PublishAck)
        return Ack(
            answer.topic, answer.publisher, answer.seq, answer.key, answer.stored_by, answer.local_seq,
            answer.durable, answer.duplicate, msg_id,
        )

    # ------------------------------------------------------------------ reading
    def subscribe(
        self,
        topic: str,
        since: int | str = 0,
        new_only: bool = False,
        *,
        join: bool = True,
        incarnation: str | None = None,
        from_now: bool = False,
        published_from_ms: int = 0,
    ) -> Subscription:
        """A live stream of the topic's publications at this node (see `Subscription`);
        `since` a local number or a cursor "INCARNATION:N".

        With `join` the node is first asked to subscribe to the topic.  `new_only` skips
        the history: what the node holds now, and whatever it fetches later that was
        published before the stream began (a node that is joining the topic catches up on
        its history after the stream starts).  To resume such a stream from its `cursor`
        without that history, give its `published_from_ms` again.
        """
        number, incarnation = parse_cursor(since, incarnation)
        return Subscription(
            self, _topic(topic), number, new_only, join=join, live=True, incarnation=incarnation, from_now=from_now,
            published_from_ms=published_from_ms,
        )

    async def history(self, topic: str, since: int | str = 0, *, incarnation: str | None = None) -> list[Delivery]:
        """Every publication of `topic` the node holds now with local number > `since`."""
        return (await self.history_page(topic, since, incarnation=incarnation)).deliveries

    async def history_page(
        self, topic: str, since: int | str = 0, *, incarnation: str | None = None
    ) -> HistoryPage:
        """`history`, with the store incarnation the local numbers belong to.

        A read from 0 that retention overtakes (the node ends it with ``cursor_expired``:
        it removed publications this read had not reached yet) starts over, at most
        `HISTORY_ATTEMPTS` times in all: what the node holds from 0 is still well defined.
        From a later cursor the error is the caller's to see (what it asked for is gone)."""
        number, incarnation = parse_cursor(since, incarnation)
        attempt = 1
        while True:
            out: list[Delivery] = []
            try:
                async with Subscription(
                    self, _topic(topic), number, False, join=False, live=False, incarnation=incarnation
                ) as sub:
                    async for delivery in sub:
                        out.append(delivery)
            except ClientError as exc:
                if exc.code != "cursor_expired" or number != 0 or attempt >= HISTORY_ATTEMPTS:
                    raise
                attempt += 1
                continue
            return HistoryPage(out, sub.incarnation)


__all__ = [
    "Ack",
    "Channel",
    "Client",
    "ClientError",
    "ConnectionLost",
    "Connector",
    "HistoryPage",
    "PublishError",
    "Subscription",
    "TcpConnector",
    "DEFAULT_PUBLISH_TIMEOUT",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT",
    "HISTORY_ATTEMPTS",
    "connect_checked",
    "parse_cursor",
]
