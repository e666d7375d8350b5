"""Starting states for simulations: fresh joins, arbitrary corrupted states, and the
legitimate state itself (for measuring big rings).

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
from collections.abc import Sequence
from typing import TypeVar

from pubsub.kernel.message import Ref, Topic
from pubsub.sim.world import SUPERVISOR, Simulation
from pubsub.skipring.buildsr import SkipRingNode, shortcut_chain
from pubsub.skipring.corruption import belief, corrupt_label, junk, plant
from pubsub.skipring.labels import l
from pubsub.skipring.messages import Contact
from pubsub.skipring.supervisor.corruption import corrupt_database

T = TypeVar("T")


def random_pairs(rng: random.Random, nodes: Sequence[T]) -> list[tuple[T, T]]:
    """The unoriented edges of the knowledge graph `corrupted_start` plants, in the order
    drawn: a random spanning tree (each node after the first tied to a uniformly chosen
    earlier one) and, for more than two nodes, len(nodes) // 2 further pairs of distinct
    nodes (repeats possible)."""
    edges = [(nodes[i], nodes[rng.randrange(i)]) for i in range(1, len(nodes))]
    for _ in range(len(nodes) // 2 if len(nodes) > 2 else 0):
        a, b = rng.sample(nodes, 2)
        edges.append((a, b))
    return edges


def orient(rng: random.Random, a: T, b: T) -> tuple[T, T]:
    """One edge of the knowledge graph as (holder, held): who knows whom, either way with
    probability 1/2, so that the graph is only weakly connected."""
    return (a, b) if rng.random() < 0.5 else (b, a)


def weakly_connected_graph(rng: random.Random, nodes: Sequence[T]) -> list[tuple[T, T]]:
    """The directed knowledge graph of `corrupted_start` alone, without any skip-ring state:
    edges (holder, held), weakly connected, drawn as there (`random_pairs`, then `orient`
    for each).  Paper 004's pairing starts from it (`pubsub.sim.pairing`)."""
    return [orient(rng, a, b) for a, b in random_pairs(rng, nodes)]


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

    for a, b in random_pairs(rng, refs):
        holder, held = orient(rng, a, b)  # weakly connected only
        plant(states[holder], held, rng, n, believe)

    corrupt_database(sim.supervisor._db(topic), refs, rng, n)
    for _ in range(n):
        dest, msg = junk(rng, refs, topic, n, believe, SUPERVISOR)
        sim.inject(dest, msg, src=rng.choice(refs))
    return refs


def legitimate_start(sim: Simulation, n: int, topic: Topic) -> list[Ref]:
    """n subscribers of `topic` already in the legitimate state SR(n): labels l(0..n-1) in
    the supervisor's database and at the nodes, ring neighbours and shortcuts (§3.2.2) set
    -- what a fresh start converges to, installed directly so that big rings (thousands of
    nodes) can be measured without simulating their construction."""
    refs = [sim.add_node() for _ in range(n)]
    labels = [l(x) for x in range(n)]
    holder = dict(zip(labels, refs, strict=True))
    db = sim.supervisor._db(topic)
    order = sorted(labels)
    for label, ref in holder.items():
        db.put(label, ref)
    for i, label in enumerate(order):
        ref = holder[label]
        node = sim.nodes[ref]
        node.wanted_topics.add(topic)
        state = node.instances[topic] = SkipRingNode(ref, topic, SUPERVISOR)
        node.anti_entropy(topic)
        state.label = label
        if n > 1:
            if i > 0:
                state.left = Contact(order[i - 1], holder[order[i - 1]])
            if i < n - 1:
                state.right = Contact(order[i + 1], holder[order[i + 1]])
            if i == 0:
                state.ring = Contact(order[-1], holder[order[-1]])
            elif i == n - 1:
                state.ring = Contact(order[0], holder[order[0]])
        left, right = state.cyclic_left(), state.cyclic_right()
        chains = (
            shortcut_chain(label, None if left is None else left.label),
            shortcut_chain(label, None if right is None else right.label),
        )
        for chain in chains:
            for point in chain:
                state.shortcuts[point] = holder.get(point)
    return refs
