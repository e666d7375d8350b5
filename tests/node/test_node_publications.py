"""The node daemon's publication side in one process: real runtimes on 127.0.0.1, a real
supervisor, the client library.  (Separate OS processes: tests/integration/test_publications.py.)"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import socket
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
import uvloop

from pubsub.cli.formats import format_ack, format_delivery
from pubsub.client.library import Ack, Client, ClientError, ConnectionLost, PublishError, Subscription
from pubsub.kernel import wire
from pubsub.kernel.control import Hello, Reply, StatusRequest
from pubsub.kernel.message import Ref, Topic
from pubsub.node.app import NodeApp
from pubsub.node.delivery import NEW_ONLY_SKEW_MS
from pubsub.node.journal import read_frames
from pubsub.node.sequence import SEQ_BLOCK
from pubsub.node.settings import HOLD_MIN_BATCH
from pubsub.node.store import DB_NAME, JOURNAL_NAME, PublicationStore, StoreError, SyncMode
from pubsub.node.telemetry import DeliveryMetrics, NodeCollector
from pubsub.node.topicfile import TopicFile
from pubsub.publications.messages import Delivery, Follow
from pubsub.runtime.net import Runtime
from pubsub.runtime.stats import Stats
from pubsub.skipring.nodecore import NodeCore
from pubsub.telemetry.metrics import TopicLabels
from tests.integration.test_daemons import (
    FAST,
    bound_socket,
    members,
    ref_of,
    supervisor,
    wait_until,
)

T = Topic("news")


@contextlib.asynccontextmanager
async def pnode(
    sup: Ref, data: Path | None, sock: socket.socket | None = None, *, sync: SyncMode = "normal",
    **options: object,
) -> AsyncIterator[tuple[Runtime, NodeApp]]:
    """A node with a publication store in `data` (memory when None; commits on the store's
    thread with `sync` "full", on the loop with "normal")."""
    sock = sock or bound_socket()
    ref = ref_of(sock)
    stats = Stats()
    store = PublicationStore(data, sync=sync)
    app = NodeApp(
        ref,
        NodeCore(ref, sup, rng=random.Random(2), **options),  # type: ignore[arg-type]
        stats,
        TopicFile(data) if data else None,
        store=store,
    )
    initial = app.rejoin()
    rt = Runtime(app, FAST, stats=stats, sock=sock)
    try:
        await rt.start()
        rt.dispatch(initial)
        yield rt, app
    finally:
        await rt.stop()
        app.flush()
        store.close()
        sock.close()


def durable_keys(data: Path) -> list[bytes]:
    """The keys of the publications of `T` in the store's files (SQLite, then the journal),
    read without changing either."""
    with contextlib.closing(sqlite3.connect(data / DB_NAME)) as db:
        bodies = [body for (body,) in db.execute("SELECT body FROM batches WHERE topic = ? ORDER BY last_seq", (T,))]
    _, frames, _ = read_frames((data / JOURNAL_NAME).read_bytes())
    bodies += [row[6] for frame in frames for row in frame if row[0] == T]
    return [entry[1] for body in bodies for entry in msgpack.unpackb(body)]


def run(coro: object, timeout: float = 60) -> None:
    uvloop.run(asyncio.wait_for(coro, timeout))  # type: ignore[arg-type]


def test_ack_means_durable_and_sequence_numbers_survive_a_crash(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with supervisor(tmp_path / "sup") as (srt, _):
            sock = bound_socket()
            port = sock.getsockname()[1]
            async with pnode(srt.ref, tmp_path / "n", sock) as (rt, app):
                async with Client(rt.ref) as client:
                    await client.join(T)
                    acks = [await client.publish(T, f"m{i}") for i in range(3)]
                assert [a.seq for a in acks] == [0, 1, 2]
                assert [a.local_seq for a in acks] == [1, 2, 3]
                assert {a.stored_by for a in acks} == {rt.ref}
                # Acknowledged = committed: in the store's files (its journal, `pubsub.node.journal`,
                # until the next settle), where a store opened after a crash finds them.
                assert durable_keys(tmp_path / "n") == [a.key for a in acks]
                with pytest.raises(StoreError, match="in use by another store"):
                    PublicationStore(tmp_path / "n")  # which a second store may not take from a live one
            # Restart on the same data: the trie is rebuilt, numbering continues after the
            # reservation (a number used before the crash is never issued again).
            async with pnode(srt.ref, tmp_path / "n", bound_socket(port)) as (rt, app):
                assert app.core.publications[T].trie.size == 3
                # configured again (a label from the supervisor): it stores for clients itself
                async def configured() -> bool:
                    return app.core.is_configured(T)

                await wait_until(configured, what="the restarted node's label")
                async with Client(rt.ref) as client:
                    ack = await client.publish(T, "after")
                assert ack.seq == SEQ_BLOCK and ack.local_seq == 4

    run(scenario())


def test_under_sync_normal_commits_go_to_the_journal_and_reach_sqlite_within_a_second(tmp_path: Path) -> None:
    """A node under sync "normal" commits to its store's journal; its intervals settle the
    rows into SQLite, and its streams and acknowledgements do not wait for that."""
    async def scenario() -> None:
        async with supervisor(tmp_path / "sup") as (srt, _), pnode(srt.ref, tmp_path / "n") as (rt, app):
            assert app.store.deferring
            async with Client(rt.ref) as client:
                await client.join(T)
                sub = client.subscribe(T, join=False)
                await sub.open()
                acks = [await client.publish(T, f"m{i}") for i in range(3)]
                got = [await asyncio.wait_for(sub.__anext__(), 10) for _ in range(3)]
                assert [d.key for d in got] == [a.key for a in acks]
                await sub.close()

            async def settled() -> bool:
                with contextlib.closing(sqlite3.connect(tmp_path / "n" / DB_NAME)) as db:
                    rows = db.execute("SELECT COALESCE(SUM(entries), 0) FROM batches").fetchone()
                return bool(rows[0] == 3 and app.store.settles > 0)

            await wait_until(settled, timeout=10, what="the rows in SQLite")
            _, frames, _ = read_frames((tmp_path / "n" / JOURNAL_NAME).read_bytes())
            assert frames == []  # emptied by the settle

            async def checkpointed() -> bool:  # the settled rows copied from SQLite's log into its file
                main_file = f"file:{tmp_path / 'n' / DB_NAME}?immutable=1"  # reads the file alone, not the log
                with contextlib.closing(sqlite3.connect(main_file, uri=True)) as db:
                    try:
                        rows = db.execute("SELECT COALESCE(SUM(entries), 0) FROM batches").fetchone()
                    except sqlite3.OperationalError as exc:  # the schema itself is still in the log only
                        assert "no such table" in str(exc), exc
                        return False
                return bool(rows[0] == 3)

            await wait_until(checkpointed, timeout=10, what="a checkpoint after the settle")
            collector = NodeCollector(app, TopicLabels(), DeliveryMetrics())
            metrics = {sample.name: sample.value for metric in collector.collect() for sample in metric.samples}
            assert metrics["pubsub_store_settles_total"] == app.store.settles >= 1
            assert metrics["pubsub_store_commits_total"] == app.store.commits >= 3

    run(scenario())


def test_streams_history_new_only_and_resume(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with (
            supervisor(tmp_path / "sup") as (srt, _),
            pnode(srt.ref, None) as (rt, app),
        ):
            client = Client(rt.ref)
            await client.join(T)
            for i in range(5):
                await client.publish(T, f"m{i}")
            async with client.subscribe(T, new_only=True) as fresh, client.subscribe(T) as full:
                assert fresh.since == 5 and full.latest == 5
                first = [await anext(full) for _ in range(5)]
                assert [d.local_seq for d in first] == [1, 2, 3, 4, 5]
                assert first[0].payload == b"m0"
                await client.publish(T, "m5")
                assert (await anext(fresh)).payload == b"m5"
                assert (await anext(full)).local_seq == 6
            # Resume after a reconnect: exactly the rest.
            await client.publish(T, "m6")
            async with client.subscribe(T, since=4, join=False) as again:
                assert [(await anext(again)).local_seq for _ in range(3)] == [5, 6, 7]
            history = await client.history(T, since=5)
            assert [d.payload for d in history] == [b"m5", b"m6"]
            assert await client.history(Topic("nothing")) == []
            await client.close()
            status = await Client(rt.ref).status()
            assert status["publications"]["durable"] is False
            assert status["topics"][T]["publications"]["latest_local_seq"] == 7

    run(scenario())


def test_a_live_stream_needs_a_topic_the_node_runs_and_ends_when_it_leaves(tmp_path: Path) -> None:
    """A live stream of a topic the node does not run is refused (``not_member``) instead of
    waiting forever; reading what it holds is not.  When the node leaves, a live stream
    delivers what is durable and then ends with ``not_member``; its cursor resumes it after
    the node joins again, nothing lost or repeated."""

    async def scenario() -> None:
        async with (
            supervisor(tmp_path / "sup") as (srt, _),
            pnode(srt.ref, None) as (rt, app),
        ):
            client = Client(rt.ref)
            with pytest.raises(ClientError) as refused:
                await client.subscribe(Topic("nosuch"), join=False).open()
            assert refused.value.code == "not_member" and "does not run 'nosuch'" in str(refused.value)
            assert app.deliveries.refused["not_member"] == 1
            await client.join(T)
            await client.publish(T, "m1")
            got: list[Delivery] = []
            sub = await client.subscribe(T, join=False).open()
            got.append(await anext(sub))
            await client.publish(T, "m2")
            await client.leave(T)
            with pytest.raises(ClientError) as ended:
                async for delivery in sub:
                    got.append(delivery)
            assert ended.value.code == "not_member" and "left 'news' after #2" in str(ended.value)
            assert [d.payload for d in got] == [b"m1", b"m2"]
            assert [d.payload for d in await client.history(T)] == [b"m1", b"m2"]  # still readable
            with pytest.raises(ClientError, match="not_member"):
                await client.subscribe(T, join=False).open()
            async def gone() -> bool:
                return T not in app.core.instances

            await wait_until(gone, what="the node to have left")
            await client.join(T)
            await client.publish(T, "m3")
            async with client.subscribe(T, since=sub.last_seq, incarnation=sub.incarnation, join=False) as again:
                assert [(await anext(again)).payload] == [b"m3"]
            await sub.close()
            await client.close()

    run(scenario())


class Enough(Exception):
    """What the test's delivery callback raises to stop `consume`."""


