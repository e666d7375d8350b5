"""`pubsub.runtime.streams.ReceivedMessages`: frames cut as they arrive, read in order with
`read` or taken from the `on_ready` callback, the end and broken streams told as
`MessageReader` tells them, reading paused for a reader that falls behind -- over real TCP on
127.0.0.1, on asyncio's loop and on uvloop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from pubsub.kernel import wire
from pubsub.kernel.control import StatusRequest
from pubsub.runtime.streams import PAUSE_ABOVE, ReceivedMessages
from tests.runtime import test_net
from tests.runtime.test_net import wait_until
from tests.runtime.test_receiving import served

run = test_net.run


def frame(body: bytes) -> bytes:
    return wire.HEADER.pack(len(body)) + body


def test_frames_cut_anywhere_come_out_whole_and_in_order_then_the_end(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        async with served(lambda reader, writer: None) as (client, server_side):
            messages = ReceivedMessages(client)
            stream = b"".join(frame(bytes([i]) * (i + 1)) for i in range(50)) + frame(wire.encode(StatusRequest())[4:])
            for cut in range(0, len(stream), 7):  # chunks that split headers and bodies
                server_side.write(stream[cut : cut + 7])
                await server_side.drain()
            server_side.write_eof()
            got = [await messages.payload() for _ in range(50)]
            assert got == [bytes([i]) * (i + 1) for i in range(50)]
            assert isinstance(await messages.read(), StatusRequest)
            assert await messages.payload() is None
            assert await messages.payload() is None  # and stays ended

    run(scenario)


@pytest.mark.parametrize(
    ("tail", "code"),
    [(frame(b"whole")[:-2], "truncated_frame"), (wire.HEADER.pack(wire.DEFAULT_MAX_FRAME + 1), "frame_too_large")],
    ids=["ends-inside-a-frame", "oversize-prefix"],
)
def test_a_broken_stream_raises_after_the_frames_before_it(run: Callable[..., None], tail: bytes, code: str) -> None:
    async def scenario() -> None:
        async with served(lambda reader, writer: None) as (client, server_side):
            messages = ReceivedMessages(client)
            server_side.write(frame(b"first") + tail)
            server_side.write_eof()
            assert await messages.payload() == b"first"
            with pytest.raises(wire.WireError) as caught:
                await messages.payload()
            assert caught.value.code == code

    run(scenario)


def test_on_ready_hands_frames_over_from_the_receiving_callback(run: Callable[..., None]) -> None:
    """With a callback set, frames are taken where they arrive: no task waits for them."""

    async def scenario() -> None:
        async with served(lambda reader, writer: None) as (client, server_side):
            messages = ReceivedMessages(client)
            taken: list[bytes] = []
            ends: list[bool] = []

            def ready() -> None:
                while (payload := messages.take()) is not None:
                    taken.append(payload)
                if messages.ended():
                    ends.append(True)

            messages.on_ready(ready)
            server_side.write(frame(b"a") + frame(b"b"))
            await wait_until(lambda: taken == [b"a", b"b"], what="both frames taken")
            server_side.write(frame(b"c"))
            server_side.write_eof()
            await wait_until(lambda: bool(ends), what="the end told")
            assert taken == [b"a", b"b", b"c"]
            messages.on_ready(None)
            assert await messages.payload() is None

    run(scenario)


def test_a_reader_that_falls_behind_pauses_the_socket_and_loses_nothing(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        async with served(lambda reader, writer: None) as (client, server_side):
            messages = ReceivedMessages(client)
            bodies = [i.to_bytes(4, "big") * 256 for i in range(4 * PAUSE_ABOVE // 1024)]  # 4x the limit
            server_side.write(b"".join(frame(body) for body in bodies))
            await wait_until(lambda: messages._paused, what="reading paused")
            held = messages._ready_bytes
            assert PAUSE_ABOVE < held <= PAUSE_ABOVE + 1024 * 1024  # the limit plus what one read brings
            await asyncio.sleep(0.05)
            assert messages._ready_bytes == held  # paused: nothing more is read meanwhile
            got = [await messages.payload() for _ in bodies]
            assert got == bodies
            assert not messages._paused

    run(scenario)


def test_take_message_decodes_and_tells_the_end_even_inside_a_frame(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        async with served(lambda reader, writer: None) as (client, server_side):
            messages = ReceivedMessages(client)
            assert messages.take_message() is None  # open, nothing yet
            server_side.write(wire.encode(StatusRequest()) + frame(b"whole")[:-2])
            server_side.write_eof()
            await wait_until(lambda: messages._ended, what="the end")
            assert isinstance(messages.take_message(), StatusRequest)
            with pytest.raises(asyncio.IncompleteReadError):  # the stream ended inside a frame
                messages.take_message()

    run(scenario)
