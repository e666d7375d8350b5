"""The tco overlay with real processes: ``pubsub cluster up --overlay tco`` and a 24-node
cluster of the shared ``pubsub supervisor`` / ``pubsub node`` daemons with ``--overlay tco``,
on real TCP over 127.0.0.1 (paper 001's topic-connected overlay, kept by the supervisor).

The second test is the acceptance run: 24 nodes, 40 topics, each node in 5-15 of them
(seeded).  Publications go through the client API to several topics while 4 nodes are killed
with SIGKILL, then more follow (one topic's through a non-member: a hand-over).  Afterwards
every live subscriber must hold every acknowledged publication of its topics, and the edges
the live nodes report in their status must form a TCO by the independent checker
(`tests.tco.checker.split_topics`, no code shared with `pubsub.tco`).  Then the supervisor is
killed with SIGKILL and restarted on its data directory: its record must come back with
exactly the edges it held, and no audit or table of the new process may change one.

The victims are nodes that publish nothing: a publication is published through a member,
which stores it before it acknowledges, and a node killed without a restart takes with it
what only it held, whatever the overlay.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pubsub.client.library import Ack, Client, ClientError
from pubsub.ops.detached import read_manifest
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import ClusterError
from tests.cluster_checks import assert_stays
from tests.ops.test_cluster_cmd import cluster_cmd, cluster_dir, entries, exited, status_json
from tests.tco.checker import split_topics

pytestmark = pytest.mark.integration

__all__ = ["cluster_dir"]  # the fixture, used by name below

#: The daemons' Timeout interval, seconds.
INTERVAL = 0.3
#: Seconds the cluster may take to agree again after a change: the suspects' probes (2 s),
#: the supervisor's repairs, its tables, and anti-entropy over the repaired edges -- on a
#: machine that `make test` keeps busy with other tests.
SETTLE = 60.0
N_NODES, N_TOPICS, TOPICS_PER_NODE = 24, 40, (5, 15)
#: The seed of the topics each node joins and of the choices below.
SEED = 1
N_VICTIMS = 4
#: Topics published on, and publications per topic before, during and after the kills.
N_PUBLISHED, BEFORE, AFTER = 6, 3, 4

#: Seconds a status or history request may go unanswered before that is a failure: a daemon
#: answers a client's first request within 1 s or the client gives up (the client library's
#: handshake bound), and a supervisor busy with a burst of repairs on a loaded machine can
#: take longer than that once; asked again, it answers.
PATIENCE = 15.0

Topics = Mapping[str, frozenset[str]]
T = TypeVar("T")


def patiently(call: Callable[[], T], what: str) -> T:
    """`call()`, asked again while a daemon does not answer (ClusterError, ClientError), for
    at most PATIENCE seconds."""
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            return call()
        except (ClusterError, ClientError) as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: no answer for {PATIENCE:g} s: {exc}") from exc
            time.sleep(0.2)


def assignment(refs: list[str], rng: random.Random) -> dict[str, frozenset[str]]:
    """Each node's topics: 5 to 15 of the 40, uniformly."""
    names = [f"t{i:02d}" for i in range(N_TOPICS)]
    return {ref: frozenset(rng.sample(names, rng.randint(*TOPICS_PER_NODE))) for ref in refs}


def subscribers(wanted: Topics) -> dict[str, set[str]]:
    by_topic: dict[str, set[str]] = {}
    for ref, topics in wanted.items():
        for topic in topics:
            by_topic.setdefault(topic, set()).add(ref)
    return by_topic


def reported_edges(bodies: Mapping[str, Mapping[str, Any]]) -> tuple[set[tuple[str, str]], list[str]]:
    """The edges the nodes report in their status (``neighbours``: ref -> shared topics), and
    what is wrong with them: an edge reported from one end only, or with other shared
    topics at its two ends."""
    held = {ref: dict(body.get("neighbours") or {}) for ref, body in bodies.items()}
    edges, problems = set(), []
    for ref, neighbours in held.items():
        for other, shared in neighbours.items():
            edges.add((min(ref, other), max(ref, other)))
            back = held.get(other, {}).get(ref) if other in held else None
            if back is None:
                problems.append(f"{ref} holds {other} as a neighbour, which does not hold it back")
            elif sorted(back) != sorted(shared):
                problems.append(f"{ref} shares {sorted(shared)} with {other}, which says {sorted(back)}")
    return edges, problems


