"""`pubsub.runtime.receiving`: a connection's bytes go to callbacks, none lost before `attach`,
the end told once -- over real TCP on 127.0.0.1, on asyncio's loop and on uvloop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from pubsub.runtime.receiving import EARLY_LIMIT, Accept, Receiver, connect, receiver_of, serve
from tests.runtime import test_net
from tests.runtime.test_net import wait_until

run = test_net.run


@contextlib.asynccontextmanager
async def served(accept: Accept) -> AsyncIterator[tuple[asyncio.StreamWriter, asyncio.StreamWriter]]:
    """A listener on a free 127.0.0.1 port and one connection to it: (client side, server side)."""
    accepted: list[asyncio.StreamWriter] = []

    def note(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        accept(reader, writer)

    server = await serve(note, host="127.0.0.1", port=0)
    try:
        client = await connect("127.0.0.1", server.sockets[0].getsockname()[1])
        await wait_until(lambda: len(accepted) == 1, what="the connection accepted")
        try:
            yield client, accepted[0]
        finally:
            client.close()
            accepted[0].close()
    finally:
        server.close()
        await server.wait_closed()


async def loop_passes(count: int = 5) -> None:
    """Let the event loop run `count` passes (what `call_soon` scheduled has run)."""
    for _ in range(count):
        await asyncio.sleep(0)


def test_bytes_before_attach_and_the_end_reach_the_callbacks_in_order(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        async with served(lambda reader, writer: None) as (client, server_side):
            assert isinstance(receiver_of(client), Receiver)
            receiver = receiver_of(server_side)
            client.write(b"one,")
            client.write(b"two,")
            client.write_eof()  # the end, too, before anyone listens
            await wait_until(lambda: receiver._early_bytes == 8 and bool(receiver._ended), what="all of it kept")
            got: list[bytes] = []
            ends: list[BaseException | None] = []
            receiver.attach(got.append, ends.append, lambda: None)
            await wait_until(lambda: ends == [None], what="the end told")
            assert b"".join(got) == b"one,two,"
            await loop_passes()
            assert ends == [None]  # once

    run(scenario)


def test_a_connection_the_other_side_drops_ends_once_after_its_data(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        got: list[bytes] = []
        ends: list[BaseException | None] = []

        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            receiver_of(writer).attach(got.append, ends.append, lambda: None)

        async with served(accept) as (client, _):
            client.write(b"data")
            await wait_until(lambda: got == [b"data"], what="the data")
            client.transport.abort()
            await wait_until(lambda: len(ends) == 1, what="the end")
            assert ends[0] is None or isinstance(ends[0], ConnectionError)
            await loop_passes()
            assert got == [b"data"] and len(ends) == 1

    run(scenario)


def test_more_than_the_early_limit_before_attach_waits_in_the_socket(run: Callable[..., None]) -> None:
    """Before `attach` a Receiver keeps at most about EARLY_LIMIT bytes (reading pauses);
    `attach` hands them over and reading resumes: every byte arrives, in order."""

    async def scenario() -> None:
        async with served(lambda reader, writer: None) as (client, server_side):
            receiver = receiver_of(server_side)
            sent = bytes(i % 251 for i in range(8 * EARLY_LIMIT))
            client.write(sent)  # more than the socket buffers and the limit hold
            await wait_until(lambda: receiver._paused_early, what="reading paused before attach")
            assert receiver._early_bytes <= EARLY_LIMIT + 512 * 1024  # the limit plus one read
            got: list[bytes] = []
            receiver.attach(got.append, lambda exc: None, lambda: None)
            await client.drain()
            await wait_until(lambda: sum(map(len, got)) == len(sent), what="every byte")
            assert b"".join(got) == sent

    run(scenario)
