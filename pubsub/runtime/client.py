"""The client side of the runtime: one control request, one reply (`request`), and the
handshake bound every client connection shares (`read_first`).

A daemon answers a client's request in the event-loop pass that reads it, so a port that
accepts the connection and then stays silent is not a pubsub daemon (or one too stuck to
serve anybody).  The first reply on every client connection is therefore bounded by
`HANDSHAKE_TIMEOUT` (1 s): such a port fails fast with `HandshakeTimeout` instead of
after the request's whole timeout.  A port that answers with something that is not a
frame (an HTTP or SSH server, ...) fails at once with a bad-reply error.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

from pubsub.kernel import wire
from pubsub.kernel.control import Hello
from pubsub.kernel.message import Message
from pubsub.runtime import receiving
from pubsub.runtime.clienttls import TlsError, client_context, closed_hint, handshake_failure
from pubsub.runtime.connection import split_ref
from pubsub.runtime.streams import ReceivedMessages

#: Seconds a daemon may take to send its first reply on a new connection.
HANDSHAKE_TIMEOUT = 1.0


class RequestError(Exception):
    """A control request got no valid reply; the message is one line for the operator."""


class HandshakeTimeout(RequestError):
    """The peer accepted the connection but sent nothing within the handshake bound."""

    def __init__(self, addr: str, bound: float) -> None:
        super().__init__(
            f"{addr} accepted the connection but sent no reply within {bound:g} s: "
            "it does not speak pubsub (wrong port?)"
        )
        self.addr = addr
        self.bound = bound


async def read_first(messages: ReceivedMessages, addr: str, bound: float) -> Message | None:
    """The first message of a new client connection (None if it closed cleanly first);
    `HandshakeTimeout` unless it arrives within `bound` seconds."""
    try:
        async with asyncio.timeout(bound):
            return await messages.read()
    except TimeoutError:
        raise HandshakeTimeout(addr, bound) from None


async def request(
    addr: str,
    msg: Message,
    timeout: float,
    *,
    max_frame: int = wire.DEFAULT_MAX_FRAME,
    handshake: float = HANDSHAKE_TIMEOUT,
    context: ssl.SSLContext | None = None,
) -> Message:
    """Send one control request to the daemon at `addr` and return its reply.

    Connects (with TLS when `context` is given or ``PUBSUB_TLS_*`` set: `client_context`;
    a daemon asking others passes its own, `pubsub.runtime.tls.connect_context`), says
    Hello(role="client"), sends `msg`, waits for one frame, closes.  Raises
    RequestError when the address is malformed, the daemon cannot be reached, does not answer
    within `timeout` seconds, or answers with something that is not a valid frame;
    `HandshakeTimeout` (a RequestError) when the connection is accepted but nothing comes
    back within min(`handshake`, `timeout`) seconds.
    """
    try:
        host, port = split_ref(addr)
    except wire.WireError:
        raise RequestError(f"bad address {addr!r}: expected HOST:PORT") from None
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            context = context or client_context()
            writer = await receiving.connect(host, port, ssl=context)
            messages = ReceivedMessages(writer, max_frame)
            writer.write(wire.encode(Hello(ref=None, role="client")) + wire.encode(msg, max_frame))
            await writer.drain()
            try:
                reply = await read_first(messages, addr, min(handshake, timeout))
            except wire.WireError as exc:
                if exc.code != "truncated_frame":
                    raise
                reply = None
            if reply is None:
                closed = handshake_failure(addr, None, context)
                raise RequestError(closed or f"{addr} closed the connection without a reply{closed_hint(context)}")
            return reply
    except TimeoutError:
        raise RequestError(f"no reply from {addr} within {timeout:g} s") from None
    except ConnectionRefusedError:
        raise RequestError(f"cannot reach {addr}: connection refused") from None
    except TlsError as exc:
        raise RequestError(str(exc)) from None
    except wire.WireError as exc:
        raise RequestError(f"{addr} did not answer like a pubsub daemon: {exc}") from None
    except OSError as exc:
        failure = handshake_failure(addr, exc, context)
        raise RequestError(failure or f"cannot reach {addr}: {exc.strerror or exc}") from None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)
