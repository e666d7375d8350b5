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
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from pubsub.client.roles import role_problem
from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Hello, Reply, StatusRequest
from pubsub.kernel.message import Message, Ref, Topic
from pubsub.publications.fields import validate_msg_id
from pubsub.publications.messages import (
    Delivery,
    Follow,
    JoinTopic,
    LeaveTopic,
    MsgId,
    Payload,
    PublishAck,
    PublishFailed,
    PublishRequest,
)
from pubsub.runtime import receiving
from pubsub.runtime.client import HANDSHAKE_TIMEOUT, HandshakeTimeout, RequestError, read_first, request
from pubsub.runtime.clienttls import TlsError, client_context, closed_hint, handshake_failure
from pubsub.runtime.connection import split_ref
from pubsub.runtime.streams import ReceivedMessages

#: Seconds a request (join, status, ...) may take.
DEFAULT_TIMEOUT = 5.0
#: Seconds a publication may take to be acknowledged (a hand-over may need retries).
DEFAULT_PUBLISH_TIMEOUT = 15.0
#: Bytes a publishing connection may hold unsent before `publish` waits for the node.
DRAIN_ABOVE = 256 * 1024
#: Retries of a publication that got no answer or an ``unknown`` one.
DEFAULT_RETRIES = 3
#: Seconds before the first retry (doubled for each further one).
RETRY_BACKOFF = 0.2
#: Reads a history from 0 makes when retention keeps overtaking it (`Client.history_page`).
HISTORY_ATTEMPTS = 3


class ClientError(Exception):
    """A request failed; `code` is machine-readable, the message one line for an operator."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class PublishError(ClientError):
    """A publication was not acknowledged (see the module docstring for the codes)."""


class _Unanswered(PublishError):
    """An attempt sent its request and got no answer (timeout, lost connection)."""


class ConnectionLost(ClientError):
    """A subscription's connection ended; resume with ``since=last_seq``."""


