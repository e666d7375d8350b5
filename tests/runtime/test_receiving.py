"""`pubsub.runtime.receiving`: a connection's bytes go to callbacks, none lost before `attach`,
the end told once -- over real TCP on 127.0.0.1, on asyncio's loop and on uvloop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pubsub.runtime.receiving import EARLY_LIMIT, Receiver, connect, receiver_of, serve
from tests.runtime import test_net
from tests.runtime.test_net import wait_until

run = test_net.run


def test_bytes_before_attach_and_the_end_reach_the_callbacks_in_order(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        accepted: list[asyncio.StreamWriter] = []
        server = await serve(lambda reader, writer: accepted.append(writer), host="127.0.0.1", port=0)
        port = server.sockets[0].getsockname()[1]
        try:
            _, client = await connect("127.0.0.1", port)
            assert isinstance(receiver_of(client), Receiver)
            await wait_until(lambda: len(accepted) == 1, what="the connection accepted")
            client.write(b"one,")
            client.write(b"two,")
            await client.drain()
            client.write_eof()  # the end, too, before anyone listens
            receiver = receiver_of(accepted[0])
            await asyncio.sleep(0.05)  # let it all arrive before the callbacks exist
            got: list[bytes] = []
            ends: list[BaseException | None] = []
            receiver.attach(got.append, ends.append, lambda: None)
            await wait_until(lambda: ends == [None], what="the end told once")
            assert b"".join(got) == b"one,two,"
            await asyncio.sleep(0.05)
            assert ends == [None]  # once
            accepted[0].close()
            client.close()
        finally:
            server.close()
            await server.wait_closed()

    run(scenario)


def test_a_connection_the_other_side_drops_ends_once_after_its_data(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        accepted: list[asyncio.StreamWriter] = []
        got: list[bytes] = []
        ends: list[BaseException | None] = []

        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)
            receiver_of(writer).attach(got.append, ends.append, lambda: None)

        server = await serve(accept, host="127.0.0.1", port=0)
        port = server.sockets[0].getsockname()[1]
        try:
            _, client = await connect("127.0.0.1", port)
            client.write(b"data")
            await wait_until(lambda: got == [b"data"], what="the data")
            client.transport.abort()
            await wait_until(lambda: len(ends) == 1, what="the end")
            assert ends[0] is None or isinstance(ends[0], ConnectionError)
            await asyncio.sleep(0.05)
            assert got == [b"data"] and len(ends) == 1
        finally:
            server.close()
            await server.wait_closed()

    run(scenario)


def test_more_than_the_early_limit_before_attach_waits_in_the_socket(run: Callable[..., None]) -> None:
    """Before `attach` a Receiver keeps at most about EARLY_LIMIT bytes (reading pauses);
    `attach` hands them over and reading resumes: every byte arrives, in order."""

    async def scenario() -> None:
        accepted: list[asyncio.StreamWriter] = []
        server = await serve(lambda reader, writer: accepted.append(writer), host="127.0.0.1", port=0)
        port = server.sockets[0].getsockname()[1]
        try:
            _, client = await connect("127.0.0.1", port)
            await wait_until(lambda: len(accepted) == 1, what="the connection accepted")
            receiver = receiver_of(accepted[0])
            sent = bytes(i % 251 for i in range(8 * EARLY_LIMIT))
            client.write(sent)  # more than the socket buffers and the limit hold
            await wait_until(lambda: receiver._paused_early, what="reading paused before attach")
            assert receiver._early_bytes <= EARLY_LIMIT + 512 * 1024  # the limit plus one read
            got: list[bytes] = []
            receiver.attach(got.append, lambda exc: None, lambda: None)
            await client.drain()
            await wait_until(lambda: sum(map(len, got)) == len(sent), what="every byte")
            assert b"".join(got) == sent
            accepted[0].close()
            client.close()
        finally:
            server.close()
            await server.wait_closed()

    run(scenario)
