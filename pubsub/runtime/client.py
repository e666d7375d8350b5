"""The client side of the runtime: one control request, one reply (`request`)."""

from __future__ import annotations

import asyncio
import contextlib

from pubsub.kernel import wire
from pubsub.kernel.control import Hello
from pubsub.kernel.message import Message
from pubsub.runtime.connection import split_ref
from pubsub.runtime.streams import MessageReader


class RequestError(Exception):
    """A control request got no valid reply; the message is one line for the operator."""


async def request(
    addr: str, msg: Message, timeout: float, *, max_frame: int = wire.DEFAULT_MAX_FRAME
) -> Message:
    """Send one control request to the daemon at `addr` and return its reply.

    Connects, says Hello(role="client"), sends `msg`, waits for one frame, closes.  Raises
    RequestError when the address is malformed, the daemon cannot be reached, does not answer
    within `timeout` seconds, or answers with something that is not a valid frame.
    """
    try:
        host, port = split_ref(addr)
    except wire.WireError:
        raise RequestError(f"bad address {addr!r}: expected HOST:PORT") from None
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(wire.encode(Hello(ref=None, role="client")) + wire.encode(msg, max_frame))
            await writer.drain()
            try:
                reply = await MessageReader(reader, max_frame).read()
            except wire.WireError as exc:
                if exc.code != "truncated_frame":
                    raise
                reply = None
            if reply is None:
                raise RequestError(f"{addr} closed the connection without a reply")
            return reply
    except TimeoutError:
        raise RequestError(f"no reply from {addr} within {timeout:g} s") from None
    except ConnectionRefusedError:
        raise RequestError(f"cannot reach {addr}: connection refused") from None
    except wire.WireError as exc:
        raise RequestError(f"bad reply from {addr}: {exc}") from None
    except OSError as exc:
        raise RequestError(f"cannot reach {addr}: {exc.strerror or exc}") from None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)