def test_consume_hands_each_delivery_to_a_callback_as_iteration_would(tmp_path: Path) -> None:
    """`Subscription.consume`: the deliveries in order, history then live; a callback's
    exception ends the call and the stream reads on from there; a stream the node ends
    returns; a node that goes away raises ConnectionLost."""

    async def scenario() -> None:
        async with supervisor(tmp_path / "sup") as (srt, _):
            async with pnode(srt.ref, None) as (rt, app):
                client = Client(rt.ref)
                await client.join(T)
                for i in range(3):
                    await client.publish(T, f"m{i}")
                got: list[Delivery] = []

                def take(delivery: Delivery) -> None:
                    got.append(delivery)
                    if delivery.local_seq == 5:
                        raise Enough()

                sub = await client.subscribe(T, join=False).open()
                consuming = asyncio.create_task(sub.consume(take))
                await wait_until(_holds(got, 3), what="the history")
                for i in range(3, 6):
                    await client.publish(T, f"m{i}")
                with pytest.raises(Enough):
                    await asyncio.wait_for(consuming, 10)
                assert [d.payload for d in got] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
                assert sub.last_seq == 5
                assert (await anext(sub)).payload == b"m5"  # the stream reads on
                # what ends the history stream ends consume
                done: list[Delivery] = []
                async with Subscription(client, T, 2, False, join=False, live=False) as past:
                    await past.consume(done.append)
                assert [d.local_seq for d in done] == [3, 4, 5, 6]
                consuming = asyncio.create_task(sub.consume(got.append))
                await client.publish(T, "m6")
                await wait_until(_holds(got, 6), what="the live delivery")
                await client.close()
            with pytest.raises(ConnectionLost, match="closed the stream after local #7"):  # the node stopped
                await asyncio.wait_for(consuming, 10)
            await sub.close()
            assert [d.local_seq for d in got] == [1, 2, 3, 4, 5, 7]

    run(scenario())


