"""The `omen` overlay in the simulator (`pubsub.sim.omen`): OMen nodes and the membership
supervisor under churn, each run checked by the independent checker (tests/tco/checker.py)
on the edges both ends hold."""

from __future__ import annotations

import random

import pytest

from pubsub.omen.messages import Descriptors, OmenDone, OmenEdges, OmenShadowRequest, Refs
from pubsub.omen.node import Settings
from pubsub.omen.views import Descriptor
from pubsub.sim.omen import OmenSim, deliver
from pubsub.tco.workload import Shape, Workload
from tests.tco.checker import split_topics

L = 2
SETTINGS = Settings(resilience=L, coverage=3)


def world(seed: int, nodes: int = 48, settings: Settings = SETTINGS) -> tuple[OmenSim, Workload]:
    workload = Workload(Shape(nodes=nodes, topics=10, min_topics=2, max_topics=5), seed)
    sim = OmenSim(workload.initial(), settings, seed=seed)
    sim.run(30)  # views warm up (§4.3: the backups are built ahead of churn)
    return sim, workload


def tco_problems(sim: OmenSim) -> list[str]:
    """What the checker finds wrong with the live nodes' edges, and edges held one way or to
    a departed node."""
    edges = set()
    found = []
    for node in sorted(sim.alive):
        for other in sim.nodes[node].neighbours:
            if other not in sim.alive:
                found.append(f"{node} holds the departed {other}")
            elif node not in sim.nodes[other].neighbours:
                found.append(f"{node} holds {other} one way")
            else:
                edges.add((min(node, other), max(node, other)))
    split = split_topics({n: sim.nodes[n].topics for n in sim.alive}, edges)
    return found + [f"split: {split}"] * bool(split)


def consecutive(sim: OmenSim, count: int, rng: random.Random) -> list[str]:
    members = sim.membership.circle.members()
    start = rng.randrange(len(members))
    return [members[(start + i) % len(members)] for i in range(count)]


@pytest.mark.parametrize("seed", range(20))
def test_a_tco_after_every_handled_churn_event(seed: int) -> None:
    sim, workload = world(seed)
    rng = random.Random(seed)
    assert tco_problems(sim) == []
    for _ in range(8):
        kind = rng.choice(["join", "leave", "crash"])
        if kind == "join":
            sim.join(*workload.new_node())
        else:
            getattr(sim, kind)(rng.choice(sorted(sim.alive)))
        sim.run_until_quiet()
        assert tco_problems(sim) == []
    longest = max(n.counters.longest_wait for n in sim.nodes.values())
    assert longest <= SETTINGS.ready_timeout + 1, "an event waited past its ready timeout"
    assert max(n.most_views_held for n in sim.nodes.values()) <= 2 * L, "more than 2L predecessors' views"
    assert all(e.done is not None for e in sim.events.values()), "an event was never reported handled"


@pytest.mark.parametrize("seed", range(20))
def test_l_concurrent_crashes_of_consecutive_circle_nodes_are_survived(seed: int) -> None:
    sim, _ = world(seed)
    for node in consecutive(sim, L, random.Random(seed)):
        sim.crash(node)
    sim.run_until_quiet()
    assert tco_problems(sim) == []


@pytest.mark.parametrize("seed", range(20))
def test_a_coordinator_dying_mid_repair_is_replaced_by_the_standby(seed: int) -> None:
    sim, _ = world(seed)
    victim = random.Random(seed).choice(sorted(sim.alive))
    coordinator = sim.membership.circle.coordinator(victim)
    assert coordinator is not None
    sim.crash(victim)
    for _ in range(200):  # until the coordinator is mid-repair, bounded
        sim.run(0.25)
        if sim.nodes[coordinator].repairing is not None:
            break
    assert sim.nodes[coordinator].repairing is not None, "the coordinator never started"
    sim.crash(coordinator)
    sim.run_until_quiet()
    assert tco_problems(sim) == []


def test_l_plus_one_concurrent_crashes_are_reported_either_way() -> None:
    """Beyond Assumption 0 (|CCE| <= L) nothing is promised: the run ends and says whether
    a TCO came back."""
    outcomes = []
    for seed in range(5):
        sim, _ = world(seed)
        for node in consecutive(sim, L + 1, random.Random(seed)):
            sim.crash(node)
        sim.run_until_quiet()
        outcomes.append(tco_problems(sim) == [])
    assert len(outcomes) == 5  # reported for every seed; bench omen prints the fraction


@pytest.mark.parametrize("nodes", [24, 96])
def test_the_supervisors_messages_per_churn_event_are_o_of_l_whatever_n(nodes: int) -> None:
    sim, workload = world(1, nodes)
    rng = random.Random(1)
    for _ in range(6):
        sim.join(*workload.new_node())
        sim.run_until_quiet()
        sim.leave(rng.choice(sorted(sim.alive)))
        sim.run_until_quiet()
    assert max(sim.membership.sent_per_event) <= 3 * L + 1


def test_edges_from_a_node_that_never_asked_are_refused_and_counted() -> None:
    sim, _ = world(3, 24)
    a, b = sorted(sim.alive)[:2]
    before = set(sim.nodes[a].neighbours)
    deliver(sim, b, a, OmenEdges(b, "99:forged", Refs((b,)), Refs(())))
    sim.run(2)
    assert sim.nodes[a].counters.refused == 1
    assert sim.nodes[a].neighbours == before


def test_an_edge_to_a_peer_sharing_no_topic_is_refused_the_rest_taken() -> None:
    """An edge for a topic neither endpoint has carries nothing: the endpoint refuses that
    edge (counted), takes the others of the message and acknowledges it."""
    sim, _ = world(3, 24)
    a = sorted(sim.alive)[0]
    node = sim.nodes[a]
    sharing = next(n for n in sorted(sim.alive) if n != a and sim.nodes[n].topics & node.topics)
    coordinator = next(n for n in sorted(sim.alive) if n not in {a, sharing})
    stranger = Descriptor("stranger:1", frozenset({"no-such-topic"}), frozenset(), 1)
    deliver(sim, coordinator, a, OmenShadowRequest(coordinator, "7:test"))
    sim.run(2)
    peers = Descriptors((stranger, sim.nodes[sharing].descriptor()))
    deliver(sim, coordinator, a, OmenEdges(coordinator, "7:test", Refs(("stranger:1", sharing)), Refs(()), peers))
    sim.run(2)
    assert node.counters.refused_edge_topics == 1
    assert "stranger:1" not in node.neighbours and sharing in node.neighbours


def test_a_done_from_outside_the_predecessor_range_is_refused_and_counted() -> None:
    """Only a coordinator, in my predecessor range, closes an event at me (gcChurnEvent)."""
    sim, _ = world(4, 24)
    a = sorted(sim.alive)[0]
    node = sim.nodes[a]
    outside = next(n for n in sorted(sim.alive) if n != a and n not in node.preds)
    deliver(sim, outside, a, OmenDone("1:forged", outside))
    sim.run(2)
    assert (node.counters.refused, node.counters.refused_done) == (1, 1)
    deliver(sim, node.preds[0], a, OmenDone("1:forged", node.preds[0]))
    sim.run(2)
    assert node.counters.refused_done == 1
