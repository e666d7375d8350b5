"""Low-ODA from scratch (paper 001 Alg. 1) with numpy: the same edges as
`pubsub.tco.lowoda.low_oda`, in the same order, at the cost the benchmarks can pay.

The reference recomputes every live contribution on every step.  Here the contributions
are one matrix C over node pairs, C[u, v] = contrib((u, v)), kept exact as components
merge: joining components A and B of topic t lowers C on A × B (and B × A) by one, since
those pairs share t and no longer lie in different components of it.  Each step is then a
few whole-matrix operations: e1 is the pair of largest (contribution, -larger endpoint
degree), e2 the pair of largest (-cost, contribution, -larger degree) where the cost is
the overlay's maximum degree after adding the pair -- `pubsub.tco.lowoda`'s rule and its
tie-breaks (the first pair in node order among equals, which is numpy's first maximum over
the upper triangle in row-major order).  `tests/tco/test_fastoda.py` compares the two.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from pubsub.tco.graph import Edge, Node, Topic, TopicOverlay
from pubsub.tco.lowoda import DEFAULT_RHO

IntMatrix = npt.NDArray[np.int64]


def low_oda_fast(
    topics_of: Mapping[Node, frozenset[Topic]], rho: float = DEFAULT_RHO
) -> tuple[TopicOverlay, list[Edge]]:
    """Low-ODA (Alg. 1): a TCO from no edges, every pair a potential edge; with the edges
    in the order they were chosen."""
    nodes = sorted(topics_of)
    n = len(nodes)
    overlay = TopicOverlay(topics_of)
    topics = sorted(overlay.subscribers)
    chosen: list[Edge] = []
    if n < 2 or not topics:
        return overlay, chosen
    member = np.zeros((n, len(topics)), dtype=np.int64)
    index = {t: i for i, t in enumerate(topics)}
    for row, node in enumerate(nodes):
        for topic in topics_of[node]:
            member[row, index[topic]] = 1
    gain: IntMatrix = member @ member.T  # no edges yet: every shared topic joins two components
    np.fill_diagonal(gain, 0)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    gain[~upper] = 0
    #: per topic, each node's component (its smallest member's row), -1 where not subscribed.
    label = np.where(member.T == 1, np.arange(n)[None, :], -1)
    components = int(member.sum())
    wanted = len(topics)
    degree = np.zeros(n, dtype=np.int64)
    by_degree, by_gain = n + 1, len(topics) + 1  # each field's range, so the keys order lexicographically
    while components > wanted:
        live = gain > 0
        if not live.any():
            break
        larger = np.maximum(degree[:, None], degree[None, :])
        first = np.where(live, gain * by_degree - larger, np.iinfo(np.int64).min)
        i1 = int(np.argmax(first))
        top = int(degree.max())
        cost = np.maximum(top, larger + 1)
        second = np.where(live, (-cost * by_gain + gain) * by_degree - larger, np.iinfo(np.int64).min)
        i2 = int(np.argmax(second))
        u1, v1 = divmod(i1, n)
        u2, v2 = divmod(i2, n)
        u, v = (u1, v1) if gain[u1, v1] > rho * gain[u2, v2] else (u2, v2)
        overlay.add_edge(nodes[u], nodes[v])
        chosen.append((nodes[u], nodes[v]))
        degree[u] += 1
        degree[v] += 1
        for t in np.flatnonzero(member[u] & member[v]):
            a, b = label[t, u], label[t, v]
            if a == b:
                continue
            side_a = np.flatnonzero(label[t] == a)
            side_b = np.flatnonzero(label[t] == b)
            block = np.ix_(side_a, side_b)
            gain[block] -= upper[block]
            block = np.ix_(side_b, side_a)
            gain[block] -= upper[block]
            label[t, side_b if a < b else side_a] = min(a, b)
            components -= 1
        gain[u, v] = 0  # an edge is never a potential edge again
    return overlay, chosen
