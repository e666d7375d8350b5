"""Low-ODA from scratch (paper 001 Alg. 1) with numpy: the same edges as
`pubsub.topicgraph.lowoda.low_oda`, in the same order, at the cost the benchmarks can pay
(about 5 s at the paper's 2,000 nodes and 200 topics, where the reference would take hours).

The contributions are one symmetric matrix C over node pairs, C[u, v] = contrib((u, v)),
kept exact as components merge: joining components A and B of topic t lowers C on A × B
and B × A by one, since those pairs share t and no longer lie in different components of
it.  C holds small counts (at most the number of topics), so it is stored in 8 or 16 bits:
4 MB at 2,000 nodes.

`pubsub.topicgraph.lowoda`'s rule, restated for a search by rows:

* e1 is the pair of largest (contribution, -larger endpoint degree), the first in node
  order among equals;
* e2 is the pair of largest (-cost, contribution, -larger degree), where the cost is the
  overlay's maximum degree D after adding the pair, max(D, larger + 1).  The cost is D for
  exactly the pairs whose endpoints both have degree < D, and D + 1 for the rest; so e2 is
  the pair of largest (contribution, -larger degree) among the pairs of nodes of degree
  < D when one of them contributes, and e1 otherwise (then every contributing pair has a
  node of degree D: all cost D + 1 and rank as for e1).

Both are found the same way: the largest contribution is sought through one upper bound
per row (contributions only fall, so a row's last maximum bounds it; the rows whose bound
is the largest are rescanned until one attains it), then among the pairs attaining it, in
those rows, the smallest (larger degree, u, v).  The bound for e2's rows, restricted to the
columns of degree < D, is reset from the unrestricted one whenever D grows (nodes at the
old D come back into the columns).  `tests/tco/test_fastoda.py` compares this with the
reference edge for edge.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from pubsub.topicgraph.graph import Edge, Node, Topic, TopicOverlay
from pubsub.topicgraph.lowoda import DEFAULT_RHO

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
GainMatrix = npt.NDArray[np.unsignedinteger[npt.NBitBase]]


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
    member = np.zeros((n, len(topics)), dtype=bool)
    index = {t: i for i, t in enumerate(topics)}
    for row, node in enumerate(nodes):
        for topic in topics_of[node]:
            member[row, index[topic]] = True
    counts = member.astype(np.float32)
    # No edges yet: every shared topic joins two components.  float32 products are exact
    # below 2**24, far above any number of shared topics.
    shared = np.rint(counts @ counts.T)
    gain: GainMatrix = shared.astype(np.uint8 if len(topics) < 256 else np.uint16)
    np.fill_diagonal(gain, 0)
    #: per topic, each node's component (its smallest member's row), -1 where not subscribed;
    #: and per topic each component's members, by that row.
    label = np.where(member.T, np.arange(n)[None, :], -1)
    parts: list[dict[int, IntArray]] = [{int(r): np.array([r]) for r in np.flatnonzero(member[:, t])}
                                        for t in range(len(topics))]
    components = int(member.sum())
    wanted = len(topics)
    degree: IntArray = np.zeros(n, dtype=np.int64)
    every = _Rows(gain, degree, None)  # every pair: e1
    low = _Rows(gain, degree, np.zeros(n, dtype=bool))  # the pairs of nodes of degree < D: e2
    top = 0
    in_b = np.zeros(n, dtype=bool)
    while components > wanted:
        first = every.best()
        if first is None:
            break
        second = low.best() if top > 0 else None
        u, v = first if second is None or gain[first] > rho * gain[second] else second
        overlay.add_edge(nodes[u], nodes[v])
        chosen.append((nodes[u], nodes[v]))
        degree[u] += 1
        degree[v] += 1
        merged: list[tuple[IntArray, IntArray]] = []
        both = np.flatnonzero(member[u] & member[v])
        both = both[label[both, u] != label[both, v]]  # the topics whose components (u, v) joins
        for t, a, b in zip(both.tolist(), label[both, u].tolist(), label[both, v].tolist(), strict=True):
            side_a, side_b = parts[t].pop(a), parts[t].pop(b)
            gain[side_a[:, None], side_b] -= 1
            gain[side_b[:, None], side_a] -= 1
            merged.append((side_a, side_b))
            root = min(a, b)
            label[t, side_b if a < b else side_a] = root
            parts[t][root] = np.concatenate((side_a, side_b))
            components -= 1
        every.changed(u, v, merged, in_b)
        if max(degree[u], degree[v]) > top:
            top += 1
            low.reset(degree < top)
        else:
            low.changed(u, v, merged, in_b)
            low.forbid([w for w in (u, v) if degree[w] == top])
    return overlay, chosen


class _Rows:
    """The pairs' keys, key(u, v) = contrib · (n + 1) - max(deg(u), deg(v)) (positive
    exactly for the pairs that contribute), over the `allowed` nodes (every node when
    None): per allowed row an upper bound on its largest key and the first column that
    attained it, exact where the row is not dirty.  A key only falls (contributions fall,
    degrees grow), so a bound stays a bound; a row is dirty when an entry at its first
    maximum may have fallen."""

    CHUNK = 256  # rows rescanned at once (memory: CHUNK × n keys)

    def __init__(self, gain: GainMatrix, degree: IntArray, allowed: BoolArray | None) -> None:
        n = len(gain)
        self.gain, self.degree, self.allowed, self.scale = gain, degree, allowed, n + 1
        self.bound: IntArray = np.full(n, -1, dtype=np.int64)
        self.first: IntArray = np.zeros(n, dtype=np.int64)
        self.dirty: BoolArray = np.zeros(n, dtype=bool)
        self._scan(np.flatnonzero(allowed) if allowed is not None else np.arange(n))

    def _scan(self, rows: IntArray) -> None:
        for at in range(0, len(rows), self.CHUNK):
            chunk = rows[at:at + self.CHUNK]
            keys = self.gain[chunk].astype(np.int64) * self.scale - np.maximum(
                self.degree[chunk][:, None], self.degree[None, :])
            if self.allowed is not None:
                keys = np.where(self.allowed[None, :], keys, -1)
            self.bound[chunk] = keys.max(axis=1)
            self.first[chunk] = keys.argmax(axis=1)
            self.dirty[chunk] = False

    def changed(self, u: int, v: int, merged: list[tuple[IntArray, IntArray]], in_b: BoolArray) -> None:
        """(u, v) was added: u's and v's keys fell (their degrees), and so did column u and
        v in every row, and A × B and B × A for every pair of components merged."""
        self.dirty[u] = self.dirty[v] = True
        self.dirty[(self.first == u) | (self.first == v)] = True
        for side_a, side_b in merged:
            for rows, columns in ((side_a, side_b), (side_b, side_a)):
                in_b[columns] = True
                self.dirty[rows[in_b[self.first[rows]]]] = True
                in_b[columns] = False

    def reset(self, allowed: BoolArray) -> None:
        """The allowed nodes grew: every allowed row afresh."""
        self.allowed = allowed
        self.bound[:] = -1
        self._scan(np.flatnonzero(allowed))

    def forbid(self, nodes: list[int]) -> None:
        """These nodes leave the allowed rows and columns."""
        assert self.allowed is not None
        for w in nodes:
            self.allowed[w] = False
            self.bound[w] = -1
            self.dirty[w] = False
            self.dirty[self.first == w] = True

    def best(self) -> tuple[int, int] | None:
        """The pair (u < v) of largest key, the first in node order among equals; None
        when none contributes."""
        while True:
            most = int(self.bound.max())
            if most <= 0:
                return None
            rows = np.flatnonzero(self.bound == most)
            stale = rows[self.dirty[rows]]
            if not stale.size:
                break
            self._scan(stale)
        # Keys are symmetric, so both rows of a pair of key `most` are among `rows`: the
        # first such pair in node order is the first row with the first column attaining it.
        u = int(rows[0])
        return u, int(self.first[u])
