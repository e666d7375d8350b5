"""The arc broadcast in the simulator (issue 11): exactly n - 1 Spread messages per
publication in a legitimate ring, no deeper than ceil(log2 n) + 2 hops, and -- from
corrupted states, where arcs cannot be trusted -- every publication still reaching every
subscriber (the fallback to flooding, and anti-entropy)."""

from __future__ import annotations

import math
import random

import pytest

from pubsub.kernel.message import Send, Topic
from pubsub.publications.topicstate import LOCAL, TREE
from pubsub.sim.scenarios import corrupted_start, fresh_start, legitimate_start
from pubsub.sim.world import Simulation
from pubsub.skipring.messages import SetData
from tests.simhelpers import is_legitimate, settle

TOPIC = Topic("t")
KINDS = ("spread", "publish_new")


def counts(sim: Simulation) -> dict[str, int]:
    return {kind: sim.traffic.by_kind[kind] for kind in KINDS}


@pytest.mark.parametrize("n", [2, 3, 7, 16, 32, 100])
def test_one_publication_costs_exactly_n_minus_1_messages(n: int) -> None:
    sim = Simulation(n, dissemination="tree", delay=(0.01, 0.01), keep_rows=True)
    refs = legitimate_start(sim, n, TOPIC)
    assert is_legitimate(sim, TOPIC)
    rng = random.Random(n)
    for round_ in range(5):
        publisher = rng.choice(refs)
        for ref in refs:
            sim.take_rows(ref)
        before = counts(sim)
        sim.publish(publisher, TOPIC, f"p{round_}".encode())
        sim.run_for(2.0)  # far more than the deepest path takes
        after = counts(sim)
        assert after["spread"] - before["spread"] == n - 1
        assert after["publish_new"] == before["publish_new"]  # no fallback in SR(n)
        arrivals = {ref: a for ref in refs for a in sim.take_rows(ref)}
        assert set(arrivals) == set(refs)  # everyone stored it, once
        for ref, arrival in arrivals.items():
            assert arrival.via == (LOCAL if ref == publisher else TREE)
        assert max(a.hops or 0 for a in arrivals.values()) <= math.ceil(math.log2(n)) + 2


def test_after_a_fresh_join_the_tree_is_exact() -> None:
    """The state BuildSR itself converges to (not one installed by hand) carries the tree."""
    sim = Simulation(4, dissemination="tree")
    refs = fresh_start(sim, 24, TOPIC)
    settle(sim, TOPIC, max_intervals=600)
    before = counts(sim)
    sim.publish(refs[5], TOPIC, b"x")
    sim.run_for(5.0)
    after = counts(sim)
    assert after["spread"] - before["spread"] == 23 and after["publish_new"] == before["publish_new"]
    assert all(len(node.publications[TOPIC].trie) == 1 for node in sim.nodes.values())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_from_corrupted_states_every_publication_reaches_everyone(seed: int) -> None:
    """Publications issued while the ring is still corrupted: arcs are inconsistent,
    nodes fall back to flooding, anti-entropy repairs the rest; all tries end up equal and
    holding every publication."""
    n = 20
    sim = Simulation(seed, dissemination="tree")
    refs = corrupted_start(sim, n, TOPIC, random.Random(seed))
    rng = random.Random(seed)
    issued = 0
    for step in range(12):
        sim.run_for(1.0)
        publisher = rng.choice(refs)
        if sim.nodes[publisher].is_member(TOPIC):
            sim.publish(publisher, TOPIC, f"{step}".encode())
            issued += 1
    assert issued > 0
    settle(sim, TOPIC, max_intervals=1500)
    for _ in range(400):
        roots = {node.publications[TOPIC].trie.root() for node in sim.nodes.values()}
        if len(roots) == 1 and all(len(node.publications[TOPIC].trie) == issued for node in sim.nodes.values()):
            break
        sim.run_for(1.0)
    else:
        raise AssertionError("tries did not converge")


def test_an_arc_that_does_not_hold_the_receiver_falls_back_to_flooding() -> None:
    from pubsub.publications.messages import Spread
    from pubsub.publications.topicstate import make_publication

    sim = Simulation(9, dissemination="tree")
    refs = legitimate_start(sim, 8, TOPIC)
    node = sim.nodes[refs[3]]
    me = node.instances[TOPIC].label.position  # type: ignore[union-attr]
    p = make_publication(refs[0], 0, b"x")
    # an arc that ends right before the receiver: it cannot be trusted here
    wrong = Spread(TOPIC, refs[0], (me + 1) % (1 << 64), me, 4, 1, [p])
    sends = node.handle(wrong, 0.0)
    core = node.publications[TOPIC]
    assert core.counters["spread_fallbacks"] == 1 and core.holds(p)
    sends = [s for s in sends if isinstance(s, Send)]  # after the Persist of what it stored
    assert sends and all(s.msg.kind == "publish_new" for s in sends)
    assert {s.dest for s in sends} == set(node.instances[TOPIC].contacts())  # type: ignore[union-attr]


def test_publications_spread_together_cost_n_minus_1_messages_in_all() -> None:
    """A publisher spreads the publications of one commit together (`Batched`): one Spread
    per tree edge for all of them, and every member stores every one."""
    n, k = 16, 10
    sim = Simulation(n, dissemination="tree", delay=(0.01, 0.01))
    refs = legitimate_start(sim, n, TOPIC)
    publisher = sim.nodes[refs[3]]
    effects = [effect for i in range(k) for effect in publisher.publish(TOPIC, b"p%d" % i)]
    before = counts(sim)
    sim.carry_out(refs[3], effects)
    sim.run_for(2.0)
    after = counts(sim)
    assert after["spread"] - before["spread"] == n - 1 and after["publish_new"] == before["publish_new"]
    assert all(len(node.publications[TOPIC].trie) == k for node in sim.nodes.values())


def test_a_publication_committed_after_its_publisher_left_still_spreads() -> None:
    """The supervisor lets a node leave between storing its publication and the commit that
    releases the spread: the spread leaves on the node's last arcs, so the publication the
    node acknowledged reaches the members that stay."""
    n = 8
    sim = Simulation(n, dissemination="tree", delay=(0.01, 0.01))
    refs = legitimate_start(sim, n, TOPIC)
    leaving = sim.nodes[refs[2]]
    effects = leaving.publish(TOPIC, b"last words")
    leaving.leave(TOPIC)
    leaving.handle(SetData(TOPIC, None, None, None), sim.now)  # the supervisor's permission
    assert TOPIC not in leaving.publications
    sim.carry_out(refs[2], effects)
    sim.run_for(2.0)
    assert all(len(sim.nodes[ref].publications[TOPIC].trie) == 1 for ref in refs if ref != refs[2])
