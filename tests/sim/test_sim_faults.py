"""Crashes, unsubscribes, a wiped supervisor and lossy channels in the simulator (§3.3, §4.1)."""

from __future__ import annotations

import random

import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.sim.scenarios import fresh_start
from pubsub.sim.world import SUPERVISOR, Simulation
from pubsub.skipring.messages import SuspectCrash
from pubsub.skipring.supervisor.core import SupervisorCore
from tests.simhelpers import converge, references_to, settle, snapshot

TOPIC = Topic("t")


def legitimate_system(n: int, seed: int) -> Simulation:
    sim = Simulation(seed)
    fresh_start(sim, n, TOPIC)
    settle(sim, TOPIC, max_intervals=300)
    return sim


@pytest.mark.parametrize("crashes", [1, 2, 16])
def test_crashed_subscribers_are_removed_and_the_ring_closes(crashes: int) -> None:
    sim = legitimate_system(64, seed=crashes)
    victims = random.Random(crashes).sample(sorted(sim.nodes), crashes)
    for victim in victims:
        sim.crash(victim)
    converge(sim, TOPIC, max_intervals=200)
    members, _ = snapshot(sim, TOPIC)
    assert not set(victims) & set(members)
    assert len(members) == 64 - crashes
    assert sim.supervisor.crashes_detected == crashes
    for victim in victims:
        assert references_to(sim, TOPIC, victim) == []


def test_a_false_suspicion_removes_nobody() -> None:
    """A subscriber's hint is verified by the supervisor's own probe before anyone goes."""
    sim = legitimate_system(16, seed=5)
    innocent = sorted(sim.nodes)[3]
    sim.inject(SUPERVISOR, SuspectCrash(innocent))
    sim.run_for(10 * sim.interval)
    members, _ = snapshot(sim, TOPIC)
    assert innocent in members
    assert sim.supervisor.crashes_detected == 0
    assert not sim.supervisor.probes


def test_unsubscribed_node_ends_with_no_connections() -> None:
    sim = legitimate_system(32, seed=2)
    leaver = sorted(sim.nodes)[7]
    sim.leave(leaver, TOPIC)
    converge(sim, TOPIC, max_intervals=300)
    assert TOPIC not in sim.nodes[leaver].instances
    assert references_to(sim, TOPIC, leaver) == []
    members, _ = snapshot(sim, TOPIC)
    assert leaver not in members and len(members) == 31


def test_everyone_leaves() -> None:
    sim = legitimate_system(8, seed=4)
    for ref in sorted(sim.nodes):
        sim.leave(ref, TOPIC)
    sim.run_for(20 * sim.interval)
    assert all(TOPIC not in node.instances for node in sim.nodes.values())
    assert TOPIC not in sim.supervisor.topics


def test_supervisor_with_an_empty_database_is_driven_back_by_the_subscribers() -> None:
    sim = legitimate_system(64, seed=9)
    sim.supervisor = SupervisorCore(SUPERVISOR, rng=random.Random(1), journal=False)
    took = converge(sim, TOPIC, max_intervals=2000)
    members, _ = snapshot(sim, TOPIC)
    assert len(members) == 64
    assert took > 0


def test_lossy_channels_still_converge_once_loss_stops() -> None:
    """Messages lost for a while act like a corrupted state; the ring recovers."""
    sim = legitimate_system(32, seed=11)
    sim.drop_rate = 0.3
    sim.join(sim.add_node(), TOPIC)
    sim.leave(Ref(sorted(sim.nodes)[0]), TOPIC)
    sim.run_for(20 * sim.interval)
    sim.drop_rate = 0.0
    converge(sim, TOPIC, max_intervals=500)
