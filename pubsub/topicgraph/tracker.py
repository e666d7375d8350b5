"""A general-graph topic's legitimacy over time (tco, omen), as the convergence analysis scans
it (pure Python).

`TopicGraphTracker` is tco's and omen's `pubsub.kernel.contracts.TopicTracker`: the analysis
(`pubsub.ops.analysis.timeline`) hands it each node's latest snapshot of one topic (its
``neighbours`` there and ``trie_root``, docs/events.md) in time order.  The snapshots are the
nodes' own: the tracker judges the topic from them alone -- every member's neighbours are
members that list it back, the edges connect the members (the topic is topic-connected),
and the trie roots agree.  Whether those tables are the supervisor's record is the
experiment runner's and `pubsub cluster status`'s check (each overlay's `legitimate`).

A TCO has no one legitimate overlay of a membership (Low-ODA and the repairs choose among
many), so `ideal_degrees` are the degrees of the overlay the nodes report, and
``labels_ok`` is always true (there are no labels).
"""

from __future__ import annotations

from typing import Any

from pubsub.kernel.contracts import Snapshot
from pubsub.topicgraph.reports import connected


def _neighbours(snapshot: Snapshot) -> frozenset[str]:
    held = snapshot.get("neighbours")
    if not isinstance(held, (list, tuple)):
        return frozenset()
    return frozenset(str(u) for u in held)


class TopicGraphTracker:
    """The current state of one topic of a general-graph overlay (module docstring)."""

    def __init__(self) -> None:
        self.neighbours: dict[str, frozenset[str]] = {}
        self.roots: dict[str, str] = {}

    def apply(self, ref: str, snapshot: Snapshot | None) -> None:
        if snapshot is None:
            self.neighbours.pop(ref, None)
            self.roots.pop(ref, None)
            return
        self.neighbours[ref] = _neighbours(snapshot) - {ref}
        self.roots[ref] = str(snapshot.get("trie_root") or "")

    def _confirmed(self, ref: str) -> int:
        """How many of `ref`'s neighbours are members that list it back."""
        return sum(1 for u in self.neighbours[ref] if ref in self.neighbours.get(u, ()))

    def measures(self) -> dict[str, Any]:
        n = len(self.neighbours)
        confirmed = {ref: self._confirmed(ref) for ref in self.neighbours}
        compared = sum(len(held) for held in self.neighbours.values())
        exact = sum(1 for ref, held in self.neighbours.items() if confirmed[ref] == len(held))
        edges = [(a, b) for a, held in self.neighbours.items() for b in held if b in self.neighbours]
        roots_equal = len(set(self.roots.values())) <= 1
        degrees = self.degrees()
        return {
            "members": n,
            "legitimate": n > 0 and exact == n and roots_equal and connected(self.neighbours, edges),
            "labels_ok": True,
            "roots_equal": roots_equal,
            "exact_nodes": exact,
            "correct_edges": sum(confirmed.values()),
            "compared_edges": compared,
            "mean_degree": sum(degrees) / n if n else 0.0,
            "max_degree": max(degrees, default=0),
        }

    def degrees(self) -> list[int]:
        """Each member's neighbours in the topic, as it reports them."""
        return [len(held) for held in self.neighbours.values()]

    def ideal_degrees(self) -> list[int]:
        """The reported degrees (a TCO has no one legitimate overlay: module docstring)."""
        return self.degrees()
