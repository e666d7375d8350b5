"""The runtime's resource limits (`pubsub.runtime.limits`) with test_net's toy application
over real TCP on 127.0.0.1, on the stock loop and on uvloop: unfinished frames beyond the
shared buffer are closed, a frame that does not arrive within its deadline and a silent
client are closed, connections over a cap are refused at once, publications over a quota
are refused with their code, and failed TLS handshakes are counted by reason.  Every wait
is on a condition under a bound."""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Callable
from pathlib import Path

from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Hello, StatusRequest
from pubsub.kernel.message import Message, Ref
from pubsub.ops.tlsfiles import ClusterCerts
from pubsub.runtime.net import Runtime
from tests.runtime import test_net
from tests.runtime.test_net import ToyApp, bound_socket, fast_settings, read_reply, running, wait_until

run = test_net.run
HELLO = wire.encode(Hello(ref=None, role="client"))


async def _client(rt: Runtime, hello: bool = True) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, _, port = rt.ref.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    if hello:
        writer.write(HELLO)
        await writer.drain()
    return reader, writer


async def _closed_with(reader: asyncio.StreamReader, timeout: float = 10.0) -> str | None:
    """The code of the ErrorReply the daemon sent before it closed (None: closed without)."""
    async with asyncio.timeout(timeout):
        data = await reader.read()
    if len(data) < 4:
        return None
    msg = wire.decode(data[4 : 4 + wire.frame_length(data[:4])])
    return msg.code if isinstance(msg, ErrorReply) else None


def test_unfinished_frames_beyond_the_shared_buffer_are_closed(run: Callable[..., None]) -> None:
    held, body = 12, 200 * 1024

    async def scenario() -> None:
        async with running(conn_buffer_bytes=16 * 1024, inflight_bytes=1 << 20) as (rt, _):
            conns = [await _client(rt) for _ in range(held)]
            for _, writer in conns:
                writer.write(struct.pack(">I", 1 << 20) + b"\x00" * body)  # 1 MiB announced
            # At most 1 MiB / (200 KiB - 16 KiB) of them fit in the pool: the rest are closed.
            await wait_until(lambda: rt.stats.closed["buffer_limit"] >= held - 5, what="closes")
            assert rt._inbound.pool.lent <= rt.settings.inflight_bytes
            codes = await asyncio.gather(*(_closed_with(r) for r, _ in conns[-2:]), return_exceptions=True)
            assert "buffer_limit" in codes
            for _, writer in conns:
                writer.close()
            await wait_until(lambda: rt._inbound.pool.lent == 0, what="the pool emptied")

    run(scenario)


