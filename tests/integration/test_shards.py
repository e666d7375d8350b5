"""Sharded supervisors with real processes (issue 14, item 4; `pubsub.kernel.shards`).

Three supervisors, many topics, the nodes given the first supervisor's address only:

1. every topic's ring is exactly SR(n) and its database lives at its owner only (the owner
   on the hash ring of the live supervisor set);
2. kill -9 one supervisor (by pid): the others declare it dead after ``--peer-timeout``,
   its topics are rebuilt at their new owners from the subscribers alone, every ring is
   exact again, each database lives at its owner only, and every acknowledged publication
   (published before and during the takeover) is held by every member of its topic;
3. start a fourth supervisor (``--join`` the first): exactly the topics whose owner changed
   move (counted at the old owners as ``topics_released``, held by the newcomer), about
   1/3 of them with three live supervisors, and the rings are exact again.

`make test` runs it at a reduced size; the acceptance size (3 supervisors, 300 topics,
24 nodes) is the ``slow`` case (`make test-slow`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pubsub.kernel.shards import HashRing
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import ClusterError
from tests.cluster_checks import ring_problems

pytestmark = [pytest.mark.integration]

INTERVAL = 0.3
PEER_TIMEOUT = 6.0


def _patient(problems: Callable[[], list[str]]) -> Callable[[], list[str]]:
    """`problems`, with a daemon slow to answer (a supervisor busy taking over 100 topics
    on a loaded machine) counted as one more problem rather than a failure."""

    def look() -> list[str]:
        try:
            return problems()
        except ClusterError as exc:
            return [f"not answering yet: {exc}"]

    return look


def _members(n_topics: int, n_nodes: int, per_topic: int) -> dict[str, list[int]]:
    """Topic i's members: `per_topic` nodes spread evenly over the cluster."""
    stride = max(1, n_nodes // per_topic)
    return {
        f"t{i:03d}": sorted({(i + j * stride) % n_nodes for j in range(per_topic)})
        for i in range(n_topics)
    }


def _holders(statuses: Mapping[str, Mapping[str, Any]]) -> dict[str, set[str]]:
    """topic -> the supervisors whose database holds it."""
    out: dict[str, set[str]] = {}
    for ref, body in statuses.items():
        for topic in body.get("topics") or {}:
            out.setdefault(topic, set()).add(ref)
    return out


def _placement_problems(cluster: LocalCluster, topics: list[str], live: list[str]) -> list[str]:
    """Every supervisor agrees on `live`; each topic's database is at its owner only."""
    statuses = cluster.supervisor_statuses()
    problems = [
        f"{cluster.name_of(ref)} sees live {body['supervisors']['live']}"
        for ref, body in statuses.items()
        if sorted(body["supervisors"]["live"]) != sorted(live)
    ]
    ring = HashRing(live)
    holders = _holders(statuses)
    for topic in topics:
        if holders.get(topic, set()) != {ring.owner(topic)}:
            problems.append(f"{topic}: held by {sorted(holders.get(topic, ()))}, owner {ring.owner(topic)}")
    return problems


def _released(cluster: LocalCluster) -> dict[str, int]:
    return {
        ref: int(body["supervisors"]["counters"].get("topics_released", 0))
        for ref, body in cluster.supervisor_statuses().items()
    }


def _publish_round(cluster: LocalCluster, members: Mapping[str, list[int]], tag: str) -> dict[str, set[str]]:
    """One acknowledged publication per topic, through its first member (raises if any is
    not acknowledged); topic -> payloads."""
    acked: dict[str, set[str]] = {}
    for topic, nodes in members.items():
        payload = f"{tag}-{topic}"
        cluster.publish(nodes[0], topic, payload)
        acked.setdefault(topic, set()).add(payload)
    return acked


def _missing_publications(
    cluster: LocalCluster, members: Mapping[str, list[int]], acked: Mapping[str, set[str]]
) -> list[str]:
    problems = []
    for topic, nodes in members.items():
        refs = [cluster.node_refs[i] for i in nodes]
        for ref, held in cluster.histories(refs, topic).items():
            missing = acked[topic] - {d["payload"] for d in held}
            if missing:
                problems.append(f"{topic}: {cluster.name_of(ref)} misses {sorted(missing)[:3]}")
    return problems


def run_shards(tmp_path: Path, n_topics: int, n_nodes: int, per_topic: int, timeout: float) -> dict[str, Any]:
    members = _members(n_topics, n_nodes, per_topic)
    topics = sorted(members)
    report: dict[str, Any] = {}
    with LocalCluster(
        tmp_path / "c", n_nodes, interval=INTERVAL, supervisors=3, peer_timeout=PEER_TIMEOUT, admin=False
    ) as cluster:
        sups = [s.ref for s in cluster.supervisors]
        for topic, nodes in members.items():
            for i in nodes:
                cluster.subscribe(i, topic)
        wanted = {t: [cluster.node_refs[i] for i in nodes] for t, nodes in members.items()}

        # 1. exact rings, each database at its owner only
        report["converged_s"] = cluster.poll(_patient(lambda: ring_problems(cluster, wanted)), timeout, "exact rings")
        cluster.poll(_patient(lambda: _placement_problems(cluster, topics, sups)), 30, "databases at their owners")
        three = HashRing(sups)
        report["owned"] = {ref: sum(three.owner(t) == ref for t in topics) for ref in sups}
        acked = _publish_round(cluster, members, "before")

        # 2. kill -9 one supervisor: its topics are rebuilt at their new owners
        victim = cluster.supervisors[2]
        pid = victim.pid
        assert pid is not None
        cluster.kill(victim.name)  # SIGKILL, by pid
        survivors = sups[:2]
        two = HashRing(survivors)
        moved_by_kill = [t for t in topics if three.owner(t) != two.owner(t)]
        assert all(three.owner(t) == victim.ref for t in moved_by_kill)
        report["moved_by_kill"] = len(moved_by_kill)
        during = _publish_round(cluster, {t: members[t] for t in moved_by_kill[:20]}, "during")
        for topic, payloads in during.items():
            acked[topic] |= payloads
        cluster.poll(_patient(lambda: _placement_problems(cluster, topics, survivors)), timeout, "takeover")
        report["rebuilt_s"] = cluster.poll(_patient(lambda: ring_problems(cluster, wanted)), timeout, "exact rings after kill -9")
        cluster.poll(_patient(lambda: _missing_publications(cluster, members, acked)), timeout, "acknowledged publications")

        # 3. a fourth supervisor: only its share moves
        released_before = _released(cluster)
        fourth = cluster.add_supervisor()
        live = [*survivors, fourth.ref]
        grown = HashRing(live)
        expected = {t for t in topics if two.owner(t) != grown.owner(t)}
        assert all(grown.owner(t) == fourth.ref for t in expected)
        cluster.poll(_patient(lambda: _placement_problems(cluster, topics, live)), timeout, "the newcomer's share")
        held = _holders(cluster.supervisor_statuses())
        assert {t for t, refs in held.items() if fourth.ref in refs} == expected
        released_after = _released(cluster)
        moved = sum(released_after[r] - released_before[r] for r in survivors)
        assert moved == len(expected), (moved, len(expected))
        report["moved_by_join"] = moved
        # A share moves, never all: a third on average, but the share depends on where the
        # random ports hash (3 to 27 of 45 topics over 5,000 draws of four ports; the old
        # bound of 15-50% failed about 3% of runs); which topics move is checked exactly above.
        assert 1 <= moved <= 0.6 * n_topics
        report["regrown_s"] = cluster.poll(_patient(lambda: ring_problems(cluster, wanted)), timeout, "exact rings after join")
        cluster.poll(_patient(lambda: _missing_publications(cluster, members, acked)), timeout, "publications after join")
        redirects = [
            int(b["supervisors"]["counters"].get("redirects", 0)) for b in cluster.supervisor_statuses().values()
        ]
        report["redirects"] = sum(redirects)
    return report


@pytest.mark.timeout(600)
def test_sharded_supervisors(tmp_path: Path) -> None:
    report = run_shards(tmp_path, n_topics=45, n_nodes=8, per_topic=3, timeout=120)
    print(report)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_sharded_supervisors_acceptance_size(tmp_path: Path) -> None:
    """3 supervisors, 300 topics, 24 nodes (issue 14's acceptance)."""
    report = run_shards(tmp_path, n_topics=300, n_nodes=24, per_topic=4, timeout=600)
    print(report)


@pytest.mark.timeout(300)
def test_one_address_finds_every_supervisor(tmp_path: Path) -> None:
    """The client library and the CLI, given the first supervisor's address only, find the
    live set and route each topic to its owner (retention set at the owner, pattern
    subscriptions over every supervisor's topics)."""
    import asyncio

    from pubsub.client.supervisors import live_supervisors, supervisor_for, supervisor_topics

    with LocalCluster(tmp_path / "c", 2, interval=INTERVAL, supervisors=3, admin=False) as cluster:
        sups = sorted(s.ref for s in cluster.supervisors)
        assert sorted(asyncio.run(live_supervisors(cluster.supervisor_ref))) == sups
        ring = HashRing(sups)
        topics = [f"s{i}" for i in range(12)]
        elsewhere = next(t for t in topics if ring.owner(t) != cluster.supervisor_ref)
        assert asyncio.run(supervisor_for(elsewhere, cluster.supervisor_ref)) == ring.owner(elsewhere)
        for topic in topics:
            cluster.subscribe(0, topic)
        cluster.poll(_patient(lambda: ring_problems(cluster, {t: [cluster.node_refs[0]] for t in topics})), 60, "rings")
        assert asyncio.run(supervisor_topics(cluster.supervisor_ref)) == sorted(topics)
        cluster.cli("retention", "set", elsewhere, "--supervisor", cluster.supervisor_ref, "--max-count", "5")
        statuses = cluster.supervisor_statuses()
        assert elsewhere in statuses[ring.owner(elsewhere)]["retention"]
        assert elsewhere not in statuses[cluster.supervisor_ref].get("retention", {})
        shown = cluster.cli("retention", "show", "--supervisor", cluster.supervisor_ref)
        assert elsewhere in shown
        out = cluster.cli("subscribe", "s1*", "--node", cluster.node_refs[1], "--detach")
        assert "s1" in out and "s10" in out and "s11" in out
