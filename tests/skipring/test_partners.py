"""Whom anti-entropy talks to (`pubsub.skipring.partners`), checked on rings installed in
SR(n): level partners climb, the neighbours one level down are exactly the nodes that
have us as a level partner nearest on each side, a quiet round has one target and an eager
one several, and every ring neighbour keeps at least 1/8 of the rounds either way."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.sim.scenarios import legitimate_start
from pubsub.sim.world import Simulation
from pubsub.skipring.buildsr import SkipRingNode
from pubsub.skipring.partners import anti_entropy_targets

TOPIC = Topic("t")


def ring(n: int) -> dict[Ref, SkipRingNode]:
    sim = Simulation(n)
    refs = legitimate_start(sim, n, TOPIC)
    return {ref: sim.nodes[ref].instances[TOPIC] for ref in refs}


def nearest_with_partner(nodes: dict[Ref, SkipRingNode], me: SkipRingNode) -> set[Ref]:
    """From the installed ring itself: on each side, the nearest node whose level partners
    include us, if it has a label of |ours| + 1 bits (else our level partner)."""
    order = sorted(nodes.values(), key=lambda s: s.label)  # type: ignore[arg-type,return-value]
    i = order.index(me)
    assert me.label is not None
    found: set[Ref] = set()
    for step in (-1, 1):
        for k in range(1, len(order)):
            other = order[(i + step * k) % len(order)]
            assert other.label is not None
            if other.label.length <= me.label.length + 1:
                found.add(other.ref)
                break
    return found


@pytest.mark.parametrize("n", [2, 5, 16, 37, 128])
def test_next_level_neighbours_are_the_nearest_nodes_one_level_down(n: int) -> None:
    nodes = ring(n)
    for state in nodes.values():
        got = {c.ref for c in state.next_level_neighbours() if c is not None}
        assert got == nearest_with_partner(nodes, state), state.label
        for ref in got:
            other = nodes[ref]
            assert other.label is not None and state.label is not None
            if other.label.length == state.label.length + 1:
                partners = {c.ref for c in other.level_partners() if c is not None}
                assert state.ref in partners  # it climbs to us


@pytest.mark.parametrize("n", [16, 100])
def test_quiet_rounds_talk_to_one_partner_eager_rounds_to_several(n: int) -> None:
    nodes = ring(n)
    rng = random.Random(n)
    for state in nodes.values():
        ring_refs = {c.ref for c in (state.cyclic_left(), state.cyclic_right()) if c is not None}
        level = {c.ref for c in state.level_partners() if c is not None}
        down = {c.ref for c in state.next_level_neighbours() if c is not None}
        for _ in range(20):
            quiet = anti_entropy_targets(state, rng, eager=False)
            assert len(quiet) == 1 and quiet[0] in level | ring_refs
            eager = set(anti_entropy_targets(state, rng, eager=True))
            assert level | down <= eager <= level | down | ring_refs
            assert len(eager) <= 5


@pytest.mark.parametrize("eager", [False, True])
def test_every_ring_neighbour_keeps_an_eighth_of_the_rounds(eager: bool) -> None:
    """Theorem 5.19's condition (see the partners module docstring)."""
    nodes = ring(64)
    rng = random.Random(1)
    rounds = 4000
    for state in list(nodes.values())[::7]:
        hits: Counter[Ref] = Counter()
        for _ in range(rounds):
            hits.update(set(anti_entropy_targets(state, rng, eager)))
        for c in (state.cyclic_left(), state.cyclic_right()):
            assert c is not None
            assert hits[c.ref] / rounds > 0.11, (state.label, c.label, hits[c.ref] / rounds)