def test_a_frame_must_arrive_within_its_deadline(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        async with running(frame_deadline=0.5) as (rt, _):
            reader, writer = await _client(rt)
            frame = wire.encode(StatusRequest())
            for byte in frame[:-1]:  # trickled, the last byte never sent
                writer.write(bytes([byte]))
                await asyncio.sleep(0.02)
            assert await _closed_with(reader) == "frame_deadline"
            assert rt.stats.closed["frame_deadline"] == 1
            assert not rt.stats.errors  # a limit, not bad input
            writer.close()
            # a frame that arrives whole is answered as ever
            reader, writer = await _client(rt)
            writer.write(frame)
            assert (await read_reply(reader)).kind == "reply"
            writer.close()

    run(scenario)


def test_a_silent_client_is_closed_and_an_active_one_is_not(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        async with running(idle_timeout=0.6) as (rt, _):
            silent_reader, silent = await _client(rt)
            active_reader, active = await _client(rt)
            loop = asyncio.get_running_loop()
            end = loop.time() + 1.5
            while loop.time() < end:  # one request every 0.2 s keeps it open
                active.write(wire.encode(StatusRequest()))
                assert (await read_reply(active_reader)).kind == "reply"
                await asyncio.sleep(0.2)
            assert await _closed_with(silent_reader) == "idle_timeout"
            assert rt.stats.closed["idle_timeout"] == 1
            active.write(wire.encode(StatusRequest()))
            assert (await read_reply(active_reader)).kind == "reply"
            silent.close()
            active.close()

    run(scenario)


def test_connections_over_a_cap_are_refused_at_once(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        async with running(max_connections=5, max_connections_per_source=3) as (rt, _):
            kept = [await _client(rt) for _ in range(3)]
            await wait_until(lambda: rt._admission.counts.total == 3, what="three held")
            reader, writer = await _client(rt, hello=False)
            assert await _closed_with(reader) == "too_many_connections"
            assert rt.stats.refused == {"per_source": 1}
            writer.close()
            kept[0][1].close()
            await wait_until(lambda: rt._admission.counts.total == 2, what="one released")
            reader, writer = await _client(rt)
            writer.write(wire.encode(StatusRequest()))
            assert (await read_reply(reader)).kind == "reply"
            for _, w in [*kept[1:], (reader, writer)]:
                w.close()

    run(scenario)


class QuotaApp(ToyApp):
    """Status requests count as publications of 10 bytes (the runtime's quota hooks)."""

    def publication_size(self, msg: Message) -> int | None:
        return 10 if isinstance(msg, StatusRequest) else None

    def over_quota(self, msg: Message, code: str, detail: str) -> Message:
        return ErrorReply(code=code, detail=f"quota: {detail}")


def test_publications_over_the_quota_are_refused_with_its_code(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        sock = bound_socket()
        rt = Runtime(
            QuotaApp(Ref(f"127.0.0.1:{sock.getsockname()[1]}")),
            fast_settings(publish_rate=0.01, publish_burst=3),
            sock=sock,
        )
        await rt.start()
        try:
            reader, writer = await _client(rt)
            kinds = []
            for _ in range(5):
                writer.write(wire.encode(StatusRequest()))
                reply = await read_reply(reader)
                kinds.append(reply.code if isinstance(reply, ErrorReply) else reply.kind)
            assert kinds == ["reply"] * 3 + ["quota_rate"] * 2
            assert rt.stats.quota == {"quota_rate": 2}
            writer.close()
        finally:
            await rt.stop()
            sock.close()

    run(scenario)


def test_failed_tls_handshakes_are_counted_by_reason(run: Callable[..., None], tmp_path: Path) -> None:
    sock = bound_socket()
    ref = Ref(f"127.0.0.1:{sock.getsockname()[1]}")
    certs = ClusterCerts.create(tmp_path / "ours", {ref: "node"})
    other = ClusterCerts.create(tmp_path / "other", {ref: "node"})
    cert, key = certs.pairs[ref]

    async def scenario() -> None:
        rt = Runtime(
            ToyApp(ref), fast_settings(tls_ca=certs.ca, tls_cert=cert, tls_key=key, hello_timeout=0.5), sock=sock
        )
        await rt.start()
        host, _, port = ref.rpartition(":")
        try:
            # plain pubsub frames on a TLS port
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(HELLO)
            await _closed_with(reader)
            writer.close()
            await wait_until(lambda: rt.stats.tls_failures["protocol"] == 1, what="protocol failure")
            # a certificate of another CA
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.load_cert_chain(*map(str, other.pairs[ref]))
            try:
                reader, writer = await asyncio.open_connection(host, int(port), ssl=ctx)
                writer.write(HELLO)
                await _closed_with(reader)
                writer.close()
            except (ssl.SSLError, ConnectionError):
                pass
            await wait_until(lambda: rt.stats.tls_failures["certificate"] == 1, what="certificate failure")
            # connected, never said anything: the handshake times out
            reader, writer = await asyncio.open_connection(host, int(port))
            await _closed_with(reader)
            writer.close()
            await wait_until(lambda: rt.stats.tls_failures["incomplete"] == 1, what="incomplete handshake")
            assert sum(rt.stats.tls_failures.values()) == 3
        finally:
            await rt.stop()
            sock.close()

    run(scenario)


