"""The numpy Low-ODA builds exactly the reference's overlay, edge for edge and in the same
order of choice, on workloads of every popularity and for several ρ."""

from __future__ import annotations

from itertools import combinations

import pytest

from pubsub.tco.fastoda import low_oda_fast
from pubsub.tco.graph import TopicOverlay
from pubsub.tco.lowoda import construct_low_edges
from pubsub.tco.workload import Shape, Workload
from tests.tco.checker import split_topics


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("popularity", ["uniform", "zipf", "exponential"])
@pytest.mark.parametrize("rho", [1.0, 3.0])
def test_the_numpy_low_oda_adds_the_reference_edges_in_the_reference_order(seed: int, popularity: str, rho: float) -> None:
    topics = Workload(Shape(nodes=45, topics=30, min_topics=1, max_topics=8, popularity=popularity), seed=seed).initial()
    reference = TopicOverlay(topics)
    done = construct_low_edges(reference, reference.subscribers, combinations(sorted(topics), 2), rho)
    fast, order = low_oda_fast(topics, rho)
    assert order == done.added
    assert fast.edges() == reference.edges()
    assert split_topics(topics, fast.edges()) == {}
    assert done.connected


def test_the_numpy_low_oda_handles_no_topics_and_one_node() -> None:
    assert low_oda_fast({"a": frozenset()})[0].edges() == set()
    assert low_oda_fast({"a": frozenset("x"), "b": frozenset("y")})[0].edges() == set()
