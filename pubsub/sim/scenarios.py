"""Starting states for simulations: fresh joins, and arbitrary corrupted states.

`corrupted_start` builds the "any state at all" of self-stabilization (paper 000, Def. 1.1)
for one topic: random labels or ⊥, neighbour pointers that form a random weakly connected
graph with wrong beliefs about each other's labels, a supervisor database showing all four
corruptions of §3.1, and junk messages already in flight.  All references name live
subscribers (the paper's model has no corrupted IDs; crashes are tested separately).
"""

from __future__ import annotations

import math
import random

from pubsub.labels import Label, l
from pubsub.messages import (
    CYC,
    LIN,
    Check,
    Contact,
    GetConfiguration,
    Introduce,
    IntroduceShortcut,
    Linearize,
    Message,
    Ref,
    RemoveConnections,
    SetData,
    Subscribe,
    Topic,
    Unsubscribe,
)
from pubsub.sim.engine import SUPERVISOR, Simulation
from pubsub.skipring import SkipRingNode


def fresh_start(sim: Simulation, n: int, topic: Topic) -> list[Ref]:
    """n new processes that all subscribe to `topic` at time 0."""
    refs = [sim.add_node() for _ in range(n)]
    for ref in refs:
        sim.join(ref, topic)
    return refs


def random_label(rng: random.Random, n: int) -> Label:
    """Mostly plausible labels (images of l, some beyond n), some arbitrary bit strings."""
    if rng.random() < 0.5:
        return l(rng.randrange(2 * n + 2))
    length = rng.randint(1, max(2, 2 * math.ceil(math.log2(n + 1))))
    return Label("".join(rng.choice("01") for _ in range(length)))


def corrupted_start(sim: Simulation, n: int, topic: Topic, rng: random.Random) -> list[Ref]:
    """n subscribers of `topic` in an arbitrary state (see module docstring)."""
    refs = [sim.add_node() for _ in range(n)]
    states: dict[Ref, SkipRingNode] = {}
    for ref in refs:
        node = sim.nodes[ref]
        node.wanted_topics.add(topic)
        state = node.instances[topic] = SkipRingNode(ref, topic, SUPERVISOR)
        state.label = None if rng.random() < 0.25 else random_label(rng, n)
        states[ref] = state

    def belief(ref: Ref) -> Contact:
        actual = states[ref].label
        label = actual if actual is not None and rng.random() < 0.5 else random_label(rng, n)
        return Contact(label, ref)

    edges = [(refs[i], refs[rng.randrange(i)]) for i in range(1, n)]  # a random spanning tree
    edges += [tuple(rng.sample(refs, 2)) for _ in range(n // 2 if n > 2 else 0)]
    for a, b in edges:
        holder, held = (a, b) if rng.random() < 0.5 else (b, a)  # weakly connected only
        state = states[holder]
        slot = rng.choice(("left", "right", "ring", "shortcut"))
        if slot == "shortcut":
            state.shortcuts[random_label(rng, n)] = held
        else:
            setattr(state, slot, belief(held))

    _corrupt_database(sim, refs, topic, rng, n)
    for _ in range(n):
        dest, msg = _junk(rng, refs, topic, n, belief)
        sim.inject(dest, msg, src=rng.choice(refs))
    return refs


def _corrupt_database(sim: Simulation, refs: list[Ref], topic: Topic, rng: random.Random, n: int) -> None:
    """A database with every corruption of §3.1 (i)-(iv)."""
    db = sim.supervisor._db(topic)
    for ref in rng.sample(refs, max(1, n // 2)):
        db.put(random_label(rng, n), ref)  # (iii) holes and (iv) labels >= n or not images
    db.put(Label("10"), rng.choice(refs))  # (iv) not an image of l at all; (ii) likely too
    db.put(l(3 * n + 1), None)  # (i) a tuple without subscriber
    db.put(l(3 * n + 2), None)
    victim = rng.choice(refs)
    db.put(l(3 * n + 3), victim)  # (ii) one subscriber under several labels
    db.put(l(3 * n + 4), victim)


def _junk(rng: random.Random, refs: list[Ref], topic: Topic, n: int, belief) -> tuple[Ref, Message]:  # type: ignore[no-untyped-def]
    """One corrupted message in flight: any type, plausible-looking nonsense inside."""
    dest = rng.choice(refs)
    other = rng.choice(refs)
    choice = rng.randrange(9)
    if choice == 0:
        return dest, Introduce(topic, belief(other), rng.choice((CYC, LIN)))
    if choice == 1:
        return dest, Check(topic, belief(other), random_label(rng, n), rng.choice((CYC, LIN)))
    if choice == 2:
        return dest, Linearize(topic, belief(other))
    if choice == 3:
        return dest, IntroduceShortcut(topic, belief(other))
    if choice == 4:
        return dest, RemoveConnections(topic, other)
    if choice == 5:
        return dest, SetData(topic, belief(other), random_label(rng, n), belief(rng.choice(refs)))
    if choice == 6:
        return SUPERVISOR, Subscribe(topic, other)
    if choice == 7:
        return SUPERVISOR, GetConfiguration(topic, other)
    return SUPERVISOR, Unsubscribe(topic, other)
