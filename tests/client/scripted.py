"""A node played by a script: a TCP server on 127.0.0.1 that `Client` connections reach
(the hello handshake left out), for client behaviour a real node cannot be made to show on
demand."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from pubsub.client import connection
from pubsub.kernel.message import Ref
from pubsub.runtime import receiving
from pubsub.runtime.streams import ReceivedMessages

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def scripted_node(handler: Handler, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Ref]:
    """Serve each client connection with `handler` on a free port; yields the node's ref.
    The server is closed on exit."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def connect(addr: str, timeout: float, max_frame: int) -> tuple[ReceivedMessages, asyncio.StreamWriter]:
        writer = await receiving.connect("127.0.0.1", port)
        return ReceivedMessages(writer), writer

    monkeypatch.setattr(connection, "_connect", connect)
    try:
        yield Ref(f"127.0.0.1:{port}")
    finally:
        server.close()
        await server.wait_closed()
