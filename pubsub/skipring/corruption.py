"""Arbitrary states, for self-stabilization experiments: corrupted labels, pointers and junk
messages (paper 000, Def. 1.1: convergence from *any* initial state).

Pure functions over the protocol cores' state, without I/O; every random choice comes from
the `random.Random` passed in, so a seed reproduces the same corruption.  Two users:

* the simulator's `pubsub.sim.scenarios.corrupted_start`, which builds a whole corrupted
  system at once (it knows every node, so it can keep the pointer graph weakly connected);
* the node daemon's fault injection (`pubsub chaos corrupt-node`), which corrupts its own
  BuildSR instances on an operator's request: `corrupt_node`, which the skip ring's node
  core offers as its `corrupt` (`pubsub.skipring.nodecore.NodeCore.corrupt`).

The supervisor's database is corrupted by `pubsub.skipring.supervisor.corruption`, with `random_label`.

What may be corrupted follows the paper's model: labels (any bit string, or ⊥), the
left/right/ring pointers and shortcuts with wrong beliefs about the other side's label, and
protocol messages already in
flight.  References themselves are never invented here: they come from a pool of nodes the
caller supplies (crashed or unknown nodes are a separate experiment).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence

from pubsub.kernel.contracts import Corruption, FaultRefused
from pubsub.kernel.message import Ref, Send, Topic
from pubsub.skipring.buildsr import SkipRingNode
from pubsub.skipring.labels import Label, l
from pubsub.skipring.messages import (
    CYC,
    LIN,
    Check,
    Contact,
    GetConfiguration,
    Introduce,
    IntroduceShortcut,
    Linearize,
    RemoveConnections,
    SetData,
    Subscribe,
    Unsubscribe,
)

#: Where `plant` may put a pointer.
SLOTS = ("left", "right", "ring", "shortcut")
#: Probability that a corrupted label is ⊥ (`corrupt_label`).
BOTTOM_PROBABILITY = 0.25

#: A function giving the (possibly wrong) contact one node holds for another reference.
Believe = Callable[[Ref], Contact]


def random_label(rng: random.Random, n: int) -> Label:
    """Mostly plausible labels (images of l, some beyond n), some arbitrary bit strings."""
    if rng.random() < 0.5:
        return l(rng.randrange(2 * n + 2))
    length = rng.randint(1, max(2, 2 * math.ceil(math.log2(n + 1))))
    return Label("".join(rng.choice("01") for _ in range(length)))


def corrupt_label(rng: random.Random, n: int) -> Label | None:
    """A node's own label in an arbitrary state: ⊥ a quarter of the time, else random."""
    return None if rng.random() < BOTTOM_PROBABILITY else random_label(rng, n)


def belief(rng: random.Random, ref: Ref, actual: Label | None, n: int) -> Contact:
    """A contact for `ref`: its `actual` label half of the time (when known), else a random one."""
    label = actual if actual is not None and rng.random() < 0.5 else random_label(rng, n)
    return Contact(label, ref)


def plant(state: SkipRingNode, held: Ref, rng: random.Random, n: int, believe: Believe) -> None:
    """Make `state` hold `held` in a random slot: left, right, ring, or a shortcut under a
    random label (pointers need not be on the side their labels say)."""
    slot = rng.choice(SLOTS)
    if slot == "shortcut":
        state.shortcuts[random_label(rng, n)] = held
    else:
        setattr(state, slot, believe(held))


def corrupt_instance(
    state: SkipRingNode, pool: Sequence[Ref], rng: random.Random, n: int, believe: Believe
) -> None:
    """Replace one BuildSR instance's variables by an arbitrary state: a random label or ⊥,
    and between one and len(pool) pointers to references drawn from `pool` (none when the
    pool is empty), with random beliefs about their labels."""
    state.label = corrupt_label(rng, n)
    state.left = state.right = state.ring = None
    state.shortcuts = {}
    pool = [ref for ref in pool if ref != state.ref]
    if not pool:
        return
    for _ in range(rng.randint(1, len(pool))):
        plant(state, rng.choice(pool), rng, n, believe)


def junk(
    rng: random.Random,
    refs: Sequence[Ref],
    topic: Topic,
    n: int,
    believe: Believe,
    supervisor: Ref,
) -> Send:
    """One corrupted message in flight: any BuildSR type, plausible-looking nonsense inside,
    to a random node of `refs` or to the supervisor."""
    dest = rng.choice(refs)
    other = rng.choice(refs)
    choice = rng.randrange(9)
    if choice == 0:
        return Send(dest, Introduce(topic, believe(other), rng.choice((CYC, LIN))))
    if choice == 1:
        return Send(
            dest, Check(topic, believe(other), random_label(rng, n), rng.choice((CYC, LIN)))
        )
    if choice == 2:
        return Send(dest, Linearize(topic, believe(other)))
    if choice == 3:
        return Send(dest, IntroduceShortcut(topic, believe(other)))
    if choice == 4:
        return Send(dest, RemoveConnections(topic, other))
    if choice == 5:
        return Send(
            dest, SetData(topic, believe(other), random_label(rng, n), believe(rng.choice(refs)))
        )
    if choice == 6:
        return Send(supervisor, Subscribe(topic, other))
    if choice == 7:
        return Send(supervisor, GetConfiguration(topic, other))
    return Send(supervisor, Unsubscribe(topic, other))


#: How often `corrupt_node` redraws a state that came out unchanged.
REDRAWS = 8


def corrupt_node(
    ref: Ref,
    instances: Mapping[Topic, SkipRingNode],
    supervisor: Ref,
    topic: Topic | None,
    given_pool: Sequence[Ref] | None,
    rng: random.Random,
    junk_count: int,
) -> Corruption:
    """Replace the BuildSR variables of `topic` (or of every topic the node runs) by an
    arbitrary state -- a random label or ⊥, and random left/right/ring/shortcut pointers
    with wrong label beliefs to references drawn from the pool (default: every node this
    node references now, in any topic) -- redrawn at most `REDRAWS` times if it came out
    unchanged; and draw `junk_count` random but well-formed BuildSR messages to random
    nodes of the pool or to the supervisor.  FaultRefused for an unknown topic or none."""
    if topic is not None and topic not in instances:
        raise FaultRefused("unknown_topic", f"{ref} does not run topic {topic!r}")
    topics = [topic] if topic is not None else sorted(instances)
    if not topics:
        raise FaultRefused("nothing_to_corrupt", f"{ref} runs no topic")
    known: dict[Ref, Label] = {}
    for instance in instances.values():
        for contact in (instance.left, instance.right, instance.ring):
            if contact is not None:
                known.setdefault(contact.ref, contact.label)
        for label, holder in instance.shortcuts.items():
            if holder is not None:
                known.setdefault(holder, label)
    pool = [r for r in (given_pool if given_pool is not None else sorted(known)) if r != ref]
    n = len(pool) + 1

    def believe(target: Ref) -> Contact:
        return belief(rng, target, known.get(target), n)

    for name in topics:
        state = instances[name]
        before = state.status()
        for _ in range(REDRAWS):
            corrupt_instance(state, pool, rng, n, believe)
            if state.status() != before:
                break
    sends = [junk(rng, [*pool, ref], rng.choice(topics), n, believe, supervisor) for _ in range(junk_count)]
    return Corruption(
        topics=list(topics), pool=pool, states={name: instances[name].status() for name in topics}, sends=sends
    )
