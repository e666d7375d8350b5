"""Opening a client connection to a daemon of a given role, with the handshake bound.

`connect_checked` connects, says Hello, asks for the daemon's status and waits for the
answer at most `pubsub.runtime.client.HANDSHAKE_TIMEOUT` (1 s): a port that accepts and
stays silent, or answers with something that is not pubsub, fails fast (``not_pubsub``),
and a daemon of another kind than `role` fails with one line saying what it is
(``wrong_role``, `pubsub.client.roles`).  The broker mode's client (`broker.client`) opens
its connections this way; the skip ring's `pubsub.client.library._connect` does the same
for nodes.
"""

from __future__ import annotations

import asyncio

from pubsub.client.library import ClientError, _close, _read
from pubsub.client.roles import role_problem
from pubsub.kernel import wire
from pubsub.kernel.control import Hello, Reply, StatusRequest
from pubsub.runtime.client import HANDSHAKE_TIMEOUT, HandshakeTimeout, bounded_reader
from pubsub.runtime.connection import split_ref
from pubsub.runtime.streams import MessageReader
from pubsub.runtime.tls import TlsError, client_context


async def connect_checked(
    addr: str, timeout: float, max_frame: int, role: str
) -> tuple[MessageReader, asyncio.StreamWriter]:
    """An open client connection to the `role` daemon at `addr`; ClientError otherwise
    (``bad_address``, ``connection``, ``not_pubsub``, ``wrong_role``)."""
    try:
        host, port = split_ref(addr)
    except wire.WireError:
        raise ClientError("bad_address", f"bad address {addr!r}: expected HOST:PORT") from None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port, ssl=client_context())
    except TimeoutError:
        raise ClientError("connection", f"cannot reach {addr} within {timeout:g} s") from None
    except ConnectionRefusedError:
        raise ClientError("connection", f"cannot reach {addr}: connection refused") from None
    except TlsError as exc:
        raise ClientError("tls", str(exc)) from None
    except OSError as exc:
        raise ClientError("connection", f"cannot reach {addr}: {exc.strerror or exc}") from None
    messages = bounded_reader(reader, addr, min(timeout, HANDSHAKE_TIMEOUT), max_frame)
    writer.write(wire.encode(Hello(ref=None, role="client")) + wire.encode(StatusRequest()))
    try:
        async with asyncio.timeout(timeout):
            first = await _read(messages)
    except HandshakeTimeout as exc:
        await _close(writer)
        raise ClientError("not_pubsub", str(exc)) from None
    except (TimeoutError, asyncio.IncompleteReadError, wire.WireError, OSError) as exc:
        await _close(writer)
        detail = "no answer" if isinstance(exc, TimeoutError) else str(exc) or "connection closed"
        raise ClientError("not_pubsub", f"{addr} did not answer like a pubsub daemon: {detail}") from None
    if isinstance(first, Reply):
        problem = role_problem(addr, first.body, role)
    else:
        problem = f"{addr} answered a status request with {first.kind!r}: not a pubsub daemon"
    if problem is not None:
        await _close(writer)
        raise ClientError("wrong_role", problem)
    return messages, writer
