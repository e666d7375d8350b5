"""pubsub as a benchmarked system: a LocalCluster (a supervisor and n node processes) whose
nodes all join one topic, ready once the ring is legitimate; publishing with the client
library through node 0; node i's follow stream read by subscriber process i.  ``pubsub-tls``
is the same cluster with mutual TLS (certificates made on the fly, `LocalCluster(tls=True)`),
where every publication is signed and checked (`pubsub.node.signing`); the harness and the
subscriber processes use the cluster's client certificate (``PUBSUB_TLS_*``, which the
cluster puts in this process's environment while it runs and the subscribers inherit).

In the throughput run the subscribers are the nodes themselves: a node holds a publication
once it stored it, read from its status (README, "Status JSON": `publications.stored` is the
latest local sequence number of each topic, contiguous from 1, so it counts what the node
stored; `topics.<t>.publications.count`, the size of its trie, cross-checks it), and the
moment it held the last one is that publication's commit stamp, read back with the client
library's history (`Delivery.stored_at_ms`, the node's wall clock as that commit began).  Nothing
here reads node internals beyond that JSON and the client library.

``pubsub-embedded`` (`EmbeddedSystem`) is the same protocol with each node inside its
subscriber process (`pubsub.client.embedded`): the cluster runs only the supervisor, the
subscriber processes start the nodes, and the throughput run times the subscribers'
receipts, as for the other systems.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.e2e.common import TOPIC
from bench.e2e.drive import Publisher
from bench.e2e.systems import System
from pubsub.client.library import Client
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.members import members_of
from pubsub.ops.processes import pick_free_ports
from pubsub.skipring.statuscheck import ring_problems

RING_TIMEOUT = 300.0
START_TIMEOUT = 60.0
STATUS_TIMEOUT = 10.0


def default_interval() -> float:
    """The daemons' own default Timeout interval (RuntimeSettings.timeout_interval)."""
    try:
        from pubsub.runtime.settings import RuntimeSettings

        return float(RuntimeSettings.model_fields["timeout_interval"].default)
    except Exception:  # noqa: BLE001 - the documented default (README, Settings)
        return 0.3


def ring_ready_problems(cluster: LocalCluster, n: int, topics: Iterable[str] = (TOPIC,)) -> list[str]:
    """What keeps every topic's ring from being legitimate with n members."""
    problems: list[str] = []
    for topic, (members, states) in cluster.snapshots(list(topics)).items():
        problems += topic_problems(topic, n, members, states)
    return problems


def topic_problems(topic: str, n: int, members: dict[str, str], states: dict[str, dict[str, Any]]) -> list[str]:
    """What keeps one topic's ring from being legitimate with n members, given the
    supervisor's members and the nodes' reported states (`LocalCluster.snapshot`)."""
    problems = [] if len(members) == n else [f"{topic}: the supervisor lists {len(members)} of {n} members"]
    return problems + [f"{topic}: {p}" for p in ring_problems(members, states)]


def start_cluster(
    n: int, workdir: Path, interval: float, store_sync: str | None, topics: Iterable[str] = (TOPIC,),
    tls: bool = False,
) -> LocalCluster:
    """A started cluster whose n nodes all joined `topics`, their rings legitimate."""
    topics = list(topics)
    env = {} if store_sync is None else {"PUBSUB_STORE_SYNC": store_sync}
    cluster = LocalCluster(
        workdir, n, interval=interval, start_timeout=START_TIMEOUT, log_level="warning", admin=False, env=env,
        tls=tls,
    )
    cluster.start()
    try:
        for topic in topics:
            for i in range(n):
                cluster.subscribe(i, topic)
        cluster.poll(
            lambda: ring_ready_problems(cluster, n, topics), RING_TIMEOUT, f"legitimate rings of {n}", 0.25
        )
    except BaseException:
        cluster.stop()
        raise
    return cluster


async def statuses(refs: list[str]) -> list[dict[str, Any]]:
    """Every node's status body, concurrently (README: `status --node` JSON)."""

    async def one(ref: str) -> dict[str, Any]:
        async with asyncio.timeout(STATUS_TIMEOUT):
            return await Client(ref).status()

    return list(await asyncio.gather(*(one(ref) for ref in refs)))


def stored_count(status: dict[str, Any]) -> int:
    return int(((status.get("publications") or {}).get("stored") or {}).get(TOPIC, 0))


def trie_count(status: dict[str, Any]) -> int:
    topic = (status.get("topics") or {}).get(TOPIC) or {}
    return int((topic.get("publications") or {}).get("count", 0))


class PubsubPublisher:
    acknowledged = True

    def __init__(self, ref: str) -> None:
        self.client = Client(ref)

    async def publish(self, payload: bytes) -> None:
        await self.client.publish(TOPIC, payload)

    async def confirm(self) -> None:
        return None

    async def close(self) -> None:
        await self.client.close()


