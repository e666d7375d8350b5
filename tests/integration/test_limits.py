"""Resource limits with real processes (issue 13, item 5): the attacks of the issue's "Why",
scaled down, against a supervisor and three nodes on 127.0.0.1 whose descriptor limit is
256 (the daemons run under ``ulimit -n 256``) and whose limits are tightened through
``PUBSUB_*`` variables:

* connections each holding an unfinished 1 MiB frame: the node's RSS grows by a fraction
  of the bytes sent, the connections beyond the shared buffer are closed (``buffer_limit``)
  and the rest at their frame deadline;
* client connections trickling a frame byte by byte: all closed once the frame deadline
  passed (``frame_deadline``);
* more idle connections from one address than its cap: the excess refused at once
  (``per_source``), the held ones closed when idle, while a client from another address
  publishes and reads and the ring stays exact;
* a publisher over its quota: refused with ``quota_rate`` / ``quota_size`` while another
  client's publications are acknowledged and reach every member.

Attackers connect from other loopback addresses (127.0.0.x, bound before connecting), so
that the honest side -- the test's own requests and the daemons' ring links, all from
127.0.0.1 -- keeps its own per-address allowance.  Every wait is bounded and on a condition.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pubsub.kernel import wire
from pubsub.kernel.control import ErrorReply, Hello
from pubsub.kernel.framing import FrameDecoder
from pubsub.kernel.message import Topic
from pubsub.ops.localcluster import LocalCluster
from pubsub.publications.messages import MsgId, Payload, PublishAck, PublishFailed, PublishRequest
from tests.cluster_checks import ring_problems

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TOPIC = "limits"
NOFILE = 256
#: The caps that follow: 256 - 64 reserved = 192 in all, 48 per source address.
PER_SOURCE = 48
LIMITS = {
    "PUBSUB_FRAME_DEADLINE": "2",
    "PUBSUB_IDLE_TIMEOUT": "3",
    "PUBSUB_HELLO_TIMEOUT": "3",
    "PUBSUB_CONN_BUFFER_BYTES": str(16 * 1024),
    "PUBSUB_INFLIGHT_BYTES": str(4 << 20),
    "PUBSUB_PUBLISH_RATE": "5",
    "PUBSUB_PUBLISH_BURST": "5",
    "PUBSUB_PUBLISH_MAX_BYTES": "4096",
}
HELLO = wire.encode(Hello(ref=None, role="client"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    workdir = tmp_path_factory.mktemp("limits")
    python = workdir / "python-nofile"
    python.write_text(f'#!/bin/sh\nulimit -n {NOFILE}\nexec "{sys.executable}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    with LocalCluster(workdir, 3, interval=0.2, admin=False, env=LIMITS, python=str(python)) as c:
        for i in range(3):
            c.subscribe(i, TOPIC)
        c.poll(lambda: ring_problems(c, {TOPIC: set(c.node_refs)}), 60, "the ring before the attacks")
        yield c


def stats(cluster: LocalCluster, which: int) -> dict[str, Any]:
    body: dict[str, Any] = cluster.node_status(which)["stats"]
    return body


def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def attacker(ref: str, source: str, *, hello: bool = True) -> socket.socket:
    """A connection to `ref` from the loopback address `source`, Hello (client) sent."""
    host, _, port = ref.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect((host, int(port)))
    if hello:
        sock.sendall(HELLO)
    return sock


def closed_by_daemon(sock: socket.socket) -> bool:
    """Whether the daemon has closed `sock` (reads what is left without blocking)."""
    sock.setblocking(False)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def assert_serving(cluster: LocalCluster, payload: str) -> None:
    """A client from 127.0.0.1 publishes through node 0 and every member holds it."""
    cluster.publish(0, TOPIC, payload)
    cluster.poll(
        lambda: [
            f"{ref} lacks {payload}" for ref, rows in cluster.histories(cluster.node_refs, TOPIC).items()
            if payload not in {row["payload"] for row in rows}
        ],
        30,
        f"{payload} at every member",
    )
    assert ring_problems(cluster, {TOPIC: set(cluster.node_refs)}) == []


def test_held_unfinished_frames_do_not_grow_the_node(cluster: LocalCluster) -> None:
    node = cluster.nodes[1]
    assert node.process is not None
    pid = node.process.pid
    before = rss_bytes(pid)
    closed_before = stats(cluster, 1).get("closed", {})
    held, body = 100, (1 << 20) - 1
    socks = []
    for k in range(held):  # from 127.0.0.10 .. 127.0.0.14, 20 each
        sock = attacker(node.ref, f"127.0.0.{10 + k // 20}")
        sock.sendall(struct.pack(">I", 1 << 20) + b"\0" * body)  # 1 MiB announced, 1 byte short
        socks.append(sock)
    try:
        wait_for(
            lambda: sum(stats(cluster, 1)["closed"].get(r, 0) - closed_before.get(r, 0)
                        for r in ("buffer_limit", "frame_deadline")) >= held,
            30, "every held frame closed (shared buffer or deadline)",
        )
        grown = rss_bytes(pid) - before
        sent = held * body
        # 100 MiB sent and held: the node holds at most the 4 MiB pool and 16 KiB each.
        assert grown < sent // 3, f"RSS grew by {grown >> 20} MiB for {sent >> 20} MiB of unfinished frames"
        closed = stats(cluster, 1)["closed"]
        assert closed.get("buffer_limit", 0) - closed_before.get("buffer_limit", 0) >= held - 8
    finally:
        for sock in socks:
            sock.close()
    assert_serving(cluster, "after held frames")


def test_trickling_connections_are_closed_within_the_deadline(cluster: LocalCluster) -> None:
    node = cluster.nodes[2]
    before = stats(cluster, 2).get("closed", {}).get("frame_deadline", 0)
    frame = wire.encode(PublishRequest(Topic(TOPIC), Payload(b"x" * 100), 1, MsgId("trickle")))
    socks = [attacker(node.ref, "127.0.0.3") for _ in range(40)]
    try:
        start = time.monotonic()
        sent = 0
        while not all(closed_by_daemon(s) for s in socks):  # one byte per connection per 0.5 s
            assert time.monotonic() - start < 30, "trickling connections still open after 30 s"
            if sent < len(frame):
                for sock in socks:
                    with contextlib.suppress(OSError):
                        sock.sendall(frame[sent : sent + 1])
                sent += 1
            time.sleep(0.5)
        assert sent < len(frame), "the frame completed: the test did not trickle"
        wait_for(lambda: stats(cluster, 2)["closed"].get("frame_deadline", 0) - before >= 40, 10,
                 "40 frame_deadline closes counted")
    finally:
        for sock in socks:
            sock.close()


def test_connections_beyond_the_cap_are_refused_while_a_client_is_served(cluster: LocalCluster) -> None:
    node = cluster.nodes[0]
    refused_before = stats(cluster, 0).get("refused", {}).get("per_source", 0)
    socks: list[socket.socket] = []
    refused = 0
    for _ in range(300):  # more idle connections than the whole descriptor limit
        try:
            sock = attacker(node.ref, "127.0.0.4")
        except OSError:
            refused += 1
            continue
        socks.append(sock)
    try:
        wait_for(lambda: stats(cluster, 0)["refused"].get("per_source", 0) - refused_before >= 300 - PER_SOURCE,
                 30, "the connections over the per-source cap refused")
        too_many = 0
        for sock in socks:
            decoder = FrameDecoder()
            sock.settimeout(0.2)
            try:
                payloads = decoder.feed(sock.recv(4096))
            except (TimeoutError, OSError):
                continue
            if payloads:
                msg = wire.decode(payloads[0])
                too_many += isinstance(msg, ErrorReply) and msg.code == "too_many_connections"
        assert too_many >= 300 - PER_SOURCE - refused
        # The node still serves a client from another address, and the ring is exact.
        assert_serving(cluster, "while flooded")
        # The held ones are closed once idle.
        wait_for(lambda: all(closed_by_daemon(s) for s in socks), 20, "the idle connections closed")
        assert stats(cluster, 0)["closed"].get("idle_timeout", 0) >= PER_SOURCE
    finally:
        for sock in socks:
            sock.close()


def _publish_raw(sock: socket.socket, decoder: FrameDecoder, n: int, size: int) -> list[Any]:
    """Send `n` publications of `size` bytes on `sock`; their answers in order."""
    frames = b"".join(
        wire.encode(PublishRequest(Topic(TOPIC), Payload(os.urandom(size)), i, MsgId(f"q-{size}-{i}")))
        for i in range(n)
    )
    sock.sendall(frames)
    answers: list[Any] = []
    sock.settimeout(10)
    while len(answers) < n:
        data = sock.recv(65536)
        assert data, "the node closed the publishing connection"
        answers.extend(wire.decode(p) for p in decoder.feed(data))
    return answers


def test_a_publisher_over_its_quota_is_refused_while_others_publish(cluster: LocalCluster) -> None:
    before = stats(cluster, 0).get("quota", {})
    sock = attacker(cluster.node_refs[0], "127.0.0.5")
    decoder = FrameDecoder()
    try:
        answers = _publish_raw(sock, decoder, 20, 100)
        codes = [a.code if isinstance(a, PublishFailed) else "ack" for a in answers]
        assert all(isinstance(a, (PublishAck, PublishFailed)) for a in answers)
        assert codes.count("ack") <= 7 and codes.count("quota_rate") >= 13, codes
        big = _publish_raw(sock, decoder, 1, 5000)[0]
        assert isinstance(big, PublishFailed) and big.code == "quota_size"
    finally:
        sock.close()
    after = stats(cluster, 0)["quota"]
    assert after.get("quota_rate", 0) - before.get("quota_rate", 0) >= 13
    assert after.get("quota_size", 0) - before.get("quota_size", 0) == 1
    assert_serving(cluster, "from an honest publisher")
