"""Low-ODA (paper 001 Alg. 1-2, after Onus and Richa): add edges one by one until the
overlay is topic-connected, each chosen by `find_low_edge` between the edge of largest
contribution and the best edge among those that raise the maximum degree least.

contrib(e) of a potential edge e = (v1, v2) is the number of topics both subscribe to whose
TC-components e would join in the overlay as it stands, G(V, E_cur ∪ E_new) -- the whole
overlay's components, also when the potential edges are only those of a shadow set (Alg. 7,
10): a repair judges an edge by what it joins in the overlay, not in the shadow set.

Choices the paper leaves open, as taken here:

* "increase the maximum degree minimally" is read for the whole overlay: an edge's cost is
  the maximum degree of G after adding it, max(D, deg(v1) + 1, deg(v2) + 1);
* ties (equal contribution, or equal cost and contribution) go to the edge whose larger
  endpoint degree is smaller, then the smaller edge in node order -- so a run is a function
  of its inputs;
* an edge of contribution 0 is never added; when no potential edge contributes any more
  the loop ends with the overlay still split (`construct_low_edges` says so in its result):
  a shadow set that cannot mend the overlay is the caller's to widen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations

from pubsub.topicgraph.graph import Components, Edge, Node, Topic, TopicOverlay, edge

#: ρ of Low-ODA, the paper's (and Onus and Richa's) default.
DEFAULT_RHO = 3.0


@dataclass
class Construction:
    """What `construct_low_edges` did: the edges it added, in order, and whether the topics
    it was asked for are connected now."""

    added: list[Edge] = field(default_factory=list)
    connected: bool = True


def find_low_edge(
    overlay: TopicOverlay, components: Components, potential: Iterable[Edge], rho: float
) -> tuple[Edge, int] | None:
    """findLowEdge(ρ) (Alg. 2 l.5): e1, the edge of largest contribution, unless
    contrib(e1) <= ρ·contrib(e2), where e2 has the largest contribution among the edges
    that raise the overlay's maximum degree least; then e2.  With its contribution; None
    when no potential edge contributes."""
    return _choose(overlay, _scored(components, sorted(edge(u, v) for u, v in potential)), rho)


def _scored(components: Components, edges: Iterable[Edge]) -> list[tuple[Edge, int]]:
    """The edges that contribute, with their contributions, in the order given."""
    return [(e, gain) for e in edges if (gain := components.contribution(*e)) > 0]


def _choose(overlay: TopicOverlay, scored: list[tuple[Edge, int]], rho: float) -> tuple[Edge, int] | None:
    """`find_low_edge`'s choice among `scored` edges, given in node order: the first of
    equals wins."""
    top = overlay.max_degree()
    e1: tuple[tuple[int, int], Edge, int] | None = None  # ((contribution, -larger degree), edge, contribution)
    e2: tuple[tuple[int, int, int], Edge, int] | None = None  # ((-cost, contribution, -larger), edge, contribution)
    for (u, v), gain in scored:
        larger = max(overlay.degree(u), overlay.degree(v))
        first = (gain, -larger)
        if e1 is None or first > e1[0]:
            e1 = (first, (u, v), gain)
        second = (-max(top, larger + 1), gain, -larger)
        if e2 is None or second > e2[0]:
            e2 = (second, (u, v), gain)
    if e1 is None or e2 is None:
        return None
    if e1[2] > rho * e2[2]:
        return e1[1], e1[2]
    return e2[1], e2[2]


def construct_low_edges(
    overlay: TopicOverlay, topics: Iterable[Topic], potential: Iterable[Edge], rho: float = DEFAULT_RHO
) -> Construction:
    """constructLowEdges(V, T, E_cur, E_pot) (Alg. 2): add to `overlay` (whose edges are
    E_cur) edges of `potential` one by one, chosen by `find_low_edge`, until every topic of
    `topics` is connected or no potential edge contributes.  The overlay is changed in
    place; the result lists the edges added."""
    components = Components(overlay, topics)
    shared = set(components.topics)
    # Only edges between two nodes that share a topic being connected can ever contribute,
    # and a contribution never grows as components merge: once 0, an edge is dropped.
    live = sorted({edge(u, v) for u, v in potential if overlay.shared(u, v) & shared and not overlay.has_edge(u, v)})
    done = Construction(connected=components.connected())
    while not done.connected:
        scored = _scored(components, live)  # an added edge contributes nothing any more
        live = [e for e, _ in scored]
        chosen = _choose(overlay, scored, rho)
        if chosen is None:
            break
        (u, v), _ = chosen
        overlay.add_edge(u, v)
        components.join(u, v)
        done.added.append((u, v))
        done.connected = components.connected()
    return done


def low_oda(topics_of: dict[Node, frozenset[Topic]] | TopicOverlay, rho: float = DEFAULT_RHO) -> TopicOverlay:
    """Low-ODA (Alg. 1): a TCO built from no edges, every pair of nodes a potential edge."""
    overlay = TopicOverlay(topics_of.topics) if isinstance(topics_of, TopicOverlay) else TopicOverlay(topics_of)
    construct_low_edges(overlay, overlay.subscribers, combinations(sorted(overlay.topics), 2), rho)
    return overlay
