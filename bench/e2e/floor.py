"""relay-floor: the cheapest deployment of pubsub's process topology, as a reference.

    python -m bench.e2e.floor INDEX N --ports P0,P1,... --db FILE

pubsub's daemons put one node process beside every subscriber process; a publication wakes
the publisher's node, then every other node along the arc broadcast tree, and every
subscriber process.  This system keeps exactly that topology and the work no member can skip
-- receive a frame, forward it inside its arc, append it to SQLite (WAL, synchronous=NORMAL,
one row per batch: pubsub's default store), hand it to its subscriber over TCP; node 0
acknowledges each publication after its commit, then spreads -- and nothing else: no
validation beyond the framing, no ring maintenance, no anti-entropy, no ordering, no message
ids, each step a few lines of Python on uvloop.  What it costs is therefore a floor for any pubsub member
written in Python on this runtime; the gap between pubsub and it is what a native
per-publication pipeline (issue 11, docs/measurements/issue11.md) could at best remove, and
its ratio to JetStream is the best the topology reaches on the same machine.

Relay i listens on its port and connects to its ring neighbours i ± 2^k (mod N) before it
prints ``ready``.  A connection starts with one byte: ``R`` (a relay's frames), ``C`` (the
publisher's frames: each is acknowledged with one byte ``A``, in order) or ``S`` (a
subscriber: it gets ``K`` once registered, then every frame).  A frame is a 4-byte
big-endian length, a 2-byte arc length and the payload; the arc is the interval broadcast
of El-Ansary et al. as pubsub's `pubsub.publications.arcs` uses it: relay i with arc length L
hands each neighbour at clockwise offset o < L (sorted) the arc up to the next such
neighbour (or to L).  Only the benchmark starts these processes, on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import struct
import sys
import time
from collections import deque
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from bench.e2e.common import run_async

HEADER = struct.Struct(">IH")  # frame length (arc + payload), arc length
ROLE_RELAY, ROLE_CLIENT, ROLE_SUBSCRIBER = b"R", b"C", b"S"
ACK, REGISTERED = b"A", b"K"
#: A frame longer than this ends its connection (the benchmark's payloads are 64 bytes).
MAX_FRAME = 1 << 20
#: Seconds a relay keeps trying to reach its neighbours, and the benchmark waits for all to be ready.
CONNECT_TIMEOUT = 30.0


def offsets(n: int) -> list[int]:
    """Clockwise offsets of a relay's neighbours in a ring of n: ±2^k mod n, sorted."""
    found: set[int] = set()
    step = 1
    while step < n:
        found |= {step % n, (n - step) % n}
        step *= 2
    return sorted(found - {0})


@cache
def children(n: int, arc: int) -> tuple[tuple[int, int], ...]:
    """(offset, arc length) of each neighbour a relay with arc length `arc` forwards to."""
    inside = [o for o in offsets(n) if o < arc]
    return tuple((o, (inside[k + 1] if k + 1 < len(inside) else arc) - o) for k, o in enumerate(inside))


def frame(arc: int, payload: bytes) -> bytes:
    return HEADER.pack(len(payload) + 2, arc) + payload


class FrameError(ValueError):
    """A frame no relay sends: too long, or an arc outside 1..N."""


class FrameCutter:
    """Cuts (arc, payload) frames out of a byte stream; FrameError for one longer than
    `MAX_FRAME`."""

    def __init__(self) -> None:
        self.rest = b""

    def cut(self, data: bytes) -> list[tuple[int, bytes]]:
        buf = self.rest + data if self.rest else data
        frames: list[tuple[int, bytes]] = []
        pos, size = 0, len(buf)
        while size - pos >= HEADER.size:
            length, arc = HEADER.unpack_from(buf, pos)
            if not 2 <= length <= MAX_FRAME:
                raise FrameError(f"a frame of {length} bytes")
            end = pos + 4 + length
            if end > size:
                break
            frames.append((arc, buf[pos + HEADER.size : end]))
            pos = end
        self.rest = buf[pos:]
        return frames