def _holds(got: list[Delivery], count: int):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return len(got) >= count

    return check


def test_a_stream_accepts_no_further_requests(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with supervisor(tmp_path / "sup") as (srt, _), pnode(srt.ref, None) as (rt, app):
            host, port = rt.ref.rsplit(":", 1)
            await Client(rt.ref).join(T)  # a live stream follows a topic the node runs
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(
                wire.encode(Hello(ref=None, role="client"))
                + wire.encode(Follow(T, 0, False, True))
                + wire.encode(StatusRequest())
            )
            frames = []
            for _ in range(2):
                length = wire.frame_length(await reader.readexactly(4))
                frames.append(wire.decode(await reader.readexactly(length)))
            assert isinstance(frames[0], Reply) and frames[0].body["live"] is True
            assert frames[1].code == "request_on_stream"  # type: ignore[attr-defined]
            writer.close()
            await wait_until(_no_streams(app), what="stream closed")

    run(scenario())


def _no_streams(app: NodeApp):  # type: ignore[no-untyped-def]
    async def check() -> bool:
        return app.deliveries.count() == 0

    return check


def test_a_follower_that_keeps_up_is_served_at_the_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A live stream parked at the topic's end gets each commit's publications written by
    the commit itself: its task never wakes to look for rows (`Deliveries._deliver_now`).
    Every publication still arrives once, in order."""
    from pubsub.node.delivery import Deliveries

    looked: list[int] = []
    rows = Deliveries._rows

    async def counted(self: Deliveries, stream: object, limit: int) -> object:
        looked.append(limit)
        return await rows(self, stream, limit)  # type: ignore[arg-type]

    monkeypatch.setattr(Deliveries, "_rows", counted)

    async def scenario() -> None:
        async with _parked_follower(tmp_path) as (client, live, stream):
            for i in range(5):
                await client.publish(T, f"m{i}")
                delivery = await anext(live)
                assert (delivery.local_seq, delivery.payload) == (i + 1, f"m{i}".encode())
            assert looked == [] and stream.parked and stream.delivered == 5

    run(scenario())


def test_a_failure_while_serving_at_the_commit_leaves_the_stream_to_its_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If writing to a stream at the commit raises, the commit's other work still happens
    (the publisher is acknowledged) and the stream's task delivers instead."""
    from pubsub.runtime.connection import ClientSession

    def broken(self: ClientSession) -> bool:
        raise RuntimeError("injected")

    monkeypatch.setattr(ClientSession, "backlogged", broken)

    async def scenario() -> None:
        async with _parked_follower(tmp_path) as (client, live, _stream):
            for i in range(3):
                ack = await client.publish(T, f"m{i}")
                assert ack.local_seq == i + 1
                assert (await anext(live)).local_seq == i + 1

    run(scenario())


def test_new_only_skips_the_history_a_joining_node_fetches_after_the_stream_began(tmp_path: Path) -> None:
    """The helper's trial: `subscribe --new-only` on a node that is not yet a member used to
    deliver the topic's whole history, because the node fetches it (anti-entropy) after the
    stream began and numbers it as new.  Here the node joins and the stream starts at once,
    as the command does, before the node has fetched anything (that takes the supervisor's
    configuration and an anti-entropy round): it stores the five old publications but
    delivers only the one published afterwards;
    a full stream of the same node has all six, and a resume from the new-only stream's
    cursor that gives its `published_from_ms` again skips the history too."""

    async def scenario() -> None:
        async with (
            supervisor(tmp_path / "sup") as (srt, _),
            pnode(srt.ref, None) as (old_rt, _old),
            pnode(srt.ref, None) as (rt, app),
        ):
            elder = Client(old_rt.ref)
            await elder.join(T)
            for i in range(5):
                await elder.publish(T, f"old{i}")
            # history is what was published more than the allowed clock skew before the stream
            await asyncio.sleep(NEW_ONLY_SKEW_MS / 1000 + 0.1)
            client = Client(rt.ref)
            async with client.subscribe(T, new_only=True) as fresh:
                assert fresh.latest == 0 and fresh.published_from_ms > 0

                async def caught_up() -> bool:
                    return app.store.latest(T) == 5

                await wait_until(caught_up, what="the joining node holds the five old publications")
                await elder.publish(T, "new")
                delivered = await asyncio.wait_for(anext(fresh), 10)
                assert delivered.payload == b"new" and delivered.local_seq == 6
                [stream] = app.deliveries.streams[T]
                assert stream.cursor == 6 and stream.delivered == 1
            full = await client.history(T)
            assert [d.payload for d in full][:5] == [f"old{i}".encode() for i in range(5)]
            async with client.subscribe(
                T, since=0, join=False, published_from_ms=fresh.published_from_ms
            ) as resumed:
                assert (await asyncio.wait_for(anext(resumed), 10)).payload == b"new"
            await client.close()
            await elder.close()

    run(scenario())


def test_deliveries_to_a_socket_are_packed_from_the_rows_and_a_value_the_packer_refuses_takes_the_generic_path() -> None:
    """`send_deliveries`: a socket's session gets payloads packed straight from the rows,
    the bytes the generic encoder writes for their Delivery messages; one row the packer
    cannot encode sends the whole batch as messages, so that the session's generic encoder
    skips and counts just that one (as before this path existed); an in-memory session
    always gets messages."""
    from pubsub.node.delivery import delivery_of, send_deliveries
    from pubsub.node.rowcodec import Stored
    from pubsub.publications.messages import Publication
    from pubsub.publications.topicstate import make_publication

    class Session:
        def __init__(self, encodes: bool) -> None:
            self.encodes = encodes
            self.encoded: list[bytes] = []
            self.messages: list[Delivery] = []

        def send_encoded(self, kind: str, payloads: list[bytes]) -> list[int]:
            assert kind == "delivery"
            self.encoded += payloads
            return []

        def send_many(self, msgs: list[Delivery]) -> list[int]:
            self.messages += msgs
            return []

    rows = [Stored(T, i + 1, make_publication(Ref("127.0.0.1:9"), i, f"p{i}".encode(), 1_700 + i), "tree", 1, 99)
            for i in range(3)]
    socket_like = Session(encodes=True)
    assert send_deliveries(socket_like, rows) == []  # type: ignore[arg-type]
    assert socket_like.encoded == [wire.encode_payload(delivery_of(r)) for r in rows] and not socket_like.messages

    good = rows[0].publication
    huge = Publication(good.key, good.publisher, 1 << 64, good.payload)  # beyond msgpack's integers
    with_bad = [*rows, Stored(T, 4, huge, "tree", 1, 99)]
    fallback = Session(encodes=True)
    assert send_deliveries(fallback, with_bad) == []  # type: ignore[arg-type]
    assert not fallback.encoded and fallback.messages == [delivery_of(r) for r in with_bad]
    with_runtime = Stats()
    assert wire_session(with_runtime).send_many(fallback.messages) == [3]
    assert with_runtime.errors["unencodable"] == 1 and with_runtime.frames_out["delivery"] == 3

    in_memory = Session(encodes=False)
    assert send_deliveries(in_memory, rows) == []  # type: ignore[arg-type]
    assert in_memory.messages == [delivery_of(r) for r in rows] and not in_memory.encoded


def wire_session(stats: Stats) -> Any:
    """A `ClientSession` whose connection takes every write (for counting what it frames)."""
    from pubsub.runtime.connection import ClientSession

    class Taking:
        writable = True

        def write(self, data: bytes) -> bool:
            return True

    return ClientSession(Taking(), stats, wire.DEFAULT_MAX_FRAME)  # type: ignore[arg-type]


def test_a_new_only_stream_skips_only_what_was_published_before_its_bound(tmp_path: Path) -> None:
    """The stream's filter itself: rows published before the bound are skipped but move the
    cursor, rows without a timestamp (0, unknown) and later rows are delivered."""
    from pubsub.node.delivery import Deliveries, Stream
    from pubsub.node.rowcodec import Stored
    from pubsub.publications.topicstate import make_publication

    class Session:
        encodes = False

        def __init__(self) -> None:
            self.sent: list[Delivery] = []

        def send_many(self, msgs: list[Delivery]) -> list[int]:
            self.sent += msgs
            return []

    bound = 1_800_000_000_000
    rows = [
        Stored(T, i + 1, make_publication(Ref("127.0.0.1:9"), i, f"p{i}".encode(), published_ms), "tree", 1, 0)
        for i, published_ms in enumerate((bound - 5000, 0, bound - 1, bound, bound + 7, bound - 2))
    ]
    with PublicationStore(None) as store:
        deliveries = Deliveries(store)
        session = Session()
        stream = Stream(T, 0, None, session, published_from_ms=bound)  # type: ignore[arg-type]
        assert deliveries._send_batch(stream, 6, rows)
        assert [d.payload for d in session.sent] == [b"p1", b"p3", b"p4"]
        assert stream.cursor == 6 and stream.delivered == 3
        only_old = Stream(T, 0, None, Session(), published_from_ms=bound)  # type: ignore[arg-type]
        assert deliveries._send_batch(only_old, 1, rows[:1]) and only_old.cursor == 1 and only_old.delivered == 0
        everything = Stream(T, 0, None, Session())  # type: ignore[arg-type]
        assert deliveries._send_batch(everything, 6, rows) and everything.delivered == 6


@contextlib.asynccontextmanager
async def _parked_follower(tmp_path: Path) -> AsyncIterator[tuple[Client, Any, Any]]:
    """A node with a member client and a live new-only follow stream whose task waits at
    the topic's end: (the client, the subscription, the node's `Stream`)."""
    async with supervisor(tmp_path / "sup") as (srt, _), pnode(srt.ref, None) as (rt, app):
        client = Client(rt.ref)
        await client.join(T)
        async with client.subscribe(T, new_only=True) as live:
            [stream] = app.deliveries.streams[T]

            async def parked() -> bool:
                return bool(stream.parked)

            await wait_until(parked, what="the stream's task waits at the end")
            yield client, live, stream
        await client.close()


def test_a_slow_reader_costs_one_batch_and_loses_nothing(tmp_path: Path) -> None:
    """2,000 publications of 8 KiB (16 MB) while a follower does not read: the node keeps
    at most about one batch beyond the socket buffers for it, and the follower, once it
    reads, gets all 2,000 in order.  (The follower's receive buffer is kept small, as a
    slow client's would be full, so that the kernel cannot absorb the whole stream.)"""
    count, size = 2000, 8192

    async def scenario() -> None:
        async with supervisor(tmp_path / "sup") as (srt, _), pnode(srt.ref, None) as (rt, app):
            client = Client(rt.ref)
            await client.join(T)
            host, port = rt.ref.rsplit(":", 1)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
            reader, writer = await asyncio.open_connection(sock=sock)
            writer.write(
                wire.encode(Hello(ref=None, role="client")) + wire.encode(Follow(T, 0, False, True))
            )
            payload = bytes(size)
            for _ in range(0, count, 100):
                await asyncio.gather(*(client.publish(T, payload) for _ in range(100)))
            [stream] = app.deliveries.streams[T]
            assert stream.session.buffered() < 2 * (1 << 20)  # not 16 MB
            assert stream.cursor < count  # the rest waits in the store

            async def frame() -> object:
                length = wire.frame_length(await reader.readexactly(4))
                return wire.decode(await reader.readexactly(length))

            assert isinstance(await frame(), Reply)
            got = [(await frame()).local_seq for _ in range(count)]  # type: ignore[attr-defined]
            assert got == list(range(1, count + 1))
            writer.close()
            await client.close()

    run(scenario(), timeout=120)


async def ring_of_two(sup: Ref, a: Ref, b: Ref) -> tuple[Client, Client]:
    """Clients of nodes `a` and `b`, once both joined T and hold their labels."""
    ca, cb = Client(a), Client(b)
    await ca.join(T)
    await cb.join(T)

    async def ring() -> bool:
        labels = await members(sup, T)
        return len(labels) == 2 and all(labels.values())

    await wait_until(ring, what="a ring of two")
    return ca, cb


def holding(client: Client) -> Callable[[int], Callable[[], Awaitable[bool]]]:
    """`holding(client)(count)`: a condition for `wait_until`, true once the client's node
    holds at least `count` publications of T."""

    def at_least(count: int) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            body = await client.status()
            return bool(body["topics"][T]["publications"]["count"] >= count)

        return check

    return at_least


def test_under_load_a_publisher_holds_its_broadcasts_back_and_loses_nothing(tmp_path: Path) -> None:
    """`spread_hold`: publications one at a time start their arc broadcast at once; once a
    broadcast carried at least HOLD_MIN_BATCH of them, the next ones wait (at most the hold)
    and leave together; the other member gets every one; `flush` sends what waits."""

    async def scenario() -> None:
        async with (
            supervisor(tmp_path / "sup") as (srt, _),
            pnode(srt.ref, None) as (rta, a),
            pnode(srt.ref, None) as (rtb, _b),
        ):
            a.executor.hold = 0.2
            ca, cb = await ring_of_two(srt.ref, rta.ref, rtb.ref)
            held_by_b = holding(cb)

            for i in range(3):
                await ca.publish(T, f"alone {i}")
            await wait_until(held_by_b(3), what="the single publications at the other member")
            assert a.executor.holds == 0  # one at a time: never held
            sent = 3
            for burst in range(10):  # bounded: a burst that arrives in one pass releases >= 8
                await asyncio.gather(*(ca.publish(T, f"burst {burst} {k}") for k in range(2 * HOLD_MIN_BATCH)))
                sent += 2 * HOLD_MIN_BATCH
                if a.executor.holds:
                    break
            assert a.executor.holds >= 1
            await wait_until(held_by_b(sent), what="every burst at the other member")
            a.executor.hold = 60.0  # what is held from now on would wait a minute: flush must send it
            for burst in range(10):  # bounded, as above: until a burst is held
                await asyncio.gather(*(ca.publish(T, f"last {burst} {k}") for k in range(2 * HOLD_MIN_BATCH)))
                sent += 2 * HOLD_MIN_BATCH
                if a.executor.held:
                    break
            assert a.executor.held and a.executor.waiting  # acknowledged, waiting to spread
            a.flush()
            assert not a.executor.held and not a.executor.waiting
            await wait_until(held_by_b(sent), what="the flushed publications at the other member")
            await ca.close()
            await cb.close()

    run(scenario())


def test_flush_with_a_commit_in_flight_sends_what_it_releases_at_once(tmp_path: Path) -> None:
    """Shutdown while a commit is still on the store's thread (sync "full"), right after a
    release large enough to start a hold: `flush` waits for the commit, acknowledges its
    publications and sends their broadcasts at once -- nothing is left held back."""

    async def scenario() -> None:
        async with (
            supervisor(tmp_path / "sup") as (srt, _),
            pnode(srt.ref, tmp_path / "a", sync="full") as (rta, a),
            pnode(srt.ref, None) as (rtb, _b),
        ):
            assert not a.commits.inline
            a.executor.hold = 60.0  # a hold started now would outlast the test
            ca, cb = await ring_of_two(srt.ref, rta.ref, rtb.ref)
            held_by_b = holding(cb)

            await ca.publish(T, "first")
            await wait_until(held_by_b(1), what="the first publication at the other member")
            gate = threading.Event()
            a.thread.submit(gate.wait, 30)  # the store's thread waits: the next commit stays in flight
            a.executor._last_release = HOLD_MIN_BATCH  # as right after a release under load
            pending = [asyncio.ensure_future(ca.publish(T, f"in flight {k}")) for k in range(3)]

            async def in_flight() -> bool:
                return a.commits.unwritten == 3

            await wait_until(in_flight, what="three publications waiting for their commit")
            assert not any(p.done() for p in pending)  # not acknowledged before the commit
            opener = threading.Timer(0.2, gate.set)
            opener.start()
            try:
                a.flush()  # blocks until the commit in flight ends
            finally:
                gate.set()
                opener.join()
            assert a.commits.unwritten == 0
            assert not a.executor.held and not a.executor.waiting
            acks = await asyncio.wait_for(asyncio.gather(*pending), 10)
            assert all(ack.stored_by == rta.ref for ack in acks)
            await wait_until(held_by_b(4), what="the flushed publications at the other member")
            assert a.executor.holds == 0
            await ca.close()
            await cb.close()

    run(scenario())


def test_publish_errors(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with (
            supervisor(tmp_path / "sup") as (srt, _),
            pnode(srt.ref, None, max_payload_bytes=100) as (member, _),
            pnode(srt.ref, None, handover_timeout=0.3, handover_attempts=2) as (other, oapp),
        ):
            async with Client(member.ref) as client:
                await client.join(T)
                with pytest.raises(PublishError) as info:
                    await client.publish(T, bytes(101))
                assert info.value.code == "payload_too_large" and "100 bytes" in str(info.value)
                with pytest.raises(PublishError) as info:
                    await client.publish(T, bytes(wire.MAX_PAYLOAD_BYTES + 1))
                assert info.value.code == "payload_too_large"
                with pytest.raises(ClientError) as cinfo:
                    await client.publish("", b"x")
                assert cinfo.value.code == "bad_topic"

            async def member_known() -> bool:
                return member.ref in await members(srt.ref, T)

            await wait_until(member_known, what="member")
            async with Client(other.ref) as client:
                ack = await client.publish(T, b"through a non-member")
                assert ack.stored_by == member.ref and ack.publisher == other.ref
                assert ack.local_seq is None
                with pytest.raises(PublishError) as info:
                    await client.publish(Topic("empty"), b"x")
                assert info.value.code == "no_members"
            assert oapp.core.handover.counters["succeeded"] == 1
            history = await Client(member.ref).history(T)
            assert [d.payload for d in history] == [b"through a non-member"]
        with pytest.raises(PublishError) as info:
            await Client(other.ref, timeout=1).publish(T, b"x")
        assert info.value.code == "connection"

    run(scenario())


def test_cli_renders_deliveries_and_acks() -> None:
    key = bytes(range(16))
    text = Delivery(T, 3, Ref("h:1"), 7, key, b"two\nlines \\ here", 5)  # type: ignore[arg-type]
    binary = Delivery(T, 4, Ref("h:1"), 8, key, b"\xff\x00", 6)  # type: ignore[arg-type]
    assert format_delivery(text) == "#3 h:1#7 two\\nlines \\\\ here"
    assert format_delivery(binary) == "#4 h:1#8 base64:/wA="
    # text that itself begins with the marker is shown in base64 too: a line never misleads
    lookalike = Delivery(T, 5, Ref("h:1"), 9, key, b"base64:/wA=", 7)  # type: ignore[arg-type]
    shown = format_delivery(lookalike).split(" ", 2)[2]
    assert shown != "base64:/wA=" and base64.b64decode(shown.removeprefix("base64:")) == b"base64:/wA="
    as_json = json.loads(format_delivery(binary, as_json=True))
    assert as_json["payload"] is None and as_json["payload_base64"] == "/wA="
    assert as_json["key"] == key.hex() and as_json["local_seq"] == 4
    assert json.loads(format_delivery(text, as_json=True))["payload"] == "two\nlines \\ here"
    ack = Ack("news", "h:1", 7, key, "h:2", None)
    assert "handed over" in format_ack(ack) and "h:1#7" in format_ack(ack)
    assert json.loads(format_ack(ack, as_json=True))["stored_by"] == "h:2"
    assert format_ack(Ack("news", "h:1", 7, key, "h:2", 5)).endswith("stored by h:2 (local #5; durable)")
    again = Ack("news", "h:1", 7, key, "h:2", None, duplicate=True)  # nothing was handed over
    assert format_ack(again).endswith("stored by h:2 (durable, a duplicate of an earlier request)")
