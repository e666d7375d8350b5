"""The four systems behind one small interface: start for n subscribers (sync), prepare
(async, in the run's loop), a publisher, the subscriber workers' arguments, the pids whose
CPU time counts, stop.  One instance is one fresh deployment: nothing is shared between runs.

What each system guarantees is in `GUARANTEES`, printed with every result.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from bench.e2e.common import CHANNEL, STREAM, SUBJECT
from bench.e2e.drive import Publisher
from bench.e2e.floor import CONNECT_TIMEOUT, FloorPublisher
from bench.e2e.servers import NatsServer, RedisServer, RelayProcess, find_binary, missing_reason, version_of
from pubsub.ops.processes import pick_free_ports

SYSTEMS = (
    "pubsub", "pubsub-tls", "pubsub-embedded", "relay-floor", "nats", "jetstream", "jetstream-ordered", "redis",
)
#: pubsub's variants: name -> whether its cluster runs with TLS (and so signs every publication).
PUBSUB_SYSTEMS = {"pubsub": False, "pubsub-tls": True}
#: The NATS systems: name -> (JetStream on, consumer kind).
NATS_SYSTEMS = {"nats": (False, None), "jetstream": (True, "durable"), "jetstream-ordered": (True, "ordered")}

GUARANTEES = {
    "pubsub": (
        "acknowledged after a write to the store of one member (by default one write to its journal, "
        "in SQLite within a second; a SQLite commit fsynced only with PUBSUB_STORE_SYNC=full), then "
        "stored at every node; each subscriber's stream is gap-free and resumable"
    ),
    "pubsub-tls": (
        "pubsub as above, with mutual TLS on every connection and every publication signed by its "
        "publishing node (Ed25519 over a Merkle tree per batch) and checked by every node before "
        "it is stored, forwarded or delivered"
    ),
    "pubsub-embedded": (
        "pubsub as above, each subscriber's node running inside its subscriber process "
        "(pubsub.client.embedded: the paper's subscribers carry the publications themselves); "
        "the stream read in memory instead of over a socket; one process per subscriber, as "
        "for JetStream's consumers"
    ),
    "relay-floor": (
        "not a pub/sub system: pubsub's process topology at its cheapest (bench/e2e/floor.py) -- a "
        "relay process beside every subscriber process, relay 0 acknowledging after its SQLite "
        "commit (WAL, synchronous=NORMAL), every relay forwarding along the same arc broadcast tree, "
        "appending to SQLite and handing the payload to its subscriber; no validation beyond the "
        "framing, no ring upkeep, anti-entropy or ordering -- a floor for any pubsub member in Python on this runtime"
    ),
    "nats": (
        "NATS core: at-most-once, in memory, no acknowledgement (the publisher's flush only says "
        "the server processed the message); a slow or absent subscriber loses messages"
    ),
    "jetstream": (
        "JetStream: acknowledged (PubAck) once the server appended the message to its file "
        "store; nats-server 2.9 has no per-message fsync (it syncs on its own schedule, no "
        "sync_interval option before 2.10); one server, no replication; each subscriber a "
        "durable consumer that acknowledges every message (it resumes where it stopped, like a "
        "pubsub subscription) -- the anchor the issue's targets name"
    ),
    "jetstream-ordered": (
        "JetStream as above, but each subscriber an ordered push consumer without "
        "acknowledgements (ephemeral: it does not resume after a restart) -- lighter, for reference"
    ),
    "redis": (
        "Redis pub/sub: in memory, fire-and-forget (PUBLISH answers once the message is queued to "
        "the connected subscribers; nothing stored; a slow or absent subscriber loses it)"
    ),
}


class System:
    name = ""
    #: How the throughput run decides that a subscriber holds a publication: "subscribers"
    #: (the subscriber processes received it) or "stored" (pubsub: each node's status).
    holds = "subscribers"

    def start(self, n: int, workdir: Path) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    async def prepare(self) -> None:
        """Anything to set up once the run's event loop exists."""

    async def publisher(self, window: int) -> Publisher:
        raise NotImplementedError

    def subscriber_argv(self, i: int) -> list[str]:
        raise NotImplementedError

    async def check_subscribed(self, n: int) -> None:
        """Raise unless the server sees n subscribers (where it can tell)."""

    def server_pids(self) -> dict[str, int]:
        return {}

    def publisher_note(self) -> dict[str, Any]:
        """Counters the publisher kept (e.g. Redis publications that reached fewer than n)."""
        return {}


# --- NATS core and JetStream -----------------------------------------------------------------
class NatsPublisher:
    def __init__(self, nc: Any, js: Any | None) -> None:
        self.nc = nc
        self.js = js
        self.acknowledged = js is not None

    async def publish(self, payload: bytes) -> None:
        if self.js is not None:
            await self.js.publish(SUBJECT, payload, timeout=15)
        else:
            await self.nc.publish(SUBJECT, payload)

    async def confirm(self) -> None:
        await self.nc.flush(timeout=15)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.nc.close()


