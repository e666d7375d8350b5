"""`Client.history_page` against a node whose retention overtakes the read: a read from 0
starts over (bounded), a read from a later cursor reports ``cursor_expired``.

The node is a scripted server speaking the stream protocol (a real node's timing cannot put
a removal between two batches of one read on demand; tests/integration/test_retention.py
reads real nodes while their publications expire)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from pubsub.client.library import HISTORY_ATTEMPTS, Client, ClientError
from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Reply
from pubsub.kernel.message import Message, Ref, Topic
from pubsub.publications.messages import Delivery, Follow, MsgId, Payload, PublicationKey
from pubsub.runtime.streams import MessageReader
from tests.client.scripted import scripted_node

T = Topic("ret")
NODE = Ref("127.0.0.1:1")
EXPIRED = ErrorReply(code="cursor_expired", detail="retention removed publications of 'ret' after #0 (up to #10)")


def delivery(local_seq: int) -> Delivery:
    return Delivery(T, local_seq, NODE, local_seq, PublicationKey(bytes(16)), Payload(b"x"), 1, 1, MsgId(""))


Script = Callable[[int, Follow], list[Message]]


@asynccontextmanager
async def streaming_node(script: Script, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[Follow]]:
    """A node answering the n-th Follow (from 1) with the stream start, then `script(n, follow)`;
    yields the Follows it received."""
    follows: list[Follow] = []

    async def node(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        msg = await MessageReader(reader).read()
        assert isinstance(msg, Follow)
        follows.append(msg)
        frames = [Reply(body={"since": msg.since, "latest": 12, "incarnation": "inc"}), *script(len(follows), msg)]
        writer.write(b"".join(wire.encode(frame) for frame in frames))
        await writer.drain()
        writer.close()

    async with scripted_node(node, monkeypatch):
        async with asyncio.timeout(10):
            yield follows


async def test_a_read_from_0_that_retention_overtakes_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    def script(n: int, follow: Follow) -> list[Message]:
        if n == 1:  # #1 delivered, then #1..#10 removed before the read reached #2
            return [delivery(1), EXPIRED]
        return [delivery(11), delivery(12), Reply(body={"end": True})]

    async with streaming_node(script, monkeypatch) as follows:
        page = await Client(NODE).history_page(T)
    assert [d.local_seq for d in page.deliveries] == [11, 12]  # nothing of the overtaken read
    assert page.incarnation == "inc"
    assert [f.since for f in follows] == [0, 0]


async def test_it_gives_up_after_the_last_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    async with streaming_node(lambda n, follow: [EXPIRED], monkeypatch) as follows:
        with pytest.raises(ClientError) as refused:
            await Client(NODE).history(T)
    assert refused.value.code == "cursor_expired"
    assert len(follows) == HISTORY_ATTEMPTS


async def test_a_read_from_a_later_cursor_reports_the_removal(monkeypatch: pytest.MonkeyPatch) -> None:
    async with streaming_node(lambda n, follow: [EXPIRED], monkeypatch) as follows:
        with pytest.raises(ClientError) as refused:
            await Client(NODE).history(T, since=5)
    assert refused.value.code == "cursor_expired" and "retention" in str(refused.value)
    assert [f.since for f in follows] == [5]  # asked for what is gone: told so, once
