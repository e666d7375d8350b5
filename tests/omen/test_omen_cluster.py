"""The omen overlay with real processes: ``pubsub cluster up --overlay omen`` and a 24-node
cluster of the shared ``pubsub supervisor`` / ``pubsub node`` daemons with ``--overlay omen``,
on real TCP over 127.0.0.1 (paper 003's OMen: the supervisor keeps membership only; the
nodes' coordinators mend the overlay).

The acceptance run: 24 nodes, 40 topics, each node in 5-15 of them (seeded).  Publications
go through the client API to several topics while 4 nodes are killed with SIGKILL, one at a
time (fewer than L = 2 events at once: omen promises nothing beyond, docs/omen.md), each
kill waiting for the overlay to be a TCO again.  Afterwards every live subscriber holds every
acknowledged publication of its topics, and the edges the live nodes report form a TCO by
the independent checker (`tests.tco.checker.split_topics`).  Then the supervisor is killed
with SIGKILL and restarted on its data directory: it holds the same membership and starts no
churn event, and the overlay stays a TCO.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pubsub.client.library import Ack
from pubsub.ops.detached import read_manifest
from pubsub.ops.localcluster import LocalCluster
from tests.cluster_checks import assert_stays
from tests.ops.test_cluster_cmd import cluster_cmd, cluster_dir, entries, exited, status_json
from tests.tco.test_tco_cluster import (
    AFTER,
    BEFORE,
    N_NODES,
    N_PUBLISHED,
    N_TOPICS,
    N_VICTIMS,
    SEED,
    Publishing,
    Topics,
    assignment,
    graph_problems,
    join_all,
    lacking,
    patiently,
    publish,
    subscribers,
    wait_until,
)

pytestmark = pytest.mark.integration

__all__ = ["cluster_dir"]  # the fixture, used by name below

INTERVAL = 0.3
#: Seconds the overlay may take to be a TCO again after a change: the failure detector's
#: probe (2 s), the coordinator's fetch and edges, on a machine `make test` keeps busy.
SETTLE = 90.0


def supervisor(cluster: LocalCluster) -> dict[str, Any]:
    return patiently(cluster.supervisor_status, "the supervisor's status")


def omen_problems(cluster: LocalCluster, wanted: Topics) -> list[str]:
    """Why the live nodes `wanted` (ref -> topics) are not an omen TCO ([] if they are): the
    supervisor's membership, each node's topics and reachability, the independent checker on
    the edges the nodes report, and the overlay's own check of every topic."""
    sup = supervisor(cluster)
    held = sup.get("node_topics") or {}
    problems = []
    if set(held) != set(wanted):
        problems.append(f"the supervisor holds {len(held)} nodes: missing {sorted(set(wanted) - set(held))}, "
                        f"extra {sorted(set(held) - set(wanted))}")
    bodies = patiently(lambda: cluster.node_statuses(sorted(wanted)), "the live nodes' status")
    for ref, topics in sorted(wanted.items()):
        body = bodies[ref]
        if held.get(ref) != sorted(topics) or body.get("held_topics") != sorted(topics):
            problems.append(f"{ref}: held in {body.get('held_topics')} / {held.get(ref)}, joined {sorted(topics)}")
    return problems + graph_problems(cluster, wanted, bodies)


