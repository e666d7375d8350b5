"""The runtime over mutual TLS (`pubsub.runtime.tls`), with the toy application of
test_net, on the stock loop and on uvloop: peers that hold the right certificates talk;
a daemon that dials a reference and finds another daemon's certificate there refuses the
connection and counts it; a Hello its certificate does not back is refused and counted; a
TLS client of a plain daemon is told that it does not speak TLS."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Hello, StatusRequest
from pubsub.kernel.message import Ref
from pubsub.ops.tlsfiles import ClusterCerts
from pubsub.runtime.client import RequestError, request
from pubsub.runtime.clienttls import TlsError
from pubsub.runtime.net import Runtime
from pubsub.skipring.messages import Ping
from tests.runtime import test_net
from tests.runtime.test_net import ToyApp, bound_socket, fast_settings, read_reply, wait_until

#: test_net's fixture: every scenario on the stock loop and on uvloop.
run = test_net.run


def _refs(n: int) -> tuple[list[Any], list[Ref]]:
    socks = [bound_socket() for _ in range(n)]
    return socks, [Ref(f"127.0.0.1:{s.getsockname()[1]}") for s in socks]


def _tls(certs: ClusterCerts, ref: str) -> dict[str, Path]:
    cert, key = certs.pairs[ref]
    return {"tls_ca": certs.ca, "tls_cert": cert, "tls_key": key}


def test_peers_with_their_certificates_talk(run: Callable[..., None], tmp_path: Path) -> None:
    socks, (a, b) = _refs(2)
    certs = ClusterCerts.create(tmp_path, {a: "node", b: "node"})

    async def scenario() -> None:
        apps = [ToyApp(a), ToyApp(b)]
        rts = [Runtime(app, fast_settings(**_tls(certs, app.ref)), sock=s) for app, s in zip(apps, socks, strict=True)]
        for rt in rts:
            await rt.start()
        try:
            rts[0].send(b, Ping(nonce=1))
            rts[1].send(a, Ping(nonce=2))
            await wait_until(lambda: apps[1].nonces() == [1] and apps[0].nonces() == [2], what="pings over TLS")
            assert not rts[0].stats.errors and not rts[1].stats.errors
        finally:
            for rt in rts:
                await rt.stop()

    try:
        run(scenario)
    finally:
        for s in socks:
            s.close()


def test_a_dialled_daemon_with_another_certificate_is_refused(run: Callable[..., None], tmp_path: Path) -> None:
    socks, (a, b, c) = _refs(3)
    certs = ClusterCerts.create(tmp_path, {a: "node", b: "node", c: "node"})

    async def scenario() -> None:
        # At b's address listens someone holding c's certificate.
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*map(str, certs.pairs[c]))
        ctx.load_verify_locations(cafile=str(certs.ca))
        ctx.verify_mode = ssl.CERT_REQUIRED
        hellos: list[bytes] = []

        async def impostor(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            hellos.append(await reader.read(1024))
            writer.close()

        server = await asyncio.start_server(impostor, sock=socks[1], ssl=ctx)
        app = ToyApp(a)
        rt = Runtime(app, fast_settings(**_tls(certs, a)), sock=socks[0])
        await rt.start()
        try:
            rt.send(b, Ping(nonce=1))
            await wait_until(lambda: rt.stats.errors.get("identity_mismatch", 0) >= 1, what="identity_mismatch")
            await wait_until(lambda: app.unreachable == [b], what="b reported unreachable")
            # the impostor's handler may run after the dialler has given up: wait for it
            await wait_until(lambda: len(hellos) >= 3, what="three attempts at the impostor")
            assert set(hellos) <= {b""}  # each attempt closed without a word to the impostor
            assert rt.stats.errors["identity_mismatch"] == len(hellos) == 3  # unreachable_after
        finally:
            await rt.stop()
            server.close()

    try:
        run(scenario)
    finally:
        for s in socks:
            s.close()


def test_a_hello_the_certificate_does_not_back_is_refused(run: Callable[..., None], tmp_path: Path) -> None:
    socks, (a, b) = _refs(2)
    certs = ClusterCerts.create(tmp_path, {a: "node", b: "node"})

    async def scenario() -> None:
        rt = Runtime(ToyApp(a), fast_settings(**_tls(certs, a)), sock=socks[0])
        await rt.start()
        try:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.load_verify_locations(cafile=str(certs.ca))
            ctx.load_cert_chain(*map(str, certs.pairs[b]))
            reader, writer = await asyncio.open_connection("127.0.0.1", int(a.rpartition(":")[2]), ssl=ctx)
            writer.write(wire.encode(Hello(ref=Ref("127.0.0.1:1"), role="peer")))  # b claims another ref
            reply = await read_reply(reader)
            assert isinstance(reply, ErrorReply) and reply.code == "identity_mismatch"
            assert rt.stats.errors["identity_mismatch"] == 1
            writer.close()
        finally:
            await rt.stop()

    try:
        run(scenario)
    finally:
        for s in socks:
            s.close()


def test_a_runtime_refuses_the_certificate_of_another_daemon_role(run: Callable[..., None], tmp_path: Path) -> None:
    socks, (a,) = _refs(1)
    certs = ClusterCerts.create(tmp_path, {a: "supervisor"})

    async def scenario() -> None:
        as_node = Runtime(ToyApp(a), fast_settings(**_tls(certs, a)), sock=socks[0], role="node")
        with pytest.raises(TlsError, match=f"names supervisor {a}, not a node at {a}"):
            await as_node.start()
        as_supervisor = Runtime(ToyApp(a), fast_settings(**_tls(certs, a)), sock=socks[0], role="supervisor")
        await as_supervisor.start()
        await as_supervisor.stop()

    try:
        run(scenario)
    finally:
        socks[0].close()
    with pytest.raises(ValueError, match="not 'client'"):
        Runtime(ToyApp(a), fast_settings(), role="client")


def test_plain_listening_beyond_loopback_needs_insecure(run: Callable[..., None]) -> None:
    async def scenario() -> None:
        rt = Runtime(ToyApp(Ref("0.0.0.0:1")), fast_settings())
        with pytest.raises(TlsError, match="refusing to listen"):
            await rt.start()

    run(scenario)


def test_a_tls_client_of_a_plain_daemon_is_told_it_does_not_speak_tls(
    run: Callable[..., None], tmp_path: Path
) -> None:
    (sock,), (ref,) = _refs(1)
    certs = ClusterCerts.create(tmp_path, {})
    cert, key = certs.pairs["localcluster"]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(cafile=str(certs.ca))
    ctx.load_cert_chain(str(cert), str(key))

    async def scenario() -> None:
        rt = Runtime(ToyApp(ref), fast_settings(), sock=sock)
        await rt.start()
        try:
            with pytest.raises(RequestError, match=r"TLS handshake with .* failed .*: it does not speak TLS"):
                await request(ref, StatusRequest(), 5.0, context=ctx)
        finally:
            await rt.stop()

    try:
        run(scenario)
    finally:
        sock.close()
