"""Shadow-based overlay repair (paper 003 Alg. 1, repairTcoOnChurn; §4.1).

Given the shadow set S of a churn event, the topics T_chev the event touches (a departed
node's topics, or a joiner's), the shadow nodes' topics I_S and the current edges E_cur,
add edges of E_pot = (S × S) minus E_cur one by one, each chosen by Low-ODA's rule
(paper 001's findLowEdge with ρ), until the overlay is topic-connected for T_chev.

What "topic-connected" is judged on is a setting (`CONNECTIVITY`):

* ``induced`` (the default, Alg. 1 l.2 read literally): the graph (S, E_new ∪ E_cur) -- the
  shadow nodes and the edges among them.  It is what a coordinator can know: it fetched the
  shadow nodes' topics and neighbours, nothing beyond.  Two shadow nodes joined only through
  a node outside S count as split, so the repair may add an edge the whole overlay did not
  need.
* ``global``: the true TC-components of the whole overlay (contributions counted as paper
  001 counts them).  Only a simulator, or OMen-G's global view, can know them.

Degrees are the nodes' real degrees in both: the shadow nodes' neighbours outside S are in
the induced graph as nodes with no topics, so they count for degrees and never for
connectivity.  Ties are broken as `pubsub.topicgraph.lowoda` breaks them, so a repair is a
function of its inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations

from pubsub.topicgraph.graph import Edge, Node, Topic, TopicOverlay, edge
from pubsub.topicgraph.lowoda import DEFAULT_RHO, construct_low_edges

CONNECTIVITY = ("induced", "global")


@dataclass
class Mended:
    """What one repair did: the edges added (E_new, in the order chosen) and whether the
    event's topics are connected afterwards, as the setting judges it."""

    added: list[Edge] = field(default_factory=list)
    connected: bool = True


def induced_overlay(
    shadow: Mapping[Node, Iterable[Topic]], neighbours: Mapping[Node, Iterable[Node]]
) -> TopicOverlay:
    """The graph a coordinator knows: the shadow nodes with their topics, every edge of a
    shadow node, and the far ends outside S as nodes without topics."""
    overlay = TopicOverlay({node: topics for node, topics in shadow.items()})
    for node in sorted(shadow):
        for other in sorted(set(neighbours.get(node, ())) - {node}):
            if other not in overlay.topics:
                overlay.add_node(other, ())
            overlay.add_edge(node, other)
    return overlay


def repair_tco_on_churn(
    overlay: TopicOverlay,
    shadow: Iterable[Node],
    topics: Iterable[Topic],
    *,
    connectivity: str = "induced",
    rho: float = DEFAULT_RHO,
) -> Mended:
    """Alg. 1 for the shadow set `shadow` in `overlay` -- the whole overlay, or what a
    coordinator knows of it (`induced_overlay`): the edges chosen are added to `overlay` in
    place.  With ``induced`` connectivity is judged among the shadow nodes alone, with
    ``global`` on all of `overlay`."""
    if connectivity not in CONNECTIVITY:
        raise ValueError(f"connectivity is one of {', '.join(CONNECTIVITY)}, not {connectivity!r}")
    members = sorted(set(shadow) & set(overlay.topics))
    wanted = sorted(set(topics))
    if connectivity == "induced":
        work = induced_overlay({n: overlay.topics[n] for n in members}, {n: overlay.neighbors[n] for n in members})
    else:
        work = overlay
    potential = [edge(u, v) for u, v in combinations(members, 2) if not overlay.has_edge(u, v)]
    done = construct_low_edges(work, wanted, potential, rho)
    if work is not overlay:
        for u, v in done.added:
            overlay.add_edge(u, v)
    return Mended(added=list(done.added), connected=done.connected)