@dataclass(frozen=True, slots=True)
class Ack:
    """A publication acknowledged as durable at `stored_by`.

    `publisher` and `seq` name it (the node that issued it and its number there), `key`
    is its 16-byte key, `local_seq` its local number at `stored_by` when the node we
    published through stored it itself (None after a hand-over).
    """

    topic: str
    publisher: str
    seq: int
    key: bytes
    stored_by: str
    local_seq: int | None
    durable: bool = True
    duplicate: bool = False
    msg_id: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (`pubsub publish --json`), the key as hex."""
        return {
            "topic": self.topic,
            "publisher": self.publisher,
            "seq": self.seq,
            "key": self.key.hex(),
            "stored_by": self.stored_by,
            "local_seq": self.local_seq,
            "durable": self.durable,
            "duplicate": self.duplicate,
            "msg_id": self.msg_id,
        }


def _payload(payload: bytes | str) -> bytes:
    data = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
    if len(data) > wire.MAX_PAYLOAD_BYTES:
        raise PublishError(
            "payload_too_large",
            f"payload_too_large: payload of {len(data)} bytes exceeds the largest a frame "
            f"carries ({wire.MAX_PAYLOAD_BYTES} bytes)",
        )
    return data


def _msg_id(value: str) -> str:
    try:
        return validate_msg_id(value)
    except wire.WireError as exc:
        raise ClientError("bad_msg_id", exc.detail) from None


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


def _topic(topic: str) -> Topic:
    try:
        return wire.validate_topic(topic)
    except wire.WireError as exc:
        raise ClientError("bad_topic", exc.detail) from None


async def connect_checked(
    addr: str, timeout: float, max_frame: int, role: str
) -> tuple[ReceivedMessages, asyncio.StreamWriter]:
    """An open client connection to the `role` daemon at `addr` (Hello sent, its status
    answered within the handshake bound), its messages cut into frames as they arrive
    (`pubsub.runtime.streams.ReceivedMessages`).

    The status request, answered within `pubsub.runtime.client.HANDSHAKE_TIMEOUT` (1 s) by
    any pubsub daemon, tells a silent or foreign port (``not_pubsub``) and a daemon of
    another kind (``wrong_role``, `pubsub.client.roles`) apart at once; ClientError also for
    ``bad_address``, ``connection`` and ``tls``.  The broker mode's client
    (`broker.client`) opens its connections this way too.
    """
    try:
        host, port = split_ref(addr)
    except wire.WireError:
        raise ClientError("bad_address", f"bad address {addr!r}: expected HOST:PORT") from None
    try:
        async with asyncio.timeout(timeout):
            context = client_context()
            writer = await receiving.connect(host, port, ssl=context)
    except TimeoutError:
        raise ClientError("connection", f"cannot reach {addr} within {timeout:g} s") from None
    except ConnectionRefusedError:
        raise ClientError("connection", f"cannot reach {addr}: connection refused") from None
    except TlsError as exc:
        raise ClientError("tls", str(exc)) from None
    except OSError as exc:
        if (failure := handshake_failure(addr, exc, context)) is not None:
            raise ClientError("tls", failure) from None
        raise ClientError("connection", f"cannot reach {addr}: {exc.strerror or exc}") from None
    messages = ReceivedMessages(writer, max_frame)
    writer.write(wire.encode(Hello(ref=None, role="client")) + wire.encode(StatusRequest()))
    try:
        async with asyncio.timeout(timeout):
            first = await read_first(messages, addr, min(timeout, HANDSHAKE_TIMEOUT))
        if first is None:
            raise asyncio.IncompleteReadError(b"", None)
    except HandshakeTimeout as exc:
        await _close(writer)
        raise ClientError("not_pubsub", str(exc)) from None
    except (TimeoutError, asyncio.IncompleteReadError, wire.WireError, OSError) as exc:
        await _close(writer)
        if (failure := handshake_failure(addr, exc, context)) is not None:
            raise ClientError("tls", failure) from None
        if isinstance(exc, TimeoutError):
            detail = "no answer"
        elif isinstance(exc, asyncio.IncompleteReadError) or (
            isinstance(exc, wire.WireError) and exc.code == "truncated_frame"
        ):
            detail = f"it closed the connection{closed_hint(context)}"
        else:
            detail = str(exc) or "connection closed"
        raise ClientError("not_pubsub", f"{addr} did not answer like a pubsub daemon: {detail}") from None
    problem = role_problem(addr, first.body, role) if isinstance(first, Reply) else (
        f"{addr} answered a status request with {first.kind!r}: not a pubsub daemon"
    )
    if problem is not None:
        await _close(writer)
        raise ClientError("wrong_role", problem)
    return messages, writer


async def _connect(
    addr: str, timeout: float, max_frame: int = wire.DEFAULT_MAX_FRAME
) -> tuple[ReceivedMessages, asyncio.StreamWriter]:
    """`connect_checked` to a node."""
    return await connect_checked(addr, timeout, max_frame, "node")


async def _read(messages: ReceivedMessages) -> Message:
    """The next message; IncompleteReadError at the end of the stream (also inside a
    frame), WireError for garbage."""
    try:
        msg = await messages.read()
    except wire.WireError as exc:
        if exc.code != "truncated_frame":
            raise
        msg = None
    if msg is None:
        raise asyncio.IncompleteReadError(b"", None)
    return msg


async def _close(writer: asyncio.StreamWriter | None) -> None:
    if writer is None:
        return
    writer.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.wait_closed(), 1.0)


class Channel(Protocol):
    """One open connection of a client to its node, carrying messages both ways: a TCP
    connection (`TcpConnector`) or, to a node in the client's own process, a queue
    (`pubsub.client.embedded`)."""

    @property
    def closing(self) -> bool:
        """True once nothing more can be sent."""

    def send(self, msg: Message) -> None:
        """Queue `msg` for the node (WireError when it does not fit in a frame)."""

    def take_message(self) -> Message | None:
        """The next message from the node if one is there; IncompleteReadError once the
        node has ended the connection, WireError for garbage."""

    def on_ready(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` whenever messages are there to take (None: stop)."""

    async def read(self) -> Message:
        """The next message; IncompleteReadError at the end, WireError for garbage."""

    def buffered(self) -> int:
        """Bytes sent and not yet taken by the node's side."""

    async def drain(self) -> None:
        """Wait until the node's side has taken what was sent."""

    async def close(self) -> None:
        """End the connection (the node notices)."""


class Connector(Protocol):
    """How a `Client` reaches its node: channels for publishing and streams, and one-shot
    control requests (ClientError with code ``connection`` when the node cannot be
    reached)."""

    async def open(self) -> Channel: ...

    async def request(self, msg: Message) -> Message: ...