# --- the command ---------------------------------------------------------------------------------
def test_cluster_up_runs_the_omen_overlay(cluster_dir: Path) -> None:
    """`pubsub cluster up --overlay omen`: every daemon runs omen, status judges it by omen's
    check, a node's status says omen is not self-stabilizing, a publication reaches every
    member, a dead node is repaired around, and down stops everything."""
    done = cluster_cmd(cluster_dir, "up", "--overlay", "omen", "-n", "5", "--topics", "a,b", "--interval", "0.2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(omen overlay)" in done.stdout, done.stdout
    doc = read_manifest(cluster_dir)
    assert doc["overlay"] == "omen"
    code, report = status_json(cluster_dir)
    assert code == 0 and report["overlay"] == "omen" and report["healthy"], report
    assert all(report["topics"][t]["legitimate"] and report["topics"][t]["members"] == 5 for t in ("a", "b"))
    refs = [n["ref"] for n in doc["nodes"]]
    node = subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", "status", "--node", refs[0]],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert node.returncode == 0 and "omen is not self-stabilizing" in node.stdout, node.stdout + node.stderr

    acked = publish(refs[0], "a", ["hello", "omen"])
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
    pids = [e.pid for e in entries(cluster_dir) if e.pid is not None]
    assert cluster_cmd(cluster_dir, "down").returncode == 0
    assert all(exited(pid) for pid in pids)


# --- the acceptance run --------------------------------------------------------------------------
def test_an_omen_cluster_of_24_nodes_survives_kills_and_a_supervisor_restart(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    with LocalCluster(tmp_path / "cluster", N_NODES, interval=INTERVAL, overlay="omen") as cluster:
        wanted = assignment(cluster.node_refs, rng)
        by_topic = subscribers(wanted)
        assert len(by_topic) == N_TOPICS and all(len(s) >= 2 for s in by_topic.values()), by_topic
        asyncio.run(join_all(wanted))
        cluster.poll(lambda: omen_problems(cluster, wanted), SETTLE, "the TCO of the 24 nodes")

        published = rng.sample(sorted(t for t, s in by_topic.items() if len(s) >= 5), N_PUBLISHED)
        publishers: dict[str, str] = {}
        for topic in published:
            fresh = sorted(by_topic[topic] - set(publishers.values())) or sorted(by_topic[topic])
            publishers[topic] = rng.choice(fresh)
        victims: list[str] = []
        for ref in rng.sample(sorted(set(wanted) - set(publishers.values())), len(wanted) - len(publishers)):
            if len(victims) < N_VICTIMS and all(
                len(by_topic[t] - {*victims, ref}) >= 2 for t in published if ref in by_topic[t]
            ):
                victims.append(ref)
        assert len(victims) == N_VICTIMS, (victims, publishers)

        acked: dict[str, list[Ack]] = {
            topic: publish(ref, topic, [f"{topic} before the kills {i}" for i in range(BEFORE)])
            for topic, ref in publishers.items()
        }
        publishing = Publishing(publishers)
        publishing.start()
        live = dict(wanted)
        try:
            wait_until(lambda: publishing.count() >= N_PUBLISHED or not publishing.is_alive(), 30.0, "publications")
            for victim in victims:  # one at a time: a TCO again before the next
                cluster.kill(victim, signal.SIGKILL)
                del live[victim]
                cluster.poll(lambda: omen_problems(cluster, live), SETTLE, f"the TCO after the kill of {victim}")
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
        for topic, ref in publishers.items():
            acked[topic] += publish(ref, topic, [f"{topic} after the kills {i}" for i in range(AFTER)])
        cluster.poll(lambda: lacking(acked, live), SETTLE, "every acknowledged publication at every live subscriber")
        assert not omen_problems(cluster, live)
        sup = supervisor(cluster)
        assert sup["counters"].get("crashes_detected") == N_VICTIMS, sup["counters"]

        # The supervisor dies and comes back on its data directory: the same membership, no
        # churn event, and the overlay stays a TCO (the supervisor holds no edge to lose).
        before = sup["node_topics"]
        cluster.kill("supervisor", signal.SIGKILL)
        cluster.restart_supervisor()
        wait_until(lambda: supervisor(cluster)["counters"].get("reminders", 0) >= 1, 60.0, "a node's reminder")

        def changed() -> list[str]:
            now = supervisor(cluster)
            problems = [] if now["node_topics"] == before else ["the membership changed over the restart"]
            counters: Mapping[str, int] = now["counters"]
            problems += [f"{name}: {counters[name]}" for name in ("joins", "leaves", "changes", "crashes_detected")
                         if counters.get(name)]
            return problems

        assert_stays(changed, duration=12 * INTERVAL, interval=INTERVAL)
        assert not omen_problems(cluster, live)
