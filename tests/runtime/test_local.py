"""`pubsub.runtime.local.QueuedSession`: a client session with a queue instead of a socket
(the HTTP API's requests and an embedded node's in-process clients)."""

from __future__ import annotations

import asyncio

import pytest

from pubsub.kernel.control import Reply
from pubsub.runtime.local import QueuedSession


def reply(i: int) -> Reply:
    return Reply(body={"i": i})


async def test_messages_are_taken_in_order_and_the_callback_runs_on_a_later_loop_pass() -> None:
    session = QueuedSession("test")
    seen: list[int] = []
    calls: list[int] = []

    def ready() -> None:
        calls.append(len(seen))
        while (msg := session.take()) is not None:
            assert isinstance(msg, Reply)
            seen.append(msg.body["i"])

    session.on_ready(ready)
    assert session.send(reply(1)) and session.send(reply(2))
    assert seen == [] and calls == []  # never inside send
    await asyncio.sleep(0)
    assert seen == [1, 2] and calls == [0]  # once for both
    session.send(reply(3))
    await asyncio.sleep(0)
    assert seen == [1, 2, 3] and calls == [0, 2]


async def test_a_full_queue_holds_the_node_back_until_the_reader_takes_half() -> None:
    session = QueuedSession("test", limit=4)
    for i in range(3):
        session.send(reply(i))
    assert session.takes_more() and not session.backlogged()
    session.send(reply(3))
    assert session.backlogged() and not session.takes_more()
    drained = asyncio.ensure_future(session.drain())
    await asyncio.sleep(0)
    assert not drained.done()
    session.take()
    await asyncio.sleep(0)
    assert not drained.done()  # 3 left: above half of 4
    session.take()
    await asyncio.wait_for(drained, 1)
    assert session.takes_more()


async def test_finish_keeps_what_was_queued_for_the_reader_then_ends() -> None:
    session = QueuedSession("test")
    gone: list[bool] = []
    session.on_close(lambda: gone.append(True))
    session.send(reply(1))
    session.finish()
    assert gone == [True] and session.closed and not session.takes_more()
    assert not session.send(reply(2))  # nothing more accepted
    assert not session.ended
    first = await asyncio.wait_for(session.next(), 1)
    assert isinstance(first, Reply) and first.body == {"i": 1}
    assert session.ended
    assert await asyncio.wait_for(session.next(), 1) is None


async def test_close_drops_what_was_queued_and_wakes_a_waiting_reader() -> None:
    session = QueuedSession("test")
    waiting = asyncio.ensure_future(session.next())
    await asyncio.sleep(0)
    session.close()
    assert await asyncio.wait_for(waiting, 1) is None
    other = QueuedSession("test")
    other.send(reply(1))
    other.close()
    assert other.take() is None and other.ended


async def test_the_reader_callback_learns_of_the_end() -> None:
    session = QueuedSession("test")
    ended = asyncio.Event()
    session.on_ready(lambda: ended.set() if session.ended else None)
    session.finish()
    await asyncio.wait_for(ended.wait(), 1)


async def test_next_times_out_without_a_message() -> None:
    session = QueuedSession("test")
    with pytest.raises(TimeoutError):
        await session.next(0.01)


def test_a_queue_limit_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        QueuedSession("test", limit=1)