def tco_problems(cluster: LocalCluster, wanted: Topics) -> list[str]:
    """Why the live nodes `wanted` (ref -> topics) do not hold a TCO of the supervisor's ([] if
    they do), by the independent checker on the edges the nodes report, by their tables
    against the supervisor's, and by the overlay's own check of every topic."""
    sup = patiently(cluster.supervisor_status, "the supervisor's status")
    tables = sup.get("tables") or {}
    problems = []
    if set(tables) != set(wanted):
        problems.append(
            f"the supervisor holds tables of {len(tables)} nodes: missing {sorted(set(wanted) - set(tables))}, "
            f"extra {sorted(set(tables) - set(wanted))}"
        )
    bodies = patiently(lambda: cluster.node_statuses(sorted(wanted)), "the live nodes' status")
    for ref, topics in sorted(wanted.items()):
        body, table = bodies[ref], tables.get(ref) or {}
        if body.get("table_topics") != sorted(topics):
            problems.append(f"{ref}: its table holds topics {body.get('table_topics')}, it joined {sorted(topics)}")
        if table.get("topics") != sorted(topics):
            problems.append(f"{ref}: the supervisor holds it in {table.get('topics')}, it joined {sorted(topics)}")
        if body.get("neighbours") != table.get("neighbours"):
            problems.append(f"{ref}: holds {body.get('neighbours')}, the supervisor {table.get('neighbours')}")
    return problems + graph_problems(cluster, wanted, bodies)


