"""omen under the shared publication layer in the project's simulator (`pubsub.sim.world`,
``overlay="omen"``): the OMen nodes and the membership supervisor as the daemons run them,
publications flooded on the edges or carried by anti-entropy alone, and crashes found by
the supervisor's failure detector."""

from __future__ import annotations

import random

import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.sim.world import Simulation
from tests.tco.checker import split_topics


def build(seed: int, n: int = 30, topics: int = 6, **options: object) -> tuple[Simulation, dict[Ref, list[Topic]]]:
    sim = Simulation(seed, overlay="omen", **options)  # type: ignore[arg-type]
    rng = random.Random(seed)
    names = [Topic(f"t{i}") for i in range(topics)]
    chosen: dict[Ref, list[Topic]] = {}
    for _ in range(n):
        ref = sim.add_node()
        chosen[ref] = rng.sample(names, rng.randint(2, 4))
        for topic in chosen[ref]:
            sim.join(ref, topic)
    assert sim.run_intervals_until(lambda: not problems(sim, chosen), 300) is not None, problems(sim, chosen)
    return sim, chosen


def problems(sim: Simulation, chosen: dict[Ref, list[Topic]]) -> list[str]:
    """Why the live nodes of `chosen` are not a TCO held in their topics ([] if they are)."""
    found, edges = [], set()
    for ref, topics in chosen.items():
        overlay = sim.nodes[ref].overlay
        if (overlay.held or frozenset()) != frozenset(topics):
            found.append(f"{ref} held in {overlay.held}")
        for other in overlay.core.neighbours:
            if other not in chosen:
                found.append(f"{ref} holds the departed {other}")
            elif ref not in sim.nodes[Ref(other)].overlay.core.neighbours:
                found.append(f"{ref} holds {other} one way")
            else:
                edges.add((min(ref, other), max(ref, other)))
    split = split_topics(chosen, edges)
    return found + ([f"split: {split}"] if split else [])


@pytest.mark.parametrize("flooding", [True, False], ids=["flood", "anti-entropy-alone"])
@pytest.mark.parametrize("seed", range(20))
def test_every_publication_reaches_every_live_subscriber_through_crashes(seed: int, flooding: bool) -> None:
    sim, chosen = build(seed, flooding=flooding)
    rng = random.Random(seed)
    sent: list[tuple[Ref, Topic]] = []

    def publish(count: int) -> None:
        for _ in range(count):
            ref = rng.choice(sorted(chosen))
            topic = rng.choice(chosen[ref])
            sim.publish(ref, topic, f"p{len(sent)}".encode())
            sent.append((ref, topic))

    publish(10)
    for victim in rng.sample(sorted(chosen), 2):  # one at a time, fewer than L = 2 at once
        sim.crash(victim)
        del chosen[victim]
        publish(5)
        assert sim.run_intervals_until(lambda: not problems(sim, chosen), 300) is not None, problems(sim, chosen)

    def delivered() -> bool:
        """Every live subscriber of a topic holds the same publications, at least every one
        a live node published (a crashed publisher's may be lost with it)."""
        for topic in {t for _, t in sent}:
            wanted = sum(1 for ref, t in sent if t == topic and ref in chosen)
            held = {frozenset(sim.nodes[r].publications[topic].trie.keys()) for r in chosen if topic in chosen[r]}
            if len(held) != 1 or len(next(iter(held))) < wanted:
                return False
        return True

    assert sim.run_intervals_until(delivered, 200 if flooding else 600) is not None
    if not flooding:
        assert sim.traffic.by_kind["publish_new"] == 0
