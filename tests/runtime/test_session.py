"""A client's session (`pubsub.runtime.connection.ClientSession`) over real TCP on 127.0.0.1:
payloads encoded already go out framed in one write, as `send_many` frames messages."""

from __future__ import annotations

import asyncio

import uvloop

from pubsub.kernel import wire
from pubsub.kernel.framing import FrameDecoder
from pubsub.kernel.message import Ref, Topic
from pubsub.publications.messages import Delivery, MsgId, Payload, PublicationKey
from pubsub.runtime.connection import ClientSession, Connection
from pubsub.runtime.stats import Stats

MAX_FRAME = 200
#: Seconds any step may take.
STEP = 10.0


def delivery(local_seq: int, size: int) -> Delivery:
    return Delivery(Topic("t"), local_seq, Ref("127.0.0.1:9"), local_seq, PublicationKey(bytes(16)),
                    Payload(b"x" * size), 1_700, 1_600, MsgId(""))


async def read_frames(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    decoder = FrameDecoder(wire.DEFAULT_MAX_FRAME)
    payloads: list[bytes] = []
    while len(payloads) < count:
        data = await asyncio.wait_for(reader.read(1 << 16), STEP)
        assert data, "the connection ended early"
        payloads += decoder.feed(data)
    return payloads


def test_encoded_payloads_go_out_framed_and_oversize_ones_are_skipped_and_counted() -> None:
    async def scenario() -> None:
        accepted: asyncio.Future[asyncio.StreamWriter] = asyncio.get_running_loop().create_future()

        def on_connect(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.set_result(writer)

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, client = await asyncio.open_connection("127.0.0.1", port)
        try:
            conn = Connection(await asyncio.wait_for(accepted, STEP), outgoing=False)
            stats = Stats()
            session = ClientSession(conn, stats, MAX_FRAME)
            messages = [delivery(1, 10), delivery(2, MAX_FRAME), delivery(3, 20)]
            payloads = [wire.encode_payload(m) for m in messages]

            assert session.send_encoded("delivery", payloads) == [1]  # the second is too large
            assert stats.errors["frame_too_large"] == 1
            assert stats.frames_out["delivery"] == 2
            assert stats.bytes_out["delivery"] == sum(len(wire.encode(m)) for m in (messages[0], messages[2]))
            received = await read_frames(reader, 2)
            assert [wire.decode(p) for p in received] == [messages[0], messages[2]]

            # the same count and error as `send_many` for the same messages
            again = Stats()
            assert ClientSession(conn, again, MAX_FRAME).send_many(messages) == [1]
            assert again.errors == stats.errors and again.frames_out == stats.frames_out
            assert again.bytes_out == stats.bytes_out
            assert [wire.decode(p) for p in await read_frames(reader, 2)] == [messages[0], messages[2]]

            conn.close()
            assert session.send_encoded("delivery", payloads[:1]) is None  # gone: nothing written
        finally:
            client.close()
            server.close()
            await server.wait_closed()

    uvloop.run(asyncio.wait_for(scenario(), 60))