def graph_problems(cluster: LocalCluster, wanted: Topics, bodies: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What the live nodes `wanted` report wrong as a general-graph overlay (tco, omen): each
    topic configured and reachable, every edge held from both ends with the same topics,
    no edge to a node that is not live, the independent checker's TCO, and the overlay's
    own check of every topic."""
    problems = []
    for ref, topics in sorted(wanted.items()):
        for topic in sorted(topics):
            state = (bodies[ref].get("topics") or {}).get(topic) or {}
            if not state.get("configured") or state.get("unreachable"):
                problems.append(f"{ref}: {topic} is not configured or has unreachable neighbours: {state}")
    edges, one_sided = reported_edges(bodies)
    problems += one_sided
    strangers = sorted({ref for edge in edges for ref in edge} - set(wanted))
    if strangers:
        problems.append(f"live nodes still hold neighbours that are not live members: {strangers}")
    else:
        split = split_topics(wanted, edges)
        if split:
            problems.append(f"the reported edges split topics (topic: parts): {split}")
    snapshots = patiently(lambda: cluster.snapshots(sorted(subscribers(wanted))), "the topics' snapshots")
    for topic, (_, states) in snapshots.items():
        problems += [f"{topic}: {p}" for p in cluster.problems(topic, states)]
    return problems


async def join_all(wanted: Topics) -> None:
    """Every node joins its topics through the client API (the nodes side by side)."""

    async def one(ref: str, topics: Iterable[str]) -> None:
        async with Client(ref) as client:
            for topic in sorted(topics):
                await client.join(topic)

    await asyncio.gather(*(one(ref, topics) for ref, topics in wanted.items()))


def histories(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], set[tuple[str, int, bytes]]]:
    """(ref, topic) -> what the node holds of the topic, as (publisher, seq, key)."""

    async def one(ref: str, topic: str) -> set[tuple[str, int, bytes]]:
        async with Client(ref) as client:
            return {(d.publisher, d.seq, d.key) for d in await client.history(topic)}

    async def every(wanted: list[tuple[str, str]]) -> list[set[tuple[str, int, bytes]]]:
        return await asyncio.gather(*(one(ref, topic) for ref, topic in wanted))

    wanted = sorted(set(pairs))
    return patiently(lambda: dict(zip(wanted, asyncio.run(every(wanted)), strict=True)), "the histories")


def lacking(acked: Mapping[str, list[Ack]], wanted: Topics) -> list[str]:
    """Every live subscriber (of `wanted`) that lacks an acknowledged publication of its topics."""
    pairs = [(ref, topic) for topic in acked for ref in subscribers(wanted).get(topic, ())]
    held = histories(pairs)
    problems = []
    for (ref, topic), have in sorted(held.items()):
        missing = {(a.publisher, a.seq, a.key) for a in acked[topic]} - have
        if missing:
            shown = sorted(f"{p}#{s}" for p, s, _ in missing)
            problems.append(f"{ref} lacks {len(missing)} of {topic}: {shown[:4]}")
    return problems


class Publishing(threading.Thread):
    """Publications through the client API, round robin over `publishers` (topic -> the
    member it publishes through), until `stop` is set; the acknowledgements by topic."""

    def __init__(self, publishers: Mapping[str, str]) -> None:
        super().__init__(name="publishing", daemon=True)
        self.publishers = dict(publishers)
        self.acked: dict[str, list[Ack]] = {t: [] for t in publishers}
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.unsent = 0

    def run(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            self.error = exc

    async def _run(self) -> None:
        clients = {topic: Client(ref) for topic, ref in self.publishers.items()}
        try:
            i = 0
            while not self.stop.is_set():
                for topic, client in clients.items():
                    try:
                        self.acked[topic].append(await client.publish(topic, f"{topic} during the kills {i}"))
                    except ClientError as exc:
                        if exc.code != NOT_SENT:
                            raise
                        self.unsent += 1  # not acknowledged, so not looked for
                        await client.close()
                        clients[topic] = Client(self.publishers[topic])
                i += 1
                await asyncio.sleep(0.05)
        finally:
            for client in clients.values():
                await client.close()

    def count(self) -> int:
        return sum(len(acks) for acks in self.acked.values())


#: The one ClientError a publication is sent again after: the connection's handshake was not
#: answered within its 1 s bound (a loaded machine), so nothing was sent on it.
NOT_SENT = "not_pubsub"


def publish(ref: str, topic: str, payloads: list[str]) -> list[Ack]:
    """Each payload published through `ref`, acknowledged, in order."""

    async def send() -> list[Ack]:
        acks: list[Ack] = []
        deadline = time.monotonic() + PATIENCE
        while len(acks) < len(payloads):
            try:
                async with Client(ref) as client:
                    while len(acks) < len(payloads):
                        acks.append(await client.publish(topic, payloads[len(acks)]))
            except ClientError as exc:
                if exc.code != NOT_SENT or time.monotonic() > deadline:
                    raise
        return acks

    return asyncio.run(send())


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.05)


def supervisor(cluster: LocalCluster) -> dict[str, Any]:
    return patiently(cluster.supervisor_status, "the supervisor's status")


def edges_of(sup: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A supervisor status's edges: per node its neighbours (``tables``), per topic its edges."""
    tables = {ref: table["neighbours"] for ref, table in (sup.get("tables") or {}).items()}
    topics = {topic: entry["edges"] for topic, entry in (sup.get("topics") or {}).items()}
    return tables, topics


# --- the command ---------------------------------------------------------------------------------
def test_cluster_up_runs_the_tco_overlay(cluster_dir: Path) -> None:
    """`pubsub cluster up --overlay tco`: every daemon runs tco, status judges it by the tco
    overlay's check, a publication reaches every member, a dead node is repaired around, and
    down stops everything."""
    done = cluster_cmd(cluster_dir, "up", "--overlay", "tco", "-n", "5", "--topics", "a,b", "--interval", "0.2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(tco overlay)" in done.stdout, done.stdout
    doc = read_manifest(cluster_dir)
    assert doc["overlay"] == "tco"
    code, report = status_json(cluster_dir)
    assert code == 0 and report["overlay"] == "tco" and report["healthy"], report
    assert all(report["topics"][t]["legitimate"] and report["topics"][t]["members"] == 5 for t in ("a", "b"))
    text = cluster_cmd(cluster_dir, "status")
    assert "topic a: 5 members, database legitimate, tco legitimate" in text.stdout, text.stdout

    refs = [n["ref"] for n in doc["nodes"]]
    acked = publish(refs[0], "a", ["hello", "tco"])
    victim = next(e for e in entries(cluster_dir) if e.ref == refs[4])
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    live = {ref: frozenset({"a", "b"}) for ref in refs[:4]}
    deadline = time.monotonic() + SETTLE
    while True:
        code, report = status_json(cluster_dir)
        problems = [] if report["topics"]["a"]["members"] == 4 else ["the supervisor still lists the dead node"]
        problems += [p for t in ("a", "b") for p in report["topics"][t]["problems"]]
        problems += lacking({"a": acked}, live)
        if not problems:
            break
        assert time.monotonic() < deadline, problems[:5]
        time.sleep(0.3)
    assert code == 3 and not report["all_running"]  # up, but one daemon is not running

    pids = [e.pid for e in entries(cluster_dir) if e.pid is not None]
    assert cluster_cmd(cluster_dir, "down").returncode == 0
    assert all(exited(pid) for pid in pids)


# --- the acceptance run --------------------------------------------------------------------------
def test_a_tco_cluster_of_24_nodes_survives_kills_and_a_supervisor_restart(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    with LocalCluster(tmp_path / "cluster", N_NODES, interval=INTERVAL, overlay="tco") as cluster:
        wanted = assignment(cluster.node_refs, rng)
        by_topic = subscribers(wanted)
        assert len(by_topic) == N_TOPICS and all(len(s) >= 2 for s in by_topic.values()), by_topic
        asyncio.run(join_all(wanted))
        cluster.poll(lambda: tco_problems(cluster, wanted), SETTLE, "the TCO of the 24 nodes")

        # Several topics, each published through one of its members; the victims are
        # nodes that publish nothing, the ones of highest degree first, as long as every
        # published topic keeps two live subscribers.
        degree = {ref: len(t["neighbours"]) for ref, t in supervisor(cluster)["tables"].items()}
        published = rng.sample(sorted(t for t, s in by_topic.items() if len(s) >= 5), N_PUBLISHED)
        publishers: dict[str, str] = {}
        for topic in published:
            fresh = sorted(by_topic[topic] - set(publishers.values())) or sorted(by_topic[topic])
            publishers[topic] = rng.choice(fresh)
        victims: list[str] = []
        for ref in sorted(set(wanted) - set(publishers.values()), key=lambda r: (-degree[r], r)):
            if len(victims) < N_VICTIMS and all(
                len(by_topic[t] - {*victims, ref}) >= 2 for t in published if ref in by_topic[t]
            ):
                victims.append(ref)
        assert len(victims) == N_VICTIMS, (victims, publishers)
        live = {ref: topics for ref, topics in wanted.items() if ref not in victims}

        acked: dict[str, list[Ack]] = {
            topic: publish(ref, topic, [f"{topic} before the kills {i}" for i in range(BEFORE)])
            for topic, ref in publishers.items()
        }
        publishing = Publishing(publishers)
        publishing.start()
        try:
            wait_until(lambda: publishing.count() >= N_PUBLISHED or not publishing.is_alive(), 30.0, "publications")
            for victim in victims:  # one after the other, while the publications go on
                cluster.kill(victim, signal.SIGKILL)
                time.sleep(0.4)
            start = publishing.count()
            wait_until(lambda: publishing.count() >= start + 2 * N_PUBLISHED or not publishing.is_alive(), 30.0,
                       "publications after the kills")
        finally:
            publishing.stop.set()
            publishing.join(timeout=30.0)
        assert not publishing.is_alive(), "the publishing thread did not end"
        assert publishing.error is None, f"a publication through a live member failed: {publishing.error!r}"
        for topic, acks in publishing.acked.items():
            acked[topic] += acks
        assert all(len(acks) >= BEFORE + 2 for acks in acked.values()), {t: len(a) for t, a in acked.items()}

        cluster.poll(lambda: tco_problems(cluster, live), SETTLE, "the TCO of the live nodes after the kills")
        for topic, ref in publishers.items():
            acked[topic] += publish(ref, topic, [f"{topic} after the kills {i}" for i in range(AFTER)])
        # one topic's publications through a live node that does not subscribe to it: a
        # hand-over to a live member the supervisor names
        topic = published[0]
        outsider = min(ref for ref in live if topic not in live[ref])
        handed = publish(outsider, topic, [f"{topic} through a non-member {i}" for i in range(AFTER)])
        assert all(a.stored_by in live and topic in live[a.stored_by] for a in handed), handed
        acked[topic] += handed
        cluster.poll(lambda: lacking(acked, live), SETTLE, "every acknowledged publication at every live subscriber")
        assert not tco_problems(cluster, live)  # (the publications changed no table)
        assert all(len({a.key for a in acks}) == len(acks) for acks in acked.values())

        # The supervisor dies (kill -9) and comes back on its data directory: the same edges,
        # and nothing its Timeouts do -- the round robin of tables, an audit -- changes one.
        sup = supervisor(cluster)
        assert sup["counters"].get("crashes_detected") == N_VICTIMS, sup["counters"]  # probed and removed
        before = edges_of(sup)
        cluster.kill("supervisor", signal.SIGKILL)
        cluster.restart_supervisor()
        wait_until(lambda: supervisor(cluster)["counters"].get("audits", 0) >= 1, 30.0, "an audit")

        def changed() -> list[str]:
            sup = supervisor(cluster)
            tables, topics = edges_of(sup)
            problems = [f"{ref}: {tables.get(ref)} instead of {held}" for ref, held in before[0].items()
                        if tables.get(ref) != held]
            problems += [f"{ref}: not held before the restart" for ref in set(tables) - set(before[0])]
            problems += [f"{t}: edges {topics.get(t)} instead of {e}" for t, e in before[1].items() if topics.get(t) != e]
            problems += [f"{t}: not held before the restart" for t in set(topics) - set(before[1])]
            counters = sup["counters"]
            problems += [f"{name}: {counters[name]}" for name in ("edges_added", "edges_removed") if counters.get(name)]
            return problems

        assert_stays(changed, duration=12 * INTERVAL, interval=INTERVAL)
        assert not tco_problems(cluster, live)
