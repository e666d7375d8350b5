"""`pubsub.client.run.publish_pipelined`: the windowed publishing loop of both publish commands;
and the order in which concurrent `Client.publish` calls reach the node."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import warnings
from collections.abc import AsyncIterator, Iterator

import pytest

from pubsub.client import connection, library
from pubsub.client import run as clientrun
from pubsub.client.library import Ack, Client
from pubsub.client.run import publish_pipelined
from pubsub.kernel import wire
from pubsub.kernel.message import Ref
from pubsub.publications.messages import PublicationKey, PublishAck, PublishRequest
from pubsub.runtime import receiving
from pubsub.runtime.streams import MessageReader, ReceivedMessages
from tests.client.scripted import scripted_node


class Refused(Exception):
    pass


async def test_results_come_in_order_with_a_bounded_window() -> None:
    in_flight = 0
    most = 0

    async def publish(item: int) -> int:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.001 * (item % 3))
        in_flight -= 1
        return item * 10

    seen: list[int] = []
    done, failure = await publish_pipelined(iter(range(100)), publish, seen.append, Refused)
    assert (done, failure) == (100, None)
    assert seen == [i * 10 for i in range(100)]
    assert 1 < most <= clientrun.PUBLISH_WINDOW


async def test_a_refused_request_stops_reading_and_the_rest_in_flight_is_awaited() -> None:
    read: list[int] = []

    def items() -> Iterator[int]:
        for i in range(1000):
            read.append(i)
            yield i

    async def publish(item: int) -> int:
        await asyncio.sleep(0)
        if item == 5:
            raise Refused("no")
        return item

    seen: list[int] = []
    done, failure = await publish_pipelined(items(), publish, seen.append, Refused)
    assert isinstance(failure, Refused)
    assert done == len(seen) and 5 not in seen and seen == sorted(seen)
    assert len(read) <= 5 + clientrun.PUBLISH_WINDOW + 1  # stopped reading soon after


async def test_an_item_that_fails_to_read_is_the_failure() -> None:
    def items() -> Iterator[int]:
        yield 1
        yield 2
        raise Refused("line 3: bad")

    async def publish(item: int) -> int:
        return item

    seen: list[int] = []
    done, failure = await publish_pipelined(items(), publish, seen.append, Refused)
    assert (done, seen) == (2, [1, 2])
    assert str(failure) == "line 3: bad"


# --- publish_window: prompt results, graceful stops ------------------------------------------
async def _numbered(items: list[int], gate: asyncio.Event | None = None):  # type: ignore[no-untyped-def]
    for i, item in enumerate(items, start=1):
        if gate is not None and i > 1:
            await gate.wait()
        yield i, item


async def test_a_result_is_reported_before_the_next_item_arrives() -> None:
    gate = asyncio.Event()
    seen: list[tuple[int, int]] = []

    async def publish(item: int) -> int:
        return item * 10

    run = asyncio.create_task(
        clientrun.publish_window(_numbered([1, 2], gate), publish, lambda n, r: seen.append((n, r)), Refused)
    )
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.01)
    assert seen == [(1, 10)]  # the second item has not come yet
    gate.set()
    outcome = await run
    assert seen == [(1, 10), (2, 20)] and outcome.acknowledged == 2 and outcome.unknown == []


async def test_a_stop_reports_what_is_still_unknown_after_the_grace() -> None:
    stopping = clientrun.Stopping()
    never = asyncio.Event()

    async def publish(item: int) -> int:
        if item >= 3:
            await never.wait()
        return item

    seen: list[int] = []

    async def stop_soon() -> None:
        while len(seen) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        stopping.set(15)

    asyncio.get_running_loop().create_task(stop_soon())
    outcome = await clientrun.publish_window(
        _numbered([1, 2, 3, 4]), publish, lambda n, r: seen.append(r), Refused, stopping, grace=0.1
    )
    assert outcome.stopped_by == "SIGTERM" and outcome.acknowledged == 2
    assert outcome.unknown == [(3, 3), (4, 4)]


async def test_concurrent_publishes_leave_in_call_order_while_the_connection_opens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A publish issued just as the shared connection comes up must not overtake earlier ones
    still waiting for it (`pubsub publish` reading stdin issues them that way)."""
    received: list[bytes] = []

    async def node(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        messages = MessageReader(reader)
        while (msg := await messages.read()) is not None:
            assert isinstance(msg, PublishRequest)
            received.append(bytes(msg.payload))
            ack = PublishAck(msg.id, msg.topic, Ref("127.0.0.1:1"), len(received), PublicationKey(bytes(16)),
                             Ref("127.0.0.1:1"), len(received))
            writer.write(wire.encode(ack))

    server = await asyncio.start_server(node, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = Client(f"127.0.0.1:{port}")
    later: list[asyncio.Task[Ack]] = []

    async def connect(addr: str, timeout: float, max_frame: int) -> tuple[ReceivedMessages, asyncio.StreamWriter]:
        writer = await receiving.connect("127.0.0.1", port)
        # The third publish comes while the first holds the new connection and the second waits for it.
        later.append(asyncio.create_task(client.publish("t", b"3")))
        return ReceivedMessages(writer), writer

    monkeypatch.setattr(connection, "_connect", connect)
    try:
        first = asyncio.create_task(client.publish("t", b"1"))
        second = asyncio.create_task(client.publish("t", b"2"))
        async with asyncio.timeout(10):
            acks = [await first, await second, await later[0]]
        assert received == [b"1", b"2", b"3"]
        assert [ack.local_seq for ack in acks] == [1, 2, 3]
    finally:
        await client.close()
        server.close()
        await server.wait_closed()


async def test_a_node_that_drops_the_connection_fails_the_publications_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answers are matched where they are received; a connection that ends with
    publications unanswered fails them as ``unknown`` (sent, outcome not known) at once."""
    requests: list[PublishRequest] = []

    async def node(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        messages = MessageReader(reader)
        while (msg := await messages.read()) is not None:
            assert isinstance(msg, PublishRequest)
            requests.append(msg)
            if len(requests) == 1:
                writer.write(wire.encode(PublishAck(msg.id, msg.topic, Ref("127.0.0.1:1"), 1,
                                                    PublicationKey(bytes(16)), Ref("127.0.0.1:1"), 1)))
            else:
                writer.write(wire.encode(PublishAck(msg.id, msg.topic, Ref("127.0.0.1:1"), 2,
                                                    PublicationKey(bytes(16)), Ref("127.0.0.1:1"), 2))[:9])
                writer.close()  # the second answer breaks off inside its frame
                return

    async with scripted_node(node, monkeypatch) as ref:
        client = Client(ref, publish_timeout=30)
        try:
            async with asyncio.timeout(10):  # well under publish_timeout: the end is noticed, not waited out
                first = await client.publish("t", b"1")
                with pytest.raises(library.PublishError) as failed:
                    await client.publish("t", b"2", retries=0)
            assert first.local_seq == 1
            assert failed.value.code == "unknown" and "closed the connection" in str(failed.value)
        finally:
            await client.close()


def _reader_thread_gone() -> None:
    for thread in threading.enumerate():
        if thread.name == "stdin-reader":
            thread.join(10)
            assert not thread.is_alive(), "the stdin reader did not end"


def test_stdin_lines_reads_lines_and_leaves_nothing_unawaited_when_the_loop_ends_first() -> None:
    """Lines (CRLF ones too; a last one without a newline once the input ends) arrive
    numbered and in order; and input that ends after the consumer's loop has closed (a
    publish that stopped early, then its pipe closing) leaves no coroutine un-awaited: the
    reader used to make one per line in its thread, and Python warned about it on exit."""
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b"".join(b"line %d\n" % i for i in range(1, 6)) + b"crlf\r\nlast")

        async def first_lines() -> list[tuple[int, bytes]]:
            got: list[tuple[int, bytes]] = []
            async for item in clientrun.stdin_lines(read_fd, queued=2):
                got.append(item)
                if len(got) == 6:  # "last" comes only when the input ends
                    break
            return got

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = asyncio.run(asyncio.wait_for(first_lines(), 30))
            os.close(write_fd)  # the input ends now: the reader hands "last" to a closed loop
            write_fd = -1
            _reader_thread_gone()
            gc.collect()
        assert got == [*((i, b"line %d" % i) for i in range(1, 6)), (6, b"crlf")]
        assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


async def test_publish_window_names_the_failed_item_and_the_later_ones_acknowledged() -> None:
    """Item 3 is refused after items 4..6 were sent: reading stops, 4..6 are awaited, and
    the outcome says which failed and which later ones were acknowledged all the same."""

    async def source() -> AsyncIterator[tuple[int, int]]:
        for number in range(1, 100):
            yield number, number

    async def publish(item: int) -> int:
        await asyncio.sleep(0.05 if item == 3 else 0)  # 3 fails after the next ones went out
        if item == 3:
            raise Refused("no")
        return item

    done: list[int] = []
    outcome = await clientrun.publish_window(source(), publish, lambda n, r: done.append(n), Refused, window=6)
    assert isinstance(outcome.failure, Refused) and outcome.failed_number == 3
    assert done == [1, 2, *outcome.acknowledged_after_failure]
    assert outcome.acknowledged_after_failure == [4, 5, 6, 7, 8]  # the window of 6 was full
    assert outcome.acknowledged == 7


def test_line_ranges() -> None:
    from pubsub.cli.publishing import line_ranges

    assert line_ranges([3]) == "line 3"
    assert line_ranges([3, 4, 5, 9, 11, 12]) == "lines 3-5, 9, 11-12"
