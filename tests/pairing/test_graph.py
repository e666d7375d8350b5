"""The knowledge graph the pairing starts from is BuildSR's corrupted states' one
(`pubsub.sim.scenarios`): factored out there, drawn the same way."""

from __future__ import annotations

import random

from pubsub.sim.pairing import knowledge_graph, weakly_connected
from pubsub.sim.scenarios import orient, random_pairs, weakly_connected_graph


def test_the_graph_is_the_spanning_tree_plus_half_as_many_pairs_each_oriented_at_random() -> None:
    for n in (1, 2, 3, 17, 200):
        edges = weakly_connected_graph(random.Random(n), list(range(n)))
        rng = random.Random(n)
        assert edges == [orient(rng, a, b) for a, b in random_pairs(rng, list(range(n)))]
        assert len(edges) == (n - 1) + (n // 2 if n > 2 else 0)
        assert all(a != b for a, b in edges)
        assert weakly_connected({u: {b for a, b in edges if a == u} for u in range(n)})


def test_random_pairs_starts_with_a_spanning_tree_in_node_order() -> None:
    pairs = random_pairs(random.Random(5), list(range(50)))
    for i, (a, b) in enumerate(pairs[:49], start=1):
        assert a == i and 0 <= b < i


def test_both_orientations_occur_so_the_graph_is_only_weakly_connected() -> None:
    graph = knowledge_graph(300, random.Random(2))
    reverse = {(v, u) for u, targets in graph.items() for v in targets}
    forward = {(u, v) for u, targets in graph.items() for v in targets}
    assert forward - reverse  # some edge is known one way only
    assert not all(graph[u] for u in graph)  # some node knows nobody
