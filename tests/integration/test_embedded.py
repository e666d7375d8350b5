"""A node inside the application's process (`pubsub.client.embedded`) in a ring of daemons.

Real processes on 127.0.0.1: a supervisor and two node daemons; the embedded node runs on
the test's own event loop and reaches them over TCP like any node.  Checked: publications
made through either kind of node reach both, the embedded stream delivers each exactly once
in local order; a stream resumes from its cursor after the embedded node restarts on its
data directory (catching up on what was published meanwhile); an embedded node in a TLS
cluster, with its own certificate; start-up failures and bad settings are one-line errors;
every node and stream is stopped.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from pubsub.client.embedded import EmbeddedError, EmbeddedNode
from pubsub.client.library import Client, ClientError, ConnectionLost, PublishError
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import pick_free_ports
from pubsub.ops.tlsfiles import CLIENT_NAME
from pubsub.publications.messages import Delivery
from pubsub.runtime.settings import RuntimeSettings
from pubsub.skipring.statuscheck import ring_problems

pytestmark = pytest.mark.integration

T = "embedded"
RING_TIMEOUT = 60.0
WAIT = 60.0


def free_ref() -> str:
    return f"127.0.0.1:{pick_free_ports(1)[0]}"


async def until(check: Any, what: str, timeout: float = WAIT) -> None:
    """Await `check()` (sync or async) until it is truthy, at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        await asyncio.sleep(0.1)


async def ring_of(c: LocalCluster, node: EmbeddedNode, n: int) -> None:
    """Wait until the daemons and the embedded node form a legitimate ring of n."""

    async def legitimate() -> bool:
        members, states = await asyncio.to_thread(c.snapshot, T)
        mine = ((await node.client().status()).get("topics") or {}).get(T)
        if mine is not None:
            states = {**states, node.ref: mine}
        return len(members) == n and not ring_problems(members, states)

    await until(legitimate, f"a legitimate ring of {n}", RING_TIMEOUT)


async def held_everywhere(refs: list[str], payloads: set[bytes]) -> None:
    async def complete() -> bool:
        for ref in refs:
            held = [d.payload for d in await Client(ref).history(T)]
            if len(held) != len(set(held)) or set(held) != payloads:
                return False
        return True

    await until(complete, f"{len(payloads)} publications held by {refs}")


def test_an_embedded_node_carries_publications_both_ways_exactly_once(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "cluster", 2, interval=0.2, log_level="warning") as c:
        for i in range(2):
            c.subscribe(i, T)

        async def scenario() -> None:
            async with EmbeddedNode(free_ref(), c.supervisor_ref, data_dir=tmp_path / "emb") as node:
                client = node.client()
                got: list[Delivery] = []
                async with client.subscribe(T) as sub:  # joins the topic's ring
                    reading = asyncio.ensure_future(sub.consume(got.append))
                    await ring_of(c, node, 3)
                    async with Client(c.node_refs[0]) as daemon:
                        acks = await asyncio.gather(
                            *(daemon.publish(T, f"d{i}") for i in range(30)),
                            *(client.publish(T, f"e{i}") for i in range(30)),
                        )
                    mine = acks[30:]
                    assert {a.stored_by for a in mine} == {node.ref}
                    assert all(a.durable and a.local_seq is not None and not a.duplicate for a in mine)
                    await until(lambda: len(got) >= 60, "60 deliveries on the embedded stream")
                    await asyncio.sleep(0.3)  # a repeat would arrive right behind
                    assert [d.local_seq for d in got] == list(range(1, 61))
                    payloads = {f"{k}{i}".encode() for k in "de" for i in range(30)}
                    assert {d.payload for d in got} == payloads
                    history = await client.history(T)  # a stream that ends, in memory too
                    assert [(d.local_seq, d.payload) for d in history] == [(d.local_seq, d.payload) for d in got]
                    # the daemons hold them too, and TCP clients reach the embedded node
                    await held_everywhere([*c.node_refs, node.ref], payloads)
                    assert T in (await Client(node.ref).status())["topics"]
                    await client.close()
                reading.cancel()
                await asyncio.gather(reading, return_exceptions=True)
                assert node.sessions == set()  # the node forgot every in-process client
            assert not node.running

        asyncio.run(scenario())


def test_a_stream_resumes_from_its_cursor_after_the_embedded_node_restarts(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "cluster", 2, interval=0.2, log_level="warning") as c:
        for i in range(2):
            c.subscribe(i, T)
        ref = free_ref()

        async def scenario() -> None:
            node = await EmbeddedNode(ref, c.supervisor_ref, data_dir=tmp_path / "emb").start()
            try:
                sub = await node.client().subscribe(T).open()
                got: list[Delivery] = []
                reading = asyncio.ensure_future(sub.consume(got.append))
                await ring_of(c, node, 3)
                async with Client(c.node_refs[0]) as daemon:
                    for i in range(10):
                        await daemon.publish(T, f"before{i}")
                await until(lambda: len(got) == 10, "10 deliveries before the restart")
                cursor = sub.cursor
            finally:
                await node.stop()
            with pytest.raises(ConnectionLost):  # the node's end reaches the reader
                await asyncio.wait_for(reading, 10)
            async with Client(c.node_refs[1]) as daemon:  # published while it is down
                for i in range(10):
                    await daemon.publish(T, f"after{i}")
            async with node:  # the same node started again, on its data directory
                rest: list[Delivery] = []
                async with node.client().subscribe(T, since=cursor) as resumed:
                    reading = asyncio.ensure_future(resumed.consume(rest.append))
                    await until(lambda: len(rest) >= 10, "the 10 published while it was down")
                    await asyncio.sleep(0.3)
                    reading.cancel()
                    await asyncio.gather(reading, return_exceptions=True)
                assert [d.local_seq for d in rest] == list(range(11, 21))
                assert sorted(d.payload for d in rest) == sorted(f"after{i}".encode() for i in range(10))

        asyncio.run(scenario())


