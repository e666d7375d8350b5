"""The connection layer of the client libraries: reaching a daemon, and the channels a
`pubsub.client.library.Client` talks to its node through.

`connect_checked` opens a client connection to a daemon of a given role (Hello sent, its
status answered within the handshake bound) and `read_message` / `close_writer` read and
end it; the SCOT broker mode's client (`broker.client`) connects, reads and closes with
these too.  A `Client` reaches its node through a `Connector`: TCP by default
(`TcpConnector`, whose `Channel` is a TCP connection), or in memory for a node in the same
process (`pubsub.client.embedded`).  `ClientError` is what every client call raises, and
`ConnectionLost` what ends a subscription whose connection broke.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol

from pubsub.client.roles import role_problem
from pubsub.kernel import wire
from pubsub.kernel.control import Hello, Reply, StatusRequest
from pubsub.kernel.message import Message
from pubsub.runtime import receiving
from pubsub.runtime.client import HANDSHAKE_TIMEOUT, HandshakeTimeout, RequestError, read_first, request
from pubsub.runtime.clienttls import TlsError, client_context, closed_hint, handshake_failure
from pubsub.runtime.connection import split_ref
from pubsub.runtime.streams import ReceivedMessages


class ClientError(Exception):
    """A request failed; `code` is machine-readable, the message one line for an operator."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class ConnectionLost(ClientError):
    """A subscription's connection ended; resume with ``since=last_seq``."""


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
        await close_writer(writer)
        raise ClientError("not_pubsub", str(exc)) from None
    except (TimeoutError, asyncio.IncompleteReadError, wire.WireError, OSError) as exc:
        await close_writer(writer)
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
        await close_writer(writer)
        raise ClientError("wrong_role", problem)
    return messages, writer


async def _connect(
    addr: str, timeout: float, max_frame: int = wire.DEFAULT_MAX_FRAME
) -> tuple[ReceivedMessages, asyncio.StreamWriter]:
    """`connect_checked` to a node."""
    return await connect_checked(addr, timeout, max_frame, "node")


async def read_message(messages: ReceivedMessages) -> Message:
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


async def close_writer(writer: asyncio.StreamWriter | None) -> None:
    """Close `writer` (None: nothing to close), waiting at most 1 s for it; errors are ignored."""
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
        return await read_message(self._messages)

    def buffered(self) -> int:
        return self._writer.transport.get_write_buffer_size()

    async def drain(self) -> None:
        await self._writer.drain()

    async def close(self) -> None:
        await close_writer(self._writer)


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


__all__ = [
    "Channel",
    "ClientError",
    "ConnectionLost",
    "Connector",
    "TcpConnector",
    "close_writer",
    "connect_checked",
    "read_message",
]