class _TcpChannel:
    """A `Channel` over a TCP connection made by `_connect`; the frames sent in one pass of
    the event loop leave in one write."""

    def __init__(self, messages: ReceivedMessages, writer: asyncio.StreamWriter, max_frame: int) -> None:
        self._messages = messages
        self._writer = writer
        self._max_frame = max_frame
        self._loop = asyncio.get_running_loop()
        self._outgoing: list[bytes] = []

    @property
    def closing(self) -> bool:
        return self._writer.is_closing()

    def send(self, msg: Message) -> None:
        frame = wire.encode(msg, self._max_frame)
        if not self._outgoing:
            self._loop.call_soon(self._flush)
        self._outgoing.append(frame)

    def _flush(self) -> None:
        frames, self._outgoing = self._outgoing, []
        if frames and not self._writer.is_closing():
            self._writer.write(b"".join(frames))

    def take_message(self) -> Message | None:
        return self._messages.take_message()

    def on_ready(self, callback: Callable[[], None] | None) -> None:
        self._messages.on_ready(callback)

    async def read(self) -> Message:
        return await _read(self._messages)

    def buffered(self) -> int:
        return self._writer.transport.get_write_buffer_size()

    async def drain(self) -> None:
        await self._writer.drain()

    async def close(self) -> None:
        await _close(self._writer)


class TcpConnector:
    """A node daemon at ``HOST:PORT`` (with TLS when ``PUBSUB_TLS_*`` is set)."""

    def __init__(self, addr: str, timeout: float, max_frame: int) -> None:
        self.addr = addr
        self.timeout = timeout
        self.max_frame = max_frame

    async def open(self) -> Channel:
        messages, writer = await _connect(self.addr, self.timeout, self.max_frame)
        return _TcpChannel(messages, writer, self.max_frame)

    async def request(self, msg: Message) -> Message:
        try:
            return await request(self.addr, msg, self.timeout, max_frame=self.max_frame)
        except RequestError as exc:
            raise ClientError("connection", str(exc)) from None


class _Publisher:
    """The connection shared by concurrent `publish` calls, answers matched by id.

    Answers are matched in the callback that received them from the connection
    (`Channel.on_ready`): no task wakes up to read them."""

    def __init__(self, addr: str, channel: Channel) -> None:
        self.addr = addr
        self.channel = channel
        self.pending: dict[int, asyncio.Future[Message]] = {}
        self.error: ClientError | None = None
        channel.on_ready(self._answers)
        self._answers()  # what arrived with the handshake

    @property
    def usable(self) -> bool:
        return self.error is None and not self.channel.closing

    async def drain(self) -> None:
        """Wait while the node reads slower than we publish (backpressure)."""
        if self.channel.buffered() > DRAIN_ABOVE:
            await self.channel.drain()

    def _answers(self) -> None:
        """Hand each answer that arrived to the call waiting for it."""
        channel = self.channel
        try:
            while self.error is None and (msg := channel.take_message()) is not None:
                if isinstance(msg, (PublishAck, PublishFailed)):
                    future = self.pending.pop(msg.id, None)
                    if future is not None and not future.done():
                        future.set_result(msg)
                elif isinstance(msg, ErrorReply):
                    # Not tied to one request: the node rejected a frame (should not happen
                    # for frames this library builds).  Fail everything in flight.
                    self._fail(ClientError(msg.code, f"{self.addr} refused a request: {msg.detail}"))
        except asyncio.IncompleteReadError:
            self._fail(_Unanswered("connection", f"{self.addr} closed the connection"))
        except wire.WireError as exc:
            self._fail(_Unanswered("connection", f"bad frame from {self.addr}: {exc}"))
        except (ConnectionError, OSError) as exc:
            self._fail(_Unanswered("connection", f"connection to {self.addr} lost: {exc}"))

    def _fail(self, error: ClientError) -> None:
        if self.error is None:
            self.error = error
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)

    async def close(self) -> None:
        self.channel.on_ready(None)
        self._fail(PublishError("connection", "the client was closed"))
        await self.channel.close()


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
        self._publisher: _Publisher | None = None
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
    async def _publishing_connection(self) -> _Publisher:
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
                    self._publisher = _Publisher(self.node, channel)
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
        data = _payload(payload)
        ident = uuid.uuid4().hex if msg_id is None else _msg_id(msg_id)
        attempt = 0
        sent = False  # did any attempt get its request onto the wire?
        while True:
            try:
                return await self._publish_once(name, data, ident)
            except _Unanswered as exc:
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
        """One attempt: `_Unanswered` when the request was sent and no answer came,
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
            raise _Unanswered(
                "timeout", f"no acknowledgement from {self.node} within {self.publish_timeout:g} s"
            ) from None
        except wire.WireError as exc:
            raise PublishError("payload_too_large", str(exc)) from None
        except (ConnectionError, OSError) as exc:
            raise _Unanswered("connection", f"connection to {self.node} lost: {exc}") from None
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
        client: Client,
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
    "Ack",
    "Client",
    "ClientError",
    "ConnectionLost",
    "PublishError",
    "Subscription",
    "DEFAULT_PUBLISH_TIMEOUT",
    "DEFAULT_TIMEOUT",
]
