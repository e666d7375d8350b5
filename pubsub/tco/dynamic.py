"""Keeping a TCO under churn (paper 001 §V-B to §V-E): one node joins or leaves per round.

* `ShadowDynAlg` (Alg. 6-10): every node keeps backups (`pubsub.tco.backups`).  On a leave
  the shadow set is the leaving node's neighbours and backups, and Low-ODA's edge choice
  (`construct_low_edges`) runs on the edges among them, for the leaving node's topics; then
  the nodes that had it as a backup rebuild theirs (Alg. 7, 8).  On a join the joiner's
  backups are built first and the potential edges go from the joiner to them (Alg. 9, 10).
* `NaiveDynAlg` (Alg. 3, 4): the same with every node as the shadow set.
* `recompute` is the third baseline: Low-ODA from scratch on the nodes after the round.

Beyond the paper, `ShadowDynAlg.change`: a node that changes its topics, repaired as a leave
restricted to the topics it dropped (on the shadow set of its neighbours and backups) and a
join restricted to the topics it added (to its rebuilt backups); an edge left with no
shared topic is removed first, and the nodes that had it as a backup rebuild theirs.

Also beyond the paper: should a repair leave the overlay split -- possible only when it was not
a TCO before the round, or when a backup set fell short -- the round falls back to the
naive repair's potential edges (every pair) for the topics still split, and says so
(`Repair.widened`).  Contributions are always counted on the whole overlay's components.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations

from pubsub.tco.backups import DEFAULT_LAMBDA, BackupTable
from pubsub.topicgraph.graph import Edge, Node, Topic, TopicOverlay, edge
from pubsub.topicgraph.lowoda import DEFAULT_RHO, construct_low_edges, low_oda


@dataclass
class Repair:
    """One churn round: who joined or left, the shadow set used, the edges added and
    removed, the backups rebuilt, and whether the round had to widen its potential edges."""

    kind: str
    node: Node
    shadow: list[Node] = field(default_factory=list)
    added: list[Edge] = field(default_factory=list)
    removed: list[Edge] = field(default_factory=list)
    rebuilt: list[Node] = field(default_factory=list)
    widened: bool = False

    @property
    def changed(self) -> int:
        """The repair edge number (§VI-C): edges added or deleted by the round."""
        return len(self.added) + len(self.removed)


class _Dynamic:
    """What both dynamic algorithms share: the overlay, ρ, and the fallback."""

    def __init__(self, overlay: TopicOverlay, *, rho: float = DEFAULT_RHO) -> None:
        if rho <= 0:
            raise ValueError(f"ρ must be positive, not {rho}")
        self.overlay = overlay
        self.rho = rho

    def _construct(self, repair: Repair, topics: Iterable[Topic], potential: Iterable[Edge]) -> None:
        topics = sorted(set(topics))
        done = construct_low_edges(self.overlay, topics, potential, self.rho)
        repair.added += done.added
        if not done.connected:
            repair.widened = True
            split = self.overlay.split_topics(topics)
            wide = construct_low_edges(self.overlay, split, combinations(sorted(self.overlay.topics), 2), self.rho)
            repair.added += wide.added


class NaiveDynAlg(_Dynamic):
    """NaiveDynAlg (Alg. 3, 4)."""

    def join(self, node: Node, topics: Iterable[Topic]) -> Repair:
        """constructOverlayOnJoinNaively (Alg. 3): the joiner to every node."""
        self.overlay.add_node(node, topics)
        repair = Repair("join", node, shadow=sorted(self.overlay.topics))
        others = [edge(node, u) for u in sorted(self.overlay.topics) if u != node]
        self._construct(repair, self.overlay.topics[node], others)
        return repair

    def leave(self, node: Node) -> Repair:
        """constructOverlayOnLeaveNaively (Alg. 4): every pair of the nodes left."""
        topics = self.overlay.topics[node]
        repair = Repair("leave", node, removed=self.overlay.remove_node(node), shadow=sorted(self.overlay.topics))
        self._construct(repair, topics, combinations(sorted(self.overlay.topics), 2))
        return repair


class ShadowDynAlg(_Dynamic):
    """ShadowDynAlg (Alg. 6-10) with backups of coverage λ built by `method`."""

    def __init__(
        self,
        overlay: TopicOverlay,
        *,
        rng: random.Random,
        coverage: int = DEFAULT_LAMBDA,
        method: str = "primal-dual",
        rho: float = DEFAULT_RHO,
    ) -> None:
        super().__init__(overlay, rho=rho)
        if coverage < 1:
            raise ValueError(f"the coverage factor λ is at least 1, not {coverage}")
        self.coverage = coverage
        self.method = method
        self.rng = rng
        self.table = BackupTable()

    def _shadow(self, node: Node) -> list[Node]:
        """v.neighbors ∪ v.backups (Alg. 7 l.1), sorted."""
        return sorted((self.overlay.neighbors[node] | set(self.table.backups.get(node, []))) - {node})

    def build_backups(self) -> None:
        """buildBackupsForTCO (Alg. 6): every node's backups, in node order."""
        for node in sorted(self.overlay.topics):
            self.table.build(self.overlay, node, self.coverage, self.method, self.rng)

    def join(self, node: Node, topics: Iterable[Topic]) -> Repair:
        """buildBackupsOnJoin then repairOverlayOnJoinByShadows (Alg. 9, 10)."""
        self.overlay.add_node(node, topics)
        built = self.table.build(self.overlay, node, self.coverage, self.method, self.rng)
        repair = Repair("join", node, shadow=sorted({node, *built.backups}))
        self._construct(repair, self.overlay.topics[node], [edge(node, u) for u in sorted(built.backups)])
        return repair

    def leave(self, node: Node) -> Repair:
        """repairOverlayOnLeaveByShadows then updateBackupsOnLeave (Alg. 7, 8)."""
        shadow = self._shadow(node)
        topics = self.overlay.topics[node]
        repair = Repair("leave", node, shadow=shadow, removed=self.overlay.remove_node(node))
        orphans = self.table.remove_node(node)
        self._construct(repair, topics, combinations(shadow, 2))
        for primary in orphans:
            self.table.build(self.overlay, primary, self.coverage, self.method, self.rng)
        repair.rebuilt = orphans
        return repair

    def change(self, node: Node, topics: Iterable[Topic]) -> Repair:
        """A node's topics change (beyond the paper; see the module docstring)."""
        before = self.overlay.topics[node]
        after = frozenset(topics)
        dropped, added = before - after, after - before
        repair = Repair("change", node)
        if not dropped and not added:
            return repair
        shadow = self._shadow(node)
        self.overlay.set_topics(node, after)
        for other in sorted(self.overlay.neighbors[node]):
            if not self.overlay.shared(node, other):
                self.overlay.remove_edge(node, other)
                repair.removed.append(edge(node, other))
        if dropped:
            self._construct(repair, dropped, combinations(shadow, 2))
        built = self.table.build(self.overlay, node, self.coverage, self.method, self.rng)
        repair.shadow = sorted({node, *shadow, *built.backups})
        if added:
            self._construct(repair, added, [edge(node, u) for u in sorted(built.backups)])
        primaries = sorted(self.table.primaries.get(node, set()))
        for primary in primaries:
            self.table.build(self.overlay, primary, self.coverage, self.method, self.rng)
        repair.rebuilt = [node, *primaries]
        return repair


def recompute(overlay: TopicOverlay, rho: float = DEFAULT_RHO) -> tuple[TopicOverlay, int]:
    """Low-ODA from scratch on the same nodes (the static baseline): the new overlay and
    how many edges differ from `overlay`'s (its repair edge number)."""
    fresh = low_oda(overlay, rho)
    return fresh, len(fresh.edges() ^ overlay.edges())
