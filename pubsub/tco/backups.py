"""Backup sets and primaries (paper 001 §V-C, §V-G; Struct 5, Alg. 11 and 12).

A node's backups are other nodes that share a topic with it (property (1)) and together
cover every topic it subscribes to (property (2)), λ times: the union of λ disjoint set
covers of ``v.topics`` by the candidates' topics, each an approximate minimum weight set
cover where a candidate u weighs ``|u.neighbors| + |u.primaries|``.  A node's primaries are
the nodes it is a backup of: `BackupTable` keeps them the exact reverse of the backups.

* `build_greedily` (Alg. 11): the greedy set cover -- the candidate of least weight per
  topic still uncovered.
* `build_by_primal_dual` (Alg. 12): pick an uncovered topic at random, take its candidate
  of least (residual) weight, and lower every candidate of that topic by the weight paid.
  A residual weight never goes below 0 (the individual commitment of each candidate is
  bounded by its weight); a candidate at 0 is not taken again in that cover.

Choices the paper leaves open, as taken here: ties go to the smaller node (node order);
a topic no candidate can cover (nobody else subscribes to it, or every candidate of it is
spent in this cover) is left uncovered in that cover -- the loop ends -- and counted in
`Built.short`; "randomly pick" uses the `random.Random` passed in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pubsub.topicgraph.graph import Node, Topic, TopicOverlay

#: λ, the coverage factor: the paper's default (§V-G).
DEFAULT_LAMBDA = 3
METHODS = ("primal-dual", "greedy")


@dataclass
class Built:
    """One node's backup set as built: the backups in the order chosen, and per topic how
    many of the λ covers could not cover it (0 when every cover did)."""

    backups: list[Node] = field(default_factory=list)
    short: dict[Topic, int] = field(default_factory=dict)


class BackupTable:
    """v.backups and v.primaries for every node (Struct 5)."""

    def __init__(self) -> None:
        self.backups: dict[Node, list[Node]] = {}
        self.primaries: dict[Node, set[Node]] = {}
        #: Per node, the topics its backups cover fewer than λ times, and by how much.
        self.short: dict[Node, dict[Topic, int]] = {}
        #: The nodes whose backups or primaries changed since the holder last cleared it.
        self.touched: set[Node] = set()

    def weight(self, overlay: TopicOverlay, node: Node) -> int:
        """|u.neighbors| + |u.primaries| (Alg. 11 l.8, Alg. 12 l.5)."""
        return overlay.degree(node) + len(self.primaries.get(node, ()))

    def clear(self, node: Node) -> None:
        """Forget `node`'s backups (and it as their primary)."""
        self.touched.add(node)
        for backup in self.backups.pop(node, []):
            self.primaries.get(backup, set()).discard(node)
            self.touched.add(backup)
        self.short.pop(node, None)

    def assign(self, node: Node, backups: list[Node]) -> None:
        """Set `node`'s backups as given (a table read back, or a stated example), with
        the primaries to match."""
        self.clear(node)
        for backup in backups:
            self._take(node, backup)

    def _take(self, node: Node, backup: Node) -> None:
        self.backups.setdefault(node, []).append(backup)
        self.primaries.setdefault(backup, set()).add(node)
        self.touched |= {node, backup}

    def remove_node(self, node: Node) -> list[Node]:
        """`node` leaves: its backups are forgotten and it is nobody's backup any more;
        the nodes that had it as a backup (its primaries, sorted), whose backups must be
        rebuilt (Alg. 8)."""
        self.clear(node)
        orphans = sorted(self.primaries.pop(node, set()))
        self.touched.update(orphans)
        for primary in orphans:
            self.backups[primary] = [b for b in self.backups.get(primary, []) if b != node]
        return orphans

    def build(
        self, overlay: TopicOverlay, node: Node, coverage: int, method: str, rng: random.Random
    ) -> Built:
        """buildBackupsAt(v) with the chosen method ("primal-dual" or "greedy")."""
        if method == "greedy":
            return self.build_greedily(overlay, node, coverage)
        if method == "primal-dual":
            return self.build_by_primal_dual(overlay, node, coverage, rng)
        raise ValueError(f"no backup method {method!r}; choose one of {', '.join(METHODS)}")

    def build_greedily(self, overlay: TopicOverlay, node: Node, coverage: int) -> Built:
        """buildBackupsGreedilyAt(v, λ) (Alg. 11)."""
        _check_coverage(coverage)
        self.clear(node)
        built = Built()
        wanted = overlay.topics[node]
        for _ in range(coverage):
            rest = set(wanted)
            candidates = set(overlay.topics) - {node} - set(built.backups)
            while rest and candidates:
                candidates = {u for u in candidates if overlay.topics[u] & rest}
                if not candidates:
                    break
                best = min(
                    sorted(candidates),
                    key=lambda u: self.weight(overlay, u) / len(overlay.topics[u] & rest),
                )
                self._take(node, best)
                built.backups.append(best)
                rest -= overlay.topics[best]
                candidates.discard(best)
            for topic in rest:
                built.short[topic] = built.short.get(topic, 0) + 1
        self._note(node, built)
        return built

    def build_by_primal_dual(self, overlay: TopicOverlay, node: Node, coverage: int, rng: random.Random) -> Built:
        """buildBackupsByPDAt(v, λ) (Alg. 12)."""
        _check_coverage(coverage)
        self.clear(node)
        built = Built()
        wanted = overlay.topics[node]
        for _ in range(coverage):
            rest = set(wanted)
            residual = {
                u: self.weight(overlay, u) for u in sorted(set(overlay.topics) - {node} - set(built.backups))
            }
            while rest:
                topic = rng.choice(sorted(rest))
                candidates = [u for u in sorted(overlay.subscribers[topic]) if residual.get(u, 0) > 0]
                if not candidates:  # nobody left to cover it in this cover: Alg. 12 must end
                    rest.discard(topic)
                    built.short[topic] = built.short.get(topic, 0) + 1
                    continue
                best = min(candidates, key=lambda u: residual[u])
                paid = residual[best]
                self._take(node, best)
                built.backups.append(best)
                rest -= overlay.topics[best]
                for u in candidates:
                    residual[u] -= paid
                    assert residual[u] >= 0  # the individual commitment stays within the weight
        self._note(node, built)
        return built

    def _note(self, node: Node, built: Built) -> None:
        if built.short:
            self.short[node] = dict(built.short)

    def check(self, overlay: TopicOverlay) -> list[str]:
        """What breaks the tables' invariants: a backup that is not a node or shares no
        topic, a backup twice, primaries that are not the exact reverse of the backups."""
        problems = []
        reverse: dict[Node, set[Node]] = {}
        for node, backups in self.backups.items():
            if len(set(backups)) != len(backups):
                problems.append(f"{node} has a backup twice")
            for backup in backups:
                if backup not in overlay.topics or node not in overlay.topics:
                    problems.append(f"{node} -> {backup}: not a node")
                elif not overlay.shared(node, backup):
                    problems.append(f"{node} -> {backup}: no shared topic")
                reverse.setdefault(backup, set()).add(node)
        mine = {n: p for n, p in self.primaries.items() if p}
        if mine != reverse:
            problems.append("primaries are not the reverse of the backups")
        return problems


def _check_coverage(coverage: int) -> None:
    if coverage < 1:
        raise ValueError(f"the coverage factor λ is at least 1, not {coverage}")
