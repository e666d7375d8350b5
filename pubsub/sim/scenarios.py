"""Starting states for simulations: fresh joins, and arbitrary corrupted states.

`corrupted_start` builds the "any state at all" of self-stabilization (paper 000, Def. 1.1)
for one topic: random labels or ⊥, neighbour pointers that form a random weakly connected
graph with wrong beliefs about each other's labels, a supervisor database showing all four
corruptions of §3.1, and junk messages already in flight.  All references name live
subscribers (the paper's model has no corrupted IDs; crashes are tested separately).
The corruptions themselves live in `pubsub.skipring.corruption`, shared with `pubsub chaos`, which
applies them to running daemons.
"""

from __future__ import annotations

import random

from pubsub.skipring.corruption import belief, corrupt_label, junk, plant
from supervisor.corruption import corrupt_database
from pubsub.kernel.message import Ref, Topic
from pubsub.skipring.messages import Contact
from pubsub.sim.skipring import SUPERVISOR, Simulation
from pubsub.skipring.buildsr import SkipRingNode


def fresh_start(sim: Simulation, n: int, topic: Topic) -> list[Ref]:
    """n new processes that all subscribe to `topic` at time 0."""
    refs = [sim.add_node() for _ in range(n)]
    for ref in refs:
        sim.join(ref, topic)
    return refs


def corrupted_start(sim: Simulation, n: int, topic: Topic, rng: random.Random) -> list[Ref]:
    """n subscribers of `topic` in an arbitrary state (see module docstring)."""
    refs = [sim.add_node() for _ in range(n)]
    states: dict[Ref, SkipRingNode] = {}
    for ref in refs:
        node = sim.nodes[ref]
        node.wanted_topics.add(topic)
        state = node.instances[topic] = SkipRingNode(ref, topic, SUPERVISOR)
        state.label = corrupt_label(rng, n)
        states[ref] = state

    def believe(ref: Ref) -> Contact:
        return belief(rng, ref, states[ref].label, n)

    edges = [(refs[i], refs[rng.randrange(i)]) for i in range(1, n)]  # a random spanning tree
    for _ in range(n // 2 if n > 2 else 0):
        a, b = rng.sample(refs, 2)
        edges.append((a, b))
    for a, b in edges:
        holder, held = (a, b) if rng.random() < 0.5 else (b, a)  # weakly connected only
        plant(states[holder], held, rng, n, believe)

    corrupt_database(sim.supervisor._db(topic), refs, rng, n)
    for _ in range(n):
        dest, msg = junk(rng, refs, topic, n, believe, SUPERVISOR)
        sim.inject(dest, msg, src=rng.choice(refs))
    return refs