def test_an_embedded_node_in_a_tls_cluster(tmp_path: Path) -> None:
    """With its own node certificate from the cluster's CA, an embedded node joins a
    cluster of TLS daemons and carries publications both ways; with a certificate that
    names someone else it refuses to start, as a daemon does."""
    with LocalCluster(tmp_path / "cluster", 2, interval=0.2, log_level="warning", tls=True) as c:
        assert c.certs is not None
        for i in range(2):
            c.subscribe(i, T)
        ref = free_ref()
        cert, key = c.certs.issue("node", ref)
        tls = RuntimeSettings(tls_ca=c.certs.ca, tls_cert=cert, tls_key=key)
        operator = RuntimeSettings(tls_ca=c.certs.ca, tls_cert=c.certs.pairs[CLIENT_NAME][0],
                                   tls_key=c.certs.pairs[CLIENT_NAME][1])

        async def scenario() -> None:
            with pytest.raises(EmbeddedError) as wrong:
                EmbeddedNode(ref, c.supervisor_ref, runtime_settings=operator)
            assert wrong.value.code == "bad_settings" and f"not a node at {ref}" in str(wrong.value)
            async with EmbeddedNode(ref, c.supervisor_ref, data_dir=tmp_path / "emb", runtime_settings=tls) as node:
                client = node.client()
                got: list[Delivery] = []
                async with client.subscribe(T) as sub:
                    reading = asyncio.ensure_future(sub.consume(got.append))
                    await ring_of(c, node, 3)
                    async with Client(c.node_refs[0]) as daemon:  # TLS: the operator's certificate
                        await daemon.publish(T, "from a daemon")
                    await client.publish(T, "from the embedded node")
                    await until(lambda: len(got) >= 2, "both publications on the embedded stream")
                    payloads = {b"from a daemon", b"from the embedded node"}
                    assert {d.payload for d in got} == payloads
                    await held_everywhere([*c.node_refs, node.ref], payloads)
                    reading.cancel()
                    await asyncio.gather(reading, return_exceptions=True)
                # its port speaks TLS only: a plain TCP client is refused
                plain = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("PUBSUB_TLS_")}
                try:
                    with pytest.raises(ClientError) as refused:
                        await Client(node.ref, timeout=5).status()
                    assert refused.value.code == "connection" and "requires TLS" in str(refused.value)
                finally:
                    os.environ.update(plain)

        asyncio.run(scenario())


def test_start_failures_are_one_line_errors_and_a_stopped_node_refuses_its_clients(tmp_path: Path) -> None:
    with LocalCluster(tmp_path / "cluster", 1, interval=0.2, log_level="warning") as c:

        async def scenario() -> None:
            with pytest.raises(EmbeddedError) as bad:
                EmbeddedNode("no-port", c.supervisor_ref)
            assert bad.value.code == "bad_address"
            with pytest.raises(EmbeddedError) as exposed:  # as the daemon's command refuses it
                EmbeddedNode(f"0.0.0.0:{pick_free_ports(1)[0]}", c.supervisor_ref)
            assert exposed.value.code == "bad_settings" and "TLS is off" in str(exposed.value)
            with socket.socket() as taken:  # the node's address is held by another socket
                taken.bind(("127.0.0.1", 0))
                taken.listen()
                port = taken.getsockname()[1]
                with pytest.raises(EmbeddedError) as busy:
                    await EmbeddedNode(f"127.0.0.1:{port}", c.supervisor_ref).start()
            assert busy.value.code == "start_failed" and "\n" not in str(busy.value)
            async with EmbeddedNode(free_ref(), c.supervisor_ref, data_dir=tmp_path / "held") as first:
                with pytest.raises(EmbeddedError) as held:  # one process per data directory
                    await EmbeddedNode(free_ref(), c.supervisor_ref, data_dir=tmp_path / "held").start()
                assert held.value.code == "start_failed"
                with pytest.raises(EmbeddedError) as twice:
                    await first.start()
                assert twice.value.code == "start_failed" and "running already" in str(twice.value)
                with pytest.raises(TypeError):  # its clients talk to it in memory
                    first.client(connector=None)
                client = first.client(timeout=7.5)
                assert client.timeout == 7.5 and "topics" in await client.status()  # answered in memory
            with pytest.raises(PublishError) as down:
                await client.publish(T, b"x")
            assert down.value.code == "not_running"
            with pytest.raises(ClientError) as unreachable:
                await client.status()
            assert unreachable.value.code == "connection"

        asyncio.run(scenario())
