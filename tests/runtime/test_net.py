"""The network runtime (`pubsub.runtime.net`) with a toy application, over real TCP on 127.0.0.1.

Every scenario runs twice, on the stock asyncio loop and on uvloop (what the daemons use).
Ports are taken by binding port 0 and handing the bound socket to the runtime, every wait
polls a condition under a deadline, and every runtime is stopped even when a check fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgpack
import pytest
import uvloop

from pubsub.client.connection import ClientError, connect_checked
from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Hello, Reply, StatusRequest
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.publications.messages import JoinTopic
from pubsub.runtime.client import RequestError, request
from pubsub.runtime.net import Runtime
from pubsub.runtime.settings import RuntimeSettings
from pubsub.skipring.messages import Ping, Pong

SCENARIO_TIMEOUT = 30.0


class ToyApp:
    """Records what arrives; Ping(n) with n < 0 raises; JoinTopic(t) sends Ping to ref t."""

    def __init__(self, ref: Ref) -> None:
        self.ref = ref
        self.received: list[Message] = []
        self.unreachable: list[Ref] = []
        self.timeouts = 0

    def handle(self, msg: Message, now: float) -> list[Send]:
        if isinstance(msg, Ping) and msg.nonce < 0:
            raise RuntimeError("toy handler failure")
        self.received.append(msg)
        return []

    def timeout(self, now: float) -> list[Send]:
        self.timeouts += 1
        return []

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        self.unreachable.append(ref)
        return []

    def control(self, msg: Message, now: float) -> tuple[Message, list[Send]]:
        if isinstance(msg, StatusRequest):
            return Reply(body={"ref": self.ref, "received": len(self.received)}), []
        if isinstance(msg, JoinTopic):
            return Reply(body={"ok": True}), [Send(Ref(msg.topic), Ping(nonce=99))]
        return ErrorReply(code="unsupported", detail=msg.kind), []

    def nonces(self) -> list[int]:
        return [m.nonce for m in self.received if isinstance(m, Ping)]


def fast_settings(**overrides: Any) -> RuntimeSettings:
    values: dict[str, Any] = {
        "timeout_interval": 0.05,
        "reconnect_backoff_min": 0.01,
        "reconnect_backoff_max": 0.05,
        "connect_timeout": 1.0,
        "flush_timeout": 0.5,
        "hello_timeout": 2.0,
    }
    values.update(overrides)
    return RuntimeSettings(**values)


def bound_socket(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


def dead_ref() -> Ref:
    """A 127.0.0.1 reference on which nothing listens (a port just released; take it while
    the runtimes of the test hold their ports, or it may be one of theirs)."""
    with bound_socket() as sock:
        return Ref(f"127.0.0.1:{sock.getsockname()[1]}")


@contextlib.asynccontextmanager
async def running(port: int = 0, **overrides: Any) -> AsyncIterator[tuple[Runtime, ToyApp]]:
    sock = bound_socket(port)
    app = ToyApp(Ref(f"127.0.0.1:{sock.getsockname()[1]}"))
    rt = Runtime(app, fast_settings(**overrides), sock=sock)
    try:
        await rt.start()
        yield rt, app
    finally:
        await rt.stop()
        sock.close()


async def wait_until(cond: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await asyncio.sleep(0.01)


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Callable[[Callable[[], Awaitable[None]]], None]:
    def runner(scenario: Callable[[], Awaitable[None]]) -> None:
        async def bounded() -> None:
            async with asyncio.timeout(SCENARIO_TIMEOUT):
                await scenario()

        if request.param == "uvloop":
            uvloop.run(bounded())
        else:
            asyncio.run(bounded())

    return runner


# --- raw socket helpers ------------------------------------------------------------------------
def raw_frame(obj: object) -> bytes:
    payload = msgpack.packb(obj, use_bin_type=True)
    return struct.pack(">I", len(payload)) + payload


async def read_reply(reader: asyncio.StreamReader) -> Message:
    async with asyncio.timeout(5):
        header = await reader.readexactly(4)
        return wire.decode(await reader.readexactly(wire.frame_length(header)))


async def at_eof(reader: asyncio.StreamReader) -> bool:
    async with asyncio.timeout(5):
        return await reader.read(1) == b""


# --- delivery ----------------------------------------------------------------------------------
def test_messages_delivered_in_order_both_ways(run: Any) -> None:
    async def scenario() -> None:
        async with running() as (a, app_a), running() as (b, app_b):
            for n in range(200):
                a.send(b.ref, Ping(nonce=n))
            await wait_until(lambda: len(app_b.received) == 200, what="200 pings at b")
            assert app_b.nonces() == list(range(200))
            b.send(a.ref, Pong(nonce=7, ref=b.ref))
            await wait_until(lambda: app_a.received == [Pong(nonce=7, ref=b.ref)])
            assert a.stats.frames_out["ping"] == 200
            assert b.stats.frames_in["ping"] == 200
            assert b.stats.bytes_in["ping"] == a.stats.bytes_out["ping"] > 0
            # b answered over the connection a opened: one connection, opened once
            assert a.stats.connections_opened == 1 and b.stats.connections_opened == 0
            assert a.peer_connections(b.ref) == b.peer_connections(a.ref) == 1

    run(scenario)


def test_messages_to_own_ref_are_delivered_without_tcp(run: Any) -> None:
    async def scenario() -> None:
        async with running() as (a, app_a):
            a.send(a.ref, Ping(nonce=1))
            a.dispatch([Send(a.ref, Ping(nonce=2))])
            await wait_until(lambda: app_a.nonces() == [1, 2])
            assert a.stats.local_deliveries == 2
            assert not a.stats.frames_out and a.stats.connections_opened == 0

    run(scenario)


def test_timer_calls_timeout_periodically(run: Any) -> None:
    async def scenario() -> None:
        async with running(timeout_interval=0.02) as (_, app):
            await wait_until(lambda: app.timeouts >= 5, what="5 timeouts")

    run(scenario)


# --- one connection per pair -------------------------------------------------------------------
def test_simultaneous_connects_leave_one_connection_and_lose_nothing(run: Any) -> None:
    async def scenario() -> None:
        for _ in range(5):
            async with running() as (a, app_a), running() as (b, app_b):
                for n in range(50):  # both sides start connecting in the same loop turn
                    a.send(b.ref, Ping(nonce=n))
                    b.send(a.ref, Ping(nonce=n))
                await wait_until(
                    lambda: len(app_a.received) == 50 and len(app_b.received) == 50,
                    what="50 pings each way",
                )
                assert sorted(app_a.nonces()) == sorted(app_b.nonces()) == list(range(50))
                await wait_until(
                    lambda: a.peer_connections(b.ref) == 1 and b.peer_connections(a.ref) == 1,
                    what="one connection per pair",
                )
                # the survivor is the connection initiated by the smaller reference
                smaller = min(a.ref, b.ref)
                (conn_a,) = a._links[b.ref].conns
                (conn_b,) = b._links[a.ref].conns
                assert conn_a.initiator == conn_b.initiator == smaller
                # and it still carries traffic both ways
                a.send(b.ref, Ping(nonce=1000))
                b.send(a.ref, Ping(nonce=1000))
                await wait_until(lambda: 1000 in app_a.nonces() and 1000 in app_b.nonces())
                assert a.stats.dropped_sends == b.stats.dropped_sends == 0
                # both sides really did connect (the race happened) and one was retired
                assert a.stats.connections_opened == b.stats.connections_opened == 1

    run(scenario)


# --- failures ----------------------------------------------------------------------------------
def test_reconnects_after_the_peer_restarts(run: Any) -> None:
    async def scenario() -> None:
        async with running() as (a, _):
            async with running() as (b, app_b):
                port = int(b.ref.rsplit(":", 1)[1])
                a.send(b.ref, Ping(nonce=1))
                await wait_until(lambda: app_b.nonces() == [1])
            await wait_until(lambda: a.peer_connections(b.ref) == 0, what="a notices b is gone")
            async with running(port) as (b2, app_b2):
                assert b2.ref == b.ref
                a.send(b2.ref, Ping(nonce=2))
                await wait_until(lambda: app_b2.nonces() == [2], what="ping at restarted b")

    run(scenario)


def test_frames_queued_while_the_peer_is_down_arrive_when_it_returns(run: Any) -> None:
    async def scenario() -> None:
        async with running(unreachable_after=10_000) as (a, _):
            ref = dead_ref()  # taken while a's port is bound: never a's own
            port = int(ref.rsplit(":", 1)[1])
            for n in range(10):
                a.send(ref, Ping(nonce=n))
            await wait_until(lambda: a.stats.connect_failures >= 2, what="failed connects")
            async with running(port) as (_, app_b):
                await wait_until(lambda: app_b.nonces() == list(range(10)), what="queued pings")

    run(scenario)


def test_unreachable_peer_is_reported_once_per_episode(run: Any) -> None:
    async def scenario() -> None:
        async with running(unreachable_after=3) as (a, app):
            ref = dead_ref()  # taken while a's port is bound: never a's own
            for n in range(5):
                a.send(ref, Ping(nonce=n))
            await wait_until(lambda: app.unreachable == [ref], what="unreachable report")
            assert a.stats.peers_unreachable == 1
            assert a.stats.dropped_sends == 5
            assert a.stats.connect_failures == 3
            assert a.queued(ref) == 0
            await asyncio.sleep(0.2)  # idle: no further attempts without a new send
            assert a.stats.connect_failures == 3 and app.unreachable == [ref]
            a.send(ref, Ping(nonce=9))
            await wait_until(lambda: app.unreachable == [ref, ref], what="second report")
            assert a.stats.dropped_sends == 6

    run(scenario)


def test_send_queue_is_bounded_and_drops_are_counted(run: Any) -> None:
    async def scenario() -> None:
        async with running(unreachable_after=10_000, send_queue_bound=5) as (a, _):
            ref = dead_ref()  # taken while a's port is bound: never a's own
            for n in range(20):
                a.send(ref, Ping(nonce=n))
            assert a.queued(ref) == 5
            assert a.stats.dropped_sends == 15

    run(scenario)


def test_handler_exceptions_are_counted_and_the_runtime_keeps_serving(run: Any) -> None:
    async def scenario() -> None:
        async with running() as (a, _), running() as (b, app_b):
            a.send(b.ref, Ping(nonce=-1))
            a.send(b.ref, Ping(nonce=1))
            await wait_until(lambda: app_b.nonces() == [1])
            assert b.stats.errors["handler_error"] == 1
            b.send(b.ref, Ping(nonce=-2))  # locally delivered, same protection
            await wait_until(lambda: b.stats.errors["handler_error"] == 2)

    run(scenario)


def test_stop_flushes_queued_frames(run: Any) -> None:
    async def scenario() -> None:
        async with running() as (b, app_b):
            async with running() as (a, _):
                a.send(b.ref, Ping(nonce=0))
                await wait_until(lambda: app_b.nonces() == [0])
                for n in range(1, 1000):
                    a.send(b.ref, Ping(nonce=n))
            # a stopped right after queueing: everything still arrives
            await wait_until(lambda: len(app_b.received) == 1000, what="flushed pings")
            assert app_b.nonces() == list(range(1000))

    run(scenario)


# --- bad input from a raw socket ---------------------------------------------------------------
def test_bad_input_is_counted_answered_and_survived(run: Any) -> None:
    async def scenario() -> None:
        async with running(max_frame_bytes=4096) as (b, app_b), running() as (a, _):
            host, port = "127.0.0.1", int(b.ref.rsplit(":", 1)[1])

            # a length prefix over the maximum: refused from the header, then closed
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(struct.pack(">I", 4097) + b"x" * 100)
            reply = await read_reply(reader)
            assert isinstance(reply, ErrorReply) and reply.code == "frame_too_large"
            assert await at_eof(reader)
            writer.close()

            # garbage, an unknown type and a bad field: each answered, connection kept open
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(struct.pack(">I", 3) + b"\xc1\xc1\xc1")
            assert (await read_reply(reader)).code == "bad_msgpack"  # type: ignore[attr-defined]
            writer.write(raw_frame({"v": 1, "t": "no_such_message"}))
            assert (await read_reply(reader)).code == "unknown_type"  # type: ignore[attr-defined]
            writer.write(raw_frame({"v": 1, "t": "ping", "nonce": "x"}))
            assert (await read_reply(reader)).code == "bad_field"  # type: ignore[attr-defined]
            writer.write(raw_frame([1, 2, 3]))
            assert (await read_reply(reader)).code == "not_a_map"  # type: ignore[attr-defined]
            writer.write(wire.encode(Hello(ref=None, role="client")) + wire.encode(StatusRequest()))
            reply = await read_reply(reader)
            assert isinstance(reply, Reply) and reply.body["ref"] == b.ref
            writer.close()

            # a frame cut short by EOF
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(struct.pack(">I", 100) + b"\x81" * 10)
            writer.write_eof()
            await wait_until(lambda: b.stats.errors["truncated_frame"] == 1)
            writer.close()

            # a protocol message before Hello: refused and closed
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(wire.encode(Ping(nonce=5)))
            reply = await read_reply(reader)
            assert isinstance(reply, ErrorReply) and reply.code == "no_hello"
            assert await at_eof(reader)
            writer.close()

            errors = b.stats.errors
            assert errors["frame_too_large"] == 1 and errors["bad_msgpack"] == 1
            assert errors["unknown_type"] == 1 and errors["bad_field"] == 1
            assert errors["not_a_map"] == 1 and errors["no_hello"] == 1
            assert app_b.received == []  # none of it reached the core

            # still serving peers and clients
            a.send(b.ref, Ping(nonce=3))
            await wait_until(lambda: app_b.nonces() == [3])
            reply = await request(b.ref, StatusRequest(), timeout=5)
            assert isinstance(reply, Reply) and reply.body["received"] == 1

    run(scenario)


def test_fuzzed_frames_never_break_the_runtime(run: Any, caplog: pytest.LogCaptureFixture) -> None:
    import random

    async def scenario() -> None:
        rng = random.Random(1234)
        async with running() as (b, app_b):
            port = int(b.ref.rsplit(":", 1)[1])
            for _ in range(20):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
                writer.write(struct.pack(">I", len(blob)) + blob)
                with contextlib.suppress(Exception):
                    await read_reply(reader)
                writer.close()
            reply = await request(b.ref, StatusRequest(), timeout=5)
            assert isinstance(reply, Reply)
            assert sum(b.stats.errors.values()) >= 20
            assert b.stats.errors["handler_error"] == 0 and b.stats.errors["runtime_error"] == 0
            # logging is rate-limited per source and code, not one line per bad frame
            bad = [r for r in caplog.records if "bad input" in r.getMessage()]
            assert 0 < len(bad) <= len(b.stats.errors)

    run(scenario)


# --- clients -----------------------------------------------------------------------------------
def test_control_requests_get_replies_and_their_sends_go_out(run: Any) -> None:
    async def scenario() -> None:
        async with running() as (a, _), running() as (b, app_b):
            reply = await request(a.ref, JoinTopic(topic=Topic(b.ref)), timeout=5)
            assert isinstance(reply, Reply) and reply.body == {"ok": True}
            await wait_until(lambda: app_b.nonces() == [99])
            reply = await request(a.ref, Ping(nonce=1), timeout=5)
            assert isinstance(reply, ErrorReply) and reply.code == "unsupported"

    run(scenario)


def test_request_errors_are_clear(run: Any) -> None:
    async def scenario() -> None:
        with pytest.raises(RequestError, match="connection refused"):
            await request(dead_ref(), StatusRequest(), timeout=5)
        with pytest.raises(RequestError, match="bad address"):
            await request("nonsense", StatusRequest(), timeout=5)

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # never answers
            writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        try:
            port = server.sockets[0].getsockname()[1]
            with pytest.raises(RequestError, match="no reply"):
                await request(f"127.0.0.1:{port}", StatusRequest(), timeout=0.2)
        finally:
            server.close()

    run(scenario)


def test_a_port_that_speaks_http_is_named_as_another_protocol(run: Any) -> None:
    """Pointing a request or a client at an HTTP port (a node's metrics, say) gets an error
    that quotes the answer's first bytes, for `request` and the client library alike."""

    async def http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def scenario() -> None:
        server = await asyncio.start_server(http, "127.0.0.1", 0)
        try:
            addr = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
            expected = rf"{addr} did not answer like a pubsub daemon: .*'HTTP': another protocol"
            with pytest.raises(RequestError, match=expected):
                await request(addr, StatusRequest(), timeout=5)
            with pytest.raises(ClientError, match=expected) as caught:
                await connect_checked(addr, 5, wire.DEFAULT_MAX_FRAME, "node")
            assert caught.value.code == "not_pubsub"
        finally:
            server.close()

    run(scenario)


def test_rate_limited_link_keeps_order_holds_back_and_flushes_when_lifted(run: Any) -> None:
    """A per-link rate limit (the broker's ``link_rate``): at most R frames per second leave,
    the rest wait in order and count as queued; lifting the limit lets them all go, in order;
    a rate that is not a positive number is refused."""

    async def scenario() -> None:
        async with running() as (a, _), running() as (b, app_b):
            a.set_rate(b.ref, 20.0)
            assert a.rate(b.ref) == 20.0
            for n in range(10):
                a.send(b.ref, Ping(nonce=n))
            await wait_until(lambda: len(app_b.nonces()) >= 2, what="first frames at 20/s")
            queued, enqueued, written, dropped = a.link_counters(b.ref)
            assert enqueued == 10 and dropped == 0
            assert queued >= 5 and written <= 5  # the limit holds the rest back
            a.set_rate(b.ref, None)
            await wait_until(lambda: len(app_b.nonces()) == 10, what="the rest once lifted")
            assert app_b.nonces() == list(range(10))
            assert a.link_counters(b.ref) == (0, 10, 10, 0)
            assert a.enqueued_by_kind(b.ref) == {"ping": 10}
            for bad in (0.0, -1.0, float("inf"), float("nan")):
                with pytest.raises(ValueError):
                    a.set_rate(b.ref, bad)
            with pytest.raises(ValueError):
                a.set_rate(Ref("no-port"), 1.0)

    run(scenario)


def test_link_counters_count_drops_of_a_full_queue(run: Any) -> None:
    async def scenario() -> None:
        async with running(unreachable_after=10_000, send_queue_bound=5) as (a, _):
            ref = dead_ref()  # taken while a's port is bound: never a's own
            a.set_rate(ref, 1.0)
            for n in range(7):
                a.send(ref, Ping(nonce=n))
            assert a.link_counters(ref) == (5, 7, 0, 2)

    run(scenario)


class Chatty(ToyApp):
    """Each Timeout sends three Pings to every ref in `targets` and one to itself."""

    def __init__(self, ref: Ref) -> None:
        super().__init__(ref)
        self.targets: list[Ref] = []
        self.round = 0

    def timeout(self, now: float) -> list[Send]:
        self.round += 1
        sends = [Send(t, Ping(nonce=self.round * 10 + i)) for t in self.targets for i in range(3)]
        return sends + [Send(self.ref, Ping(nonce=-0))]


def test_a_timeout_sends_one_frame_per_peer(run: Any) -> None:
    """What one Timeout sends to one peer travels as one bundle frame; the receiver handles
    every message in order as if it had come alone."""

    async def scenario() -> None:
        sock = bound_socket()
        app = Chatty(Ref(f"127.0.0.1:{sock.getsockname()[1]}"))
        a = Runtime(app, fast_settings(timeout_interval=0.05), sock=sock)
        try:
            async with running() as (b, app_b), running() as (c, app_c):
                app.targets = [b.ref, c.ref]
                await a.start()
                await wait_until(lambda: len(app_b.nonces()) >= 9 and len(app_c.nonces()) >= 9, what="three rounds")
                await a.stop()
                rounds = a.stats.frames_out["bundle"] // 2
                assert a.stats.frames_out.get("ping", 0) == 0  # nothing went alone to a peer
                assert a.stats.bundled_out["ping"] == 6 * rounds
                for peer, received in ((b, app_b.nonces()), (c, app_c.nonces())):
                    assert received == sorted(received)  # in order
                    assert peer.stats.bundled_in["ping"] == len(received) == 3 * peer.stats.frames_in["bundle"]
                    assert peer.stats.frames_in.get("ping", 0) == 0
        finally:
            await a.stop()
            sock.close()

    run(scenario)


def test_bundles_are_checked_like_frames(run: Any) -> None:
    """A bundle's messages meet every check a frame meets: garbage and operator requests
    inside it are refused and counted, a bundle inside a bundle too, and a client may not
    send one."""

    async def scenario() -> None:
        from pubsub.kernel.control import Bundle, ChaosRequest

        async with running() as (b, app_b):
            host, port = b.ref.rsplit(":", 1)
            reader, writer = await asyncio.open_connection(host, int(port))
            inner = [
                wire.encode_payload(Ping(nonce=1)),
                b"\xc1garbage",
                wire.encode_payload(ChaosRequest(action="crash")),
                wire.encode_payload(Bundle([wire.encode_payload(Ping(nonce=2))])),
                wire.encode_payload(Ping(nonce=3)),
            ]
            writer.write(wire.encode(Hello(ref=Ref("127.0.0.1:1"), role="peer")) + wire.encode(Bundle(inner)))
            await writer.drain()
            await wait_until(lambda: app_b.nonces() == [1, 3], what="the two good pings")
            errors = b.stats.errors
            assert errors["bad_msgpack"] == 1 and errors["forbidden"] == 1 and errors["nested_bundle"] == 1
            writer.close()
            reader2, writer2 = await asyncio.open_connection(host, int(port))
            writer2.write(wire.encode(Hello(ref=None, role="client")) + wire.encode(Bundle(inner[:1])))
            await writer2.drain()
            await wait_until(lambda: b.stats.errors["bundle_from_client"] == 1, what="client refused")
            assert app_b.nonces() == [1, 3]
            writer2.close()

    run(scenario)


def test_a_client_that_does_not_read_its_replies_is_not_served_until_it_reads(run: Callable[..., None]) -> None:
    """Requests from a client that leaves its replies unread are taken only until the replies
    fill the connection's high-water mark; the rest wait (reading pauses, so the client's
    sends back up) and are all answered, in order, once the client reads."""

    async def scenario() -> None:
        async with running() as (b, app_b):
            host, port = b.ref.rsplit(":", 1)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # replies back up soon
            sock.connect((host, int(port)))
            sock.setblocking(False)
            try:
                request_frame = wire.encode(StatusRequest())
                pending = wire.encode(Hello(ref=None, role="client")) + request_frame * 100_000
                loop = asyncio.get_running_loop()
                sent = 0
                deadline = loop.time() + 10
                # Send until the runtime stops taking requests (its reading paused, the socket
                # buffers full): each `send` is bounded, and so is the loop.
                while sent < len(pending) and loop.time() < deadline:
                    try:
                        sent += sock.send(pending[sent : sent + 65536])
                    except BlockingIOError:
                        if any(c.reading_paused for c in b._conns):
                            break
                        await asyncio.sleep(0.01)
                await wait_until(lambda: any(c.reading_paused for c in b._conns), 10, "reading paused")
                requests = (sent - len(wire.encode(Hello(ref=None, role="client")))) // len(request_frame)
                answered = b.stats.frames_out["reply"]
                assert 0 < answered < requests, (answered, requests)
                # Now read: every request sent so far is answered, in order.
                replies: list[Message] = []
                decoder = FramedReplies()
                deadline = loop.time() + 15
                while len(replies) < requests and loop.time() < deadline:
                    try:
                        data = sock.recv(1 << 20)
                    except BlockingIOError:
                        await asyncio.sleep(0.005)
                        continue
                    assert data, "the runtime closed the connection"
                    replies += decoder.feed(data)
                assert len(replies) >= requests
                assert all(isinstance(r, Reply) and r.body["ref"] == b.ref for r in replies)
                assert not b.stats.errors
            finally:
                sock.close()

    run(scenario)


class FramedReplies:
    """Messages out of a byte stream (the runtime's framing)."""

    def __init__(self) -> None:
        from pubsub.kernel.framing import FrameDecoder

        self._decoder = FrameDecoder(wire.DEFAULT_MAX_FRAME)

    def feed(self, data: bytes) -> list[Message]:
        return [wire.decode(payload) for payload in self._decoder.feed(data)]