class NatsSystem(System):
    def __init__(self, name: str) -> None:
        self.name = name
        self.jetstream = NATS_SYSTEMS[name][0]
        self.server: NatsServer | None = None

    @staticmethod
    def unavailable() -> str | None:
        return missing_reason("nats-server", "nats", "nats-py")

    @staticmethod
    def versions() -> dict[str, Any]:
        import importlib.metadata as md

        with contextlib.suppress(md.PackageNotFoundError):
            return {"server": version_of(find_binary("nats-server")), "client": f"nats-py {md.version('nats-py')}"}
        return {"server": version_of(find_binary("nats-server")), "client": None}

    def start(self, n: int, workdir: Path) -> None:
        self.server = NatsServer(workdir, self.jetstream).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    async def _connect(self) -> Any:
        import nats

        assert self.server is not None
        return await nats.connect(servers=[self.server.url], allow_reconnect=False, connect_timeout=5)

    async def prepare(self) -> None:
        if not self.jetstream:
            return
        from nats.js.api import StorageType, StreamConfig

        nc = await self._connect()
        try:
            js = nc.jetstream()
            deadline = time.monotonic() + 15
            while True:  # JetStream may still be starting right after the port opens
                try:
                    await js.add_stream(StreamConfig(name=STREAM, subjects=[SUBJECT], storage=StorageType.FILE))
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
        finally:
            await nc.close()

    async def publisher(self, window: int) -> Publisher:
        nc = await self._connect()
        return NatsPublisher(nc, nc.jetstream() if self.jetstream else None)

    def subscriber_argv(self, i: int) -> list[str]:
        assert self.server is not None
        return [self.name, self.server.url]

    def server_pids(self) -> dict[str, int]:
        return {} if self.server is None else {"server": self.server.pid}


# --- Redis -----------------------------------------------------------------------------------
class RedisPublisher:
    acknowledged = True

    def __init__(self, client: Any, n: int) -> None:
        self.client = client
        self.n = n
        #: Publications Redis says reached fewer than n subscribers (its PUBLISH answer).
        self.short = 0

    async def publish(self, payload: bytes) -> None:
        receivers = await self.client.publish(CHANNEL, payload)
        if receivers < self.n:
            self.short += 1

    async def confirm(self) -> None:
        return None

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.client.aclose()


class RedisSystem(System):
    name = "redis"

    def __init__(self) -> None:
        self.server: RedisServer | None = None
        self.n = 0
        self.last: RedisPublisher | None = None

    @staticmethod
    def unavailable() -> str | None:
        return missing_reason("redis-server", "redis.asyncio", "redis")

    @staticmethod
    def versions() -> dict[str, Any]:
        import importlib.metadata as md

        with contextlib.suppress(md.PackageNotFoundError):
            return {"server": version_of(find_binary("redis-server")), "client": f"redis-py {md.version('redis')}"}
        return {"server": version_of(find_binary("redis-server")), "client": None}

    def start(self, n: int, workdir: Path) -> None:
        self.n = n
        self.server = RedisServer(workdir).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def _client(self, connections: int) -> Any:
        import redis.asyncio as aioredis

        assert self.server is not None
        return aioredis.Redis(host="127.0.0.1", port=self.server.port, max_connections=connections)

    async def publisher(self, window: int) -> Publisher:
        self.last = RedisPublisher(self._client(window), self.n)
        return self.last

    def subscriber_argv(self, i: int) -> list[str]:
        assert self.server is not None
        return ["redis", f"127.0.0.1:{self.server.port}"]

    async def check_subscribed(self, n: int) -> None:
        client = self._client(1)
        try:
            deadline = time.monotonic() + 10
            while (await client.pubsub_numsub(CHANNEL))[0][1] < n:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Redis does not list {n} subscribers of {CHANNEL}")
                await asyncio.sleep(0.05)
        finally:
            await client.aclose()

    def server_pids(self) -> dict[str, int]:
        return {} if self.server is None else {"server": self.server.pid}

    def publisher_note(self) -> dict[str, Any]:
        return {} if self.last is None else {"publish_reached_fewer_than_n": self.last.short}


# --- the floor of pubsub's topology ----------------------------------------------------------
class FloorSystem(System):
    """relay-floor (`bench.e2e.floor`): n relay processes, subscriber i reading relay i."""

    name = "relay-floor"

    def __init__(self) -> None:
        self.relays: list[RelayProcess] = []

    def start(self, n: int, workdir: Path) -> None:
        ports = pick_free_ports(n)
        self.relays = [RelayProcess(workdir, i, ports) for i in range(n)]
        try:
            for relay in self.relays:
                relay.launch()
            deadline = time.monotonic() + CONNECT_TIMEOUT
            for relay in self.relays:  # each waits for its neighbours, so all run before any is ready
                relay.wait_started(deadline)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for relay in self.relays:
            relay.stop()

    async def publisher(self, window: int) -> Publisher:
        return await FloorPublisher(len(self.relays)).open(self.relays[0].port)

    def subscriber_argv(self, i: int) -> list[str]:
        return [self.name, f"127.0.0.1:{self.relays[i].port}"]

    def server_pids(self) -> dict[str, int]:
        return {f"node-{relay.index:02d}": relay.pid for relay in self.relays if relay.process is not None}


def make_system(name: str, **pubsub_options: Any) -> System:
    if name in PUBSUB_SYSTEMS:
        from bench.e2e.pubsub_system import PubsubSystem

        return PubsubSystem(**pubsub_options, tls=PUBSUB_SYSTEMS[name])
    if name == "pubsub-embedded":
        from bench.e2e.pubsub_system import EmbeddedSystem

        return EmbeddedSystem(**pubsub_options)
    if name in NATS_SYSTEMS:
        return NatsSystem(name)
    if name == "redis":
        return RedisSystem()
    if name == "relay-floor":
        return FloorSystem()
    raise ValueError(f"unknown system {name!r}")


def unavailable(name: str) -> str | None:
    """None when the system can run here, else the reason it cannot."""
    if name in NATS_SYSTEMS:
        return NatsSystem.unavailable()
    if name == "redis":
        return RedisSystem.unavailable()
    return None


def versions(name: str) -> dict[str, Any]:
    if name in NATS_SYSTEMS:
        return NatsSystem.versions()
    if name == "redis":
        return RedisSystem.versions()
    return {}
