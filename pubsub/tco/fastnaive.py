"""NaiveDynAlg's leave repair (paper 001 Alg. 4) with the reference's edges, in the reference's
order, without reading every pair of nodes.

`pubsub.tco.dynamic.NaiveDynAlg.leave` hands `construct_low_edges` every pair of the nodes
left (two million at 2,000 nodes), restricted to the leaving node's topics.  Only a pair
that joins two TC-components of one of those topics contributes, and such a pair shares that
topic and is no edge; contributions never grow as components merge, and the choice on every
step is among the pairs that contribute, in node order.  So the pairs across two components
of a topic the leave split -- computed once, before the first edge -- are all the pairs the
reference ever scores, and `construct_low_edges` on them alone, sorted as the reference
sorts, makes the reference's choices edge for edge (`tests/tco/test_fastoda.py` runs both
under churn and compares every round).  A repair of a few split topics reads thousands of
pairs instead of millions.

The join repair (Alg. 3: the joiner to every node, a linear number of pairs) is the
reference's, inherited.
"""

from __future__ import annotations

from pubsub.tco.dynamic import NaiveDynAlg, Repair
from pubsub.topicgraph.graph import Edge, Node, Topic, TopicOverlay, edge


def crossing_pairs(overlay: TopicOverlay, topics: frozenset[Topic]) -> set[Edge]:
    """The pairs of nodes in two different TC-components of one of `topics`."""
    pairs: set[Edge] = set()
    for topic in sorted(topics & set(overlay.subscribers)):
        parts = [sorted(part) for part in overlay.components(topic)]
        for i, part in enumerate(parts):
            for other in parts[i + 1:]:
                pairs.update(edge(u, v) for u in part for v in other)
    return pairs


class FastNaiveDynAlg(NaiveDynAlg):
    """NaiveDynAlg whose leave repair reads only the pairs that can contribute."""

    def leave(self, node: Node) -> Repair:
        """constructOverlayOnLeaveNaively (Alg. 4), as `NaiveDynAlg.leave`."""
        topics = self.overlay.topics[node]
        repair = Repair("leave", node, removed=self.overlay.remove_node(node), shadow=sorted(self.overlay.topics))
        self._construct(repair, topics, crossing_pairs(self.overlay, topics))
        return repair
