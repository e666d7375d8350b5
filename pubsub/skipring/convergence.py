"""The skip ring's legitimacy over time, as the convergence analysis scans it (pure Python).

`SkipRingTracker` is the skip ring's `pubsub.kernel.contracts.TopicTracker`: the analysis
(`pubsub.ops.analysis.timeline`) hands it each node's latest snapshot of one topic in time
order and asks for the measures after every instant.  Legitimacy is
`pubsub.skipring.ideal.is_legitimate`, computed incrementally: only the node that changed
is re-scored unless the membership or a label changed.
"""

from __future__ import annotations

from typing import Any

from pubsub.kernel.contracts import Snapshot
from pubsub.skipring.ideal import IdealNode, NodeView, edge_score, ideal_ring, is_canonical


def view_of(ref: str, snapshot: Snapshot) -> NodeView:
    """One node's snapshot (its fields ``label``, ``left``, ``right``, ``ring``,
    ``shortcuts`` and ``trie_root``, docs/events.md) as a `NodeView`, never raising:
    malformed fields count as wrong edges."""
    return NodeView.from_fields(ref, snapshot, snapshot.get("trie_root"))


class SkipRingTracker:
    """The current state of one topic and its incrementally maintained scores."""

    def __init__(self) -> None:
        self.views: dict[str, NodeView] = {}
        self.ideal: dict[str, IdealNode] = {}
        self.labels_ok = False
        self._dirty = True
        self._scores: dict[str, tuple[int, int, bool]] = {}
        self._degrees: dict[str, int] = {}

    def apply(self, ref: str, snapshot: Snapshot | None) -> None:
        """Replace one node's state (None: it is no member any more, or it died)."""
        old = self.views.get(ref)
        if snapshot is None:
            if old is not None:
                del self.views[ref]
                self._scores.pop(ref, None)
                self._degrees.pop(ref, None)
                self._dirty = True
            return
        view = view_of(ref, snapshot)
        self.views[ref] = view
        self._degrees[ref] = len(view.neighbours())
        if old is None or old.label != view.label:
            self._dirty = True
        elif not self._dirty:
            self._scores[ref] = self._score(ref, view)

    def _score(self, ref: str, view: NodeView) -> tuple[int, int, bool]:
        want = self.ideal.get(ref)
        correct, compared = edge_score(want, view)
        exact = want is not None and view.label == want.label and correct == compared
        return (correct, compared, exact)

    def _refresh(self) -> None:
        """Recompute the ideal ring of the current members when the membership or a label
        changed since the last look."""
        if self._dirty:
            labels = {ref: v.label for ref, v in self.views.items() if v.label is not None}
            self.ideal = ideal_ring(labels)
            self.labels_ok = is_canonical(v.label for v in self.views.values())
            self._scores = {ref: self._score(ref, v) for ref, v in self.views.items()}
            self._dirty = False

    def measures(self) -> dict[str, Any]:
        """The measures of the current state (`TopicTracker.measures`)."""
        self._refresh()
        n = len(self.views)
        correct = sum(s[0] for s in self._scores.values())
        compared = sum(s[1] for s in self._scores.values())
        exact = sum(1 for s in self._scores.values() if s[2])
        roots_equal = len({v.trie_root for v in self.views.values()}) <= 1
        degrees = self.degrees()
        return {
            "members": n,
            "legitimate": n > 0 and self.labels_ok and roots_equal and exact == n,
            "labels_ok": self.labels_ok,
            "roots_equal": roots_equal,
            "exact_nodes": exact,
            "correct_edges": correct,
            "compared_edges": compared,
            "mean_degree": sum(degrees) / n if n else 0.0,
            "max_degree": max(degrees, default=0),
        }

    def degrees(self) -> list[int]:
        """Each member's degree: distinct neighbours among left, right, ring, shortcuts."""
        return list(self._degrees.values())

    def ideal_degrees(self) -> list[int]:
        """Degrees the current members would have in their ideal ring (undirected view of
        each member's own table, as for `degrees`)."""
        self._refresh()
        return [len(node.neighbours() - {ref}) for ref, node in self.ideal.items()]
