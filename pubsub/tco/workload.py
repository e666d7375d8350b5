"""Seeded workloads of paper 001's shape (§VI): nodes whose number of topics follows a power
law within [min, max], each topic chosen with a popularity p_t that is uniform, Zipf
(α = 2.0) or exponential, and churn rounds that are a join or a leave with probability 0.5.

The paper leaves some parameters open; the values used here are `OPEN_PARAMETERS`, which
every report prints beside its results:

* the power law's exponent for the subscription size (P(k) ∝ k^-a);
* the exponential popularity's scale (p_t ∝ exp(-rank / (scale · |T|)));
* how a node draws its k topics: k distinct topics, each next one with probability
  proportional to p_t among those not drawn yet;
* which node leaves: one drawn uniformly from the nodes present; a joiner is a new node
  whose topics are drawn as the first nodes' were.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

POPULARITIES = ("uniform", "zipf", "exponential")
ZIPF_ALPHA = 2.0
POWER_EXPONENT = 2.0
EXPONENTIAL_SCALE = 0.1
OPEN_PARAMETERS = {
    "subscription size": f"power law P(k) ∝ k^-{POWER_EXPONENT} on [min, max]",
    "exponential popularity": f"p_t ∝ exp(-rank / ({EXPONENTIAL_SCALE} · |T|))",
    "topic draw": "k distinct topics, each next one ∝ p_t among those not drawn yet",
    "leaving node": "uniform among the nodes present",
}


@dataclass(frozen=True)
class Shape:
    """A workload's parameters (paper 001: 2,000 nodes, 200 topics, 10-90 topics each)."""

    nodes: int = 2000
    topics: int = 200
    min_topics: int = 10
    max_topics: int = 90
    popularity: str = "uniform"

    def __post_init__(self) -> None:
        if self.popularity not in POPULARITIES:
            raise ValueError(f"popularity is one of {', '.join(POPULARITIES)}, not {self.popularity!r}")
        if not 1 <= self.min_topics <= self.max_topics <= self.topics:
            raise ValueError("need 1 <= min_topics <= max_topics <= topics")


class Workload:
    """Draws nodes' topic sets and churn rounds from one seeded `random.Random`."""

    def __init__(self, shape: Shape, seed: int) -> None:
        self.shape = shape
        self.rng = random.Random(seed)
        self.topic_names = [f"t{i:03d}" for i in range(shape.topics)]
        self.popularity = _popularity(shape)
        sizes = range(shape.min_topics, shape.max_topics + 1)
        self._sizes = list(sizes)
        self._size_weights = [k ** -POWER_EXPONENT for k in sizes]
        self._next = 0

    def topics_of_a_node(self) -> frozenset[str]:
        """One node's topics."""
        k = self.rng.choices(self._sizes, self._size_weights)[0]
        names, weights = list(self.topic_names), list(self.popularity)
        chosen = []
        for _ in range(k):
            i = self.rng.choices(range(len(names)), weights)[0]
            chosen.append(names.pop(i))
            weights.pop(i)
        return frozenset(chosen)

    def new_node(self) -> tuple[str, frozenset[str]]:
        name = f"n{self._next:05d}"
        self._next += 1
        return name, self.topics_of_a_node()

    def initial(self) -> dict[str, frozenset[str]]:
        """The base instance I_0(V_0, T)."""
        return dict(self.new_node() for _ in range(self.shape.nodes))

    def rounds(self, present: set[str], count: int) -> Iterator[tuple[str, str, frozenset[str]]]:
        """`count` churn rounds: ("join", node, topics) or ("leave", node, its topics: empty),
        keeping `present` up to date."""
        for _ in range(count):
            if present and self.rng.random() >= 0.5:
                node = self.rng.choice(sorted(present))
                present.discard(node)
                yield "leave", node, frozenset()
            else:
                node, topics = self.new_node()
                present.add(node)
                yield "join", node, topics


def _popularity(shape: Shape) -> list[float]:
    ranks = range(1, shape.topics + 1)
    if shape.popularity == "uniform":
        weights = [1.0 for _ in ranks]
    elif shape.popularity == "zipf":
        weights = [r ** -ZIPF_ALPHA for r in ranks]
    else:
        weights = [math.exp(-r / (EXPONENTIAL_SCALE * shape.topics)) for r in ranks]
    total = sum(weights)
    return [w / total for w in weights]