class Relay:
    """One relay: the steps of a pubsub member a publication cannot do without."""

    def __init__(self, index: int, n: int, ports: list[int], db: Path) -> None:
        self.index, self.n, self.ports = index, n, ports
        self.db = sqlite3.connect(str(db), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS batches (n INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        self.peers: dict[int, asyncio.Transport] = {}  # clockwise offset -> connection
        self.subscriber: asyncio.Transport | None = None

    def handle(self, frames: list[tuple[int, bytes]], client: asyncio.Transport | None) -> None:
        """Frames from the publisher (`client`: node 0) or from a relay: node 0 commits,
        acknowledges and spreads; a member spreads, then commits; both then deliver."""
        if client is not None:
            self.commit(frames)
            client.write(ACK * len(frames))
            self.spread(frames)
        else:
            self.spread(frames)
            self.commit(frames)
        if self.subscriber is not None:
            self.subscriber.write(b"".join([frame(0, payload) for _, payload in frames]))

    def spread(self, frames: list[tuple[int, bytes]]) -> None:
        out: dict[int, list[bytes]] = {}
        for arc, payload in frames:
            for offset, share in children(self.n, arc):
                out.setdefault(offset, []).append(frame(share, payload))
        for offset, chunks in out.items():
            self.peers[offset].write(b"".join(chunks))

    def commit(self, frames: list[tuple[int, bytes]]) -> None:
        self.db.execute("INSERT INTO batches (body) VALUES (?)", (b"".join([p for _, p in frames]),))

    async def connect_peers(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + CONNECT_TIMEOUT
        for offset in offsets(self.n):
            port = self.ports[(self.index + offset) % self.n]
            while True:
                try:
                    transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.05)
            transport.write(ROLE_RELAY)
            self.peers[offset] = transport


class Inbound(asyncio.Protocol):
    """A connection to a relay: its first byte says whose it is (module docstring)."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.role = b""
        self.transport: Any = None
        self.cutter = FrameCutter()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self.role:
            self.role, data = data[:1], data[1:]
            if self.role == ROLE_SUBSCRIBER:
                self.relay.subscriber = self.transport
                self.transport.write(REGISTERED)
        if self.role not in (ROLE_RELAY, ROLE_CLIENT, ROLE_SUBSCRIBER):
            self.transport.close()
        elif self.role != ROLE_SUBSCRIBER and data:
            try:
                frames = self.cutter.cut(data)
                if any(not 0 < arc <= self.relay.n for arc, _ in frames):
                    raise FrameError("an arc outside the ring")
            except FrameError as exc:
                print(f"closing a connection: {exc}", file=sys.stderr, flush=True)
                self.transport.close()
                return
            if frames:
                self.relay.handle(frames, self.transport if self.role == ROLE_CLIENT else None)


async def serve(relay: Relay) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Inbound(relay), "127.0.0.1", relay.ports[relay.index])
    await relay.connect_peers()
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


# --- the two clients: the benchmark's publisher and a subscriber process --------------------
class Connection(asyncio.Protocol):
    """A client connection to a relay; `on_data` gets every byte the relay sends."""

    def __init__(self, on_data: Callable[[bytes], None]) -> None:
        self.on_data = on_data
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class FloorPublisher:
    """Publishes through relay 0; `publish` returns after relay 0's acknowledgement (its
    commit), like pubsub's client after node 0's."""

    acknowledged = True

    def __init__(self, n: int) -> None:
        self.n = n
        self.waiting: deque[asyncio.Future[None]] = deque()
        self.transport: Any = None

    async def open(self, port: int) -> FloorPublisher:
        loop = asyncio.get_running_loop()
        self.transport, _ = await loop.create_connection(lambda: Connection(self._acked), "127.0.0.1", port)
        self.transport.write(ROLE_CLIENT)
        return self

    def _acked(self, data: bytes) -> None:
        for _ in range(len(data)):
            future = self.waiting.popleft()
            if not future.done():
                future.set_result(None)

    async def publish(self, payload: bytes) -> None:
        future = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        self.transport.write(frame(self.n, payload))
        await future

    async def confirm(self) -> None:
        return None

    async def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        for future in self.waiting:
            future.cancel()


async def floor_subscribe(target: str, on_payload: Callable[[bytes], None]) -> Callable[[], Any]:
    """A subscriber process of relay-floor: every payload its relay hands it."""
    host, _, port = target.rpartition(":")
    cutter = FrameCutter()
    registered = asyncio.get_running_loop().create_future()

    def on_data(data: bytes) -> None:
        if not registered.done():
            registered.set_result(None)
            data = data[1:]  # REGISTERED
        for _, payload in cutter.cut(data):
            on_payload(payload)

    transport, _ = await asyncio.get_running_loop().create_connection(
        lambda: Connection(on_data), host, int(port)
    )
    transport.write(ROLE_SUBSCRIBER)
    await registered

    async def close() -> None:
        transport.close()

    return close


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e.floor", description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=int)
    parser.add_argument("n", type=int)
    parser.add_argument("--ports", required=True, help="every relay's port, comma-separated, in ring order")
    parser.add_argument("--db", type=Path, required=True)
    args = parser.parse_args()
    ports = [int(p) for p in args.ports.split(",")]
    if len(ports) != args.n or not 0 <= args.index < args.n:
        parser.error(f"need {args.n} ports and 0 <= index < {args.n}")
    try:
        run_async(serve(Relay(args.index, args.n, ports, args.db)))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