class PubsubSystem(System):
    name = "pubsub"
    holds = "stored"

    def __init__(self, interval: float | None = None, store_sync: str | None = None, tls: bool = False) -> None:
        self.interval = default_interval() if interval is None else interval
        self.store_sync = store_sync
        self.tls = tls
        self.name = "pubsub-tls" if tls else "pubsub"
        self.cluster: LocalCluster | None = None
        self.tmp: tempfile.TemporaryDirectory[str] | None = None
        self.ring_ready_s: float | None = None

    def start(self, n: int, workdir: Path) -> None:
        began = time.monotonic()
        self.cluster = start_cluster(n, workdir / "cluster", self.interval, self.store_sync, tls=self.tls)
        self.ring_ready_s = round(time.monotonic() - began, 2)

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()

    @property
    def refs(self) -> list[str]:
        assert self.cluster is not None
        return self.cluster.node_refs

    async def publisher(self, window: int) -> Publisher:
        return PubsubPublisher(self.refs[0])

    def subscriber_argv(self, i: int) -> list[str]:
        return ["pubsub", self.refs[i]]

    def node_pids(self) -> dict[str, int]:
        assert self.cluster is not None
        return {f"node-{i:02d}": d.pid for i, d in enumerate(self.cluster.nodes) if d.pid is not None}

    def server_pids(self) -> dict[str, int]:
        assert self.cluster is not None
        pid = self.cluster.supervisor.pid
        return {**self.node_pids(), **({"supervisor": pid} if pid is not None else {})}

    async def statuses(self) -> list[dict[str, Any]]:
        return await statuses(self.refs)

    async def wait_stored(
        self, targets: list[int], timeout: float, since_ns: int
    ) -> tuple[dict[int, int], dict[int, int]]:
        """Poll the nodes still short of their target (`publications.stored`) until all
        reach it or `timeout` passes.  Returns, per node that got there, the time the status
        reply showing it arrived (an upper bound) and the send time of that node's previous
        poll, or `since_ns` (when the publications began to leave) for a node complete at
        the first poll (a lower bound: a node may hold everything before the publisher has
        its last acknowledgement).  Polls every 25 ms for the first second, then every
        100 ms."""
        refs = self.refs
        pending = set(range(len(refs)))
        upper: dict[int, int] = {}
        lower: dict[int, int] = {}
        previous = dict.fromkeys(pending, since_ns)
        began = time.monotonic()
        while pending and time.monotonic() - began < timeout:
            order = sorted(pending)
            sent = time.monotonic_ns()
            bodies = await asyncio.gather(*(statuses([refs[i]]) for i in order), return_exceptions=True)
            arrived = time.monotonic_ns()
            for i, body in zip(order, bodies, strict=True):
                if not isinstance(body, BaseException) and stored_count(body[0]) >= targets[i]:
                    upper[i] = arrived
                    lower[i] = previous[i]
                    pending.discard(i)
                previous[i] = sent
            if pending:
                await asyncio.sleep(0.025 if time.monotonic() - began < 1.0 else 0.1)
        return upper, lower

    async def stored_stamps(self, targets: list[int]) -> list[int | None]:
        """Per node, the wall-clock ms at which it stored the publication it numbered
        `targets[i]` (the commit's stamp, `Delivery.stored_at_ms`), or None when it holds
        no such number."""

        async def one(ref: str, target: int) -> int | None:
            async with asyncio.timeout(STATUS_TIMEOUT):
                deliveries = await Client(ref).history(TOPIC, since=target - 1)
            return next((d.stored_at_ms for d in deliveries if d.local_seq == target), None)

        return list(await asyncio.gather(*(one(r, t) for r, t in zip(self.refs, targets, strict=True))))


class EmbeddedSystem(PubsubSystem):
    """pubsub with each subscriber's node inside its subscriber process
    (`pubsub.client.embedded`): the cluster runs only the supervisor, and subscriber process
    i runs node i, joins the topic's ring and reads the node's stream in memory.  The
    publisher reaches node 0 over TCP, as it reaches node 0's daemon in ``pubsub``; the
    throughput run counts what the subscriber processes received (the nodes are those
    processes), as for the other systems."""

    holds = "subscribers"

    def __init__(self, interval: float | None = None, store_sync: str | None = None) -> None:
        super().__init__(interval, store_sync)
        self.name = "pubsub-embedded"
        self._refs: list[str] = []
        self._data: Path | None = None

    def start(self, n: int, workdir: Path) -> None:
        env = {} if self.store_sync is None else {"PUBSUB_STORE_SYNC": self.store_sync}
        self.cluster = LocalCluster(
            workdir / "cluster", 0, interval=self.interval, start_timeout=START_TIMEOUT, log_level="warning",
            admin=False, env=env,
        )
        self.cluster.start()
        self._refs = [f"127.0.0.1:{port}" for port in pick_free_ports(n)]
        self._data = workdir / "embedded"

    @property
    def refs(self) -> list[str]:
        return self._refs

    def subscriber_argv(self, i: int) -> list[str]:
        assert self.cluster is not None and self._data is not None
        sync = [] if self.store_sync is None else ["--store-sync", self.store_sync]
        return [
            "pubsub-embedded", self._refs[i], "--supervisor", self.cluster.supervisor_ref,
            "--data-dir", str(self._data / f"node-{i:02d}"), "--interval", str(self.interval), *sync,
        ]

    async def check_subscribed(self, n: int) -> None:
        """Wait (up to `RING_TIMEOUT`) until the n nodes form a legitimate ring."""
        assert self.cluster is not None
        began = time.monotonic()
        problems: list[str] = ["not checked yet"]
        while time.monotonic() - began < RING_TIMEOUT:
            members = members_of(await asyncio.to_thread(self.cluster.supervisor_status), TOPIC)
            bodies = await statuses(self._refs)
            states = {
                ref: entry for ref, body in zip(self._refs, bodies, strict=True)
                if (entry := (body.get("topics") or {}).get(TOPIC)) is not None
            }
            problems = topic_problems(TOPIC, n, members, states)
            if not problems:
                return
            await asyncio.sleep(0.25)
        raise RuntimeError(f"no legitimate ring of {n} within {RING_TIMEOUT:g} s: {problems[:3]}")

    def node_pids(self) -> dict[str, int]:
        return {}  # the nodes are the subscriber processes
