"""Backup sets built as `pubsub.tco.backups.BackupTable` builds them -- the same backups in the
same order, the same topics short, the same draws from the random generator -- at the cost
the benchmarks can pay at the paper's 2,000 nodes (about 20× less than the reference).

The reference reads every node on every step: primal-dual sets a residual weight for every
node at the start of each cover, greedy filters and sorts every candidate on every pick.
Here:

* primal-dual (Alg. 12) reads a node's weight when a drawn topic first offers it as a
  candidate.  That is the weight the reference set at the cover's start: within one build
  only the backups taken change weight (they gain a primary), and a backup taken was a
  candidate already, its residual read before it was taken;
* greedy (Alg. 11) keeps, per candidate, how many of the topics still uncovered it
  subscribes to, lowered as topics are covered, and picks the least weight / count with
  numpy -- the first in node order among equals, as the reference's `min` over the sorted
  candidates; the ratio is the same IEEE division of the same two integers.

`tests/tco/test_fastoda.py` builds both tables on the same overlays, under churn, and
compares them.
"""

from __future__ import annotations

import random

import numpy as np

from pubsub.tco.backups import BackupTable, Built
from pubsub.topicgraph.graph import Node, TopicOverlay


def _check(coverage: int) -> None:
    if coverage < 1:
        raise ValueError(f"the coverage factor λ is at least 1, not {coverage}")


class FastBackupTable(BackupTable):
    """A `BackupTable` whose two builds are faster and choose the same backups."""

    def build_by_primal_dual(self, overlay: TopicOverlay, node: Node, coverage: int, rng: random.Random) -> Built:
        """buildBackupsByPDAt(v, λ) (Alg. 12), as `BackupTable.build_by_primal_dual`."""
        _check(coverage)
        self.clear(node)
        built = Built()
        wanted = overlay.topics[node]
        for _ in range(coverage):
            rest = set(wanted)
            excluded = {node, *built.backups}
            residual: dict[Node, int] = {}
            while rest:
                topic = rng.choice(sorted(rest))
                candidates = []
                for u in sorted(overlay.subscribers[topic]):
                    if u in excluded:
                        continue
                    left = residual.get(u)
                    if left is None:
                        left = residual[u] = self.weight(overlay, u)
                    if left > 0:
                        candidates.append(u)
                if not candidates:
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
                    assert residual[u] >= 0
        self._note(node, built)
        return built

    def build_greedily(self, overlay: TopicOverlay, node: Node, coverage: int) -> Built:
        """buildBackupsGreedilyAt(v, λ) (Alg. 11), as `BackupTable.build_greedily`."""
        _check(coverage)
        self.clear(node)
        built = Built()
        wanted = overlay.topics[node]
        for _ in range(coverage):
            rest = set(wanted)
            excluded = {node, *built.backups}
            candidates = sorted({u for t in rest for u in overlay.subscribers.get(t, ()) if u not in excluded})
            at = {u: i for i, u in enumerate(candidates)}
            count = np.zeros(len(candidates), dtype=np.float64)
            for t in rest:
                count[[at[u] for u in overlay.subscribers.get(t, ()) if u in at]] += 1
            weight = np.array([self.weight(overlay, u) for u in candidates], dtype=np.float64)
            while rest and candidates:
                live = count > 0
                if not live.any():
                    break
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.where(live, weight / count, np.inf)
                i = int(np.argmin(ratio))
                best = candidates[i]
                self._take(node, best)
                built.backups.append(best)
                for t in overlay.topics[best] & rest:
                    count[[at[u] for u in overlay.subscribers[t] if u in at]] -= 1
                rest -= overlay.topics[best]
                count[i] = 0  # taken: not a candidate again (its count is 0 already)
            for topic in rest:
                built.short[topic] = built.short.get(topic, 0) + 1
        self._note(node, built)
        return built
