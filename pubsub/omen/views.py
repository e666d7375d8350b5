"""A node's local view (paper 003 Alg. 2, Alg. 4; §4.2-§4.3).

For each predecessor v' in its L-predecessor range a node v keeps three entries: v.B(v'),
the backup set it builds for v'; v.N(v'), v''s TCO neighbours as v' last told; v.R(v'),
whether that backup set is ready.  They are filled from node descriptors (`Descriptor`:
a node's reference, topics and neighbours, as the node itself last gave them, with a
counter that orders its descriptors), which arrive by gossip (`pubsub.omen.tman`).

buildBackups (§4.2) runs the primal-dual set cover over the known candidates, λ times:
each time an uncovered topic of v' is picked at random, the candidate of that topic with the
least residual weight is taken and every candidate of the topic pays its weight.  A
candidate's weight is its degree plus one: the |u.neighbors| part of paper 001's weight; the
other part, |u.primaries|, is the number of nodes that chose u as a backup, which in OMen sits
at the choosers' successors and is known to nobody (INFERRED: the degree alone, plus one so
that a node without edges costs something and is not taken free).  A candidate whose
residual weight reaches 0 is spent for the rest of that cover, as in paper 001's Alg. 12.  Individual
commitment (Eq. 2) holds by construction: only subscribers of an uncovered topic of v' are
candidates.  v.R(v') is set once every topic of v' is covered λ times (Eq. 3's coverage
factor reaches λ).  A topic no known candidate subscribes to keeps the view unready; a
coordinator that waits past its ready timeout repairs with what it has (`pubsub.omen.churn`).

getView (Alg. 4) is every descriptor the node holds for the nodes in its B and N entries;
the node keeps no other descriptors than those and its predecessors', so at most 2L
predecessors' entries (§5) and their members are held.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pubsub.topicgraph.graph import Node, Topic

#: λ: paper 003's default coverage factor (§6.4).
DEFAULT_LAMBDA = 5
METHODS = ("primal-dual", "greedy")


@dataclass(frozen=True)
class Descriptor:
    """What a node says about itself: its topics and TCO neighbours; `version` grows with
    every change, so the newer of two descriptors wins."""

    node: Node
    topics: frozenset[Topic]
    neighbours: frozenset[Node] = frozenset()
    version: int = 0


def newest(known: Mapping[Node, Descriptor], arrived: Iterable[Descriptor]) -> dict[Node, Descriptor]:
    """`known` updated with the `arrived` descriptors that are newer."""
    merged = dict(known)
    for d in arrived:
        held = merged.get(d.node)
        if held is None or d.version > held.version:
            merged[d.node] = d
    return merged


def coverage(topics: Iterable[Topic], backups: Iterable[Descriptor]) -> int:
    """λ(B(v')) (Eq. 3): the least number of backups that subscribe to a topic of v'."""
    held = list(backups)
    return min((sum(1 for b in held if t in b.topics) for t in topics), default=0)


@dataclass
class Backups:
    """buildBackups' result: the backups in the order taken and whether they are ready."""

    chosen: list[Node] = field(default_factory=list)
    ready: bool = True


def build_backups(
    target: Descriptor,
    candidates: Mapping[Node, Descriptor],
    coverage_factor: int,
    rng: random.Random,
    method: str = "primal-dual",
) -> Backups:
    """buildBackupsByPD (or buildBackupsGreedily) for `target` from `candidates` (§4.2)."""
    if coverage_factor < 1:
        raise ValueError(f"the coverage factor λ is at least 1, not {coverage_factor}")
    if method not in METHODS:
        raise ValueError(f"no backup method {method!r}; choose one of {', '.join(METHODS)}")
    pool = {n: d for n, d in candidates.items() if n != target.node and d.topics & target.topics}
    built = Backups()
    for _ in range(coverage_factor):
        rest = set(target.topics)
        residual = {n: len(pool[n].neighbours) + 1 for n in sorted(pool) if n not in built.chosen}
        while rest:
            if method == "greedy":
                options = [n for n in residual if pool[n].topics & rest]
                if not options:
                    built.ready = False
                    break
                best = min(options, key=lambda n: (residual[n] / len(pool[n].topics & rest), n))
            else:
                topic = rng.choice(sorted(rest))
                options = [n for n in residual if topic in pool[n].topics]
                if not options:
                    rest.discard(topic)
                    built.ready = False
                    continue
                best = min(options, key=lambda n: (residual[n], n))
                paid = residual[best]
                for n in options:
                    residual[n] -= paid
            built.chosen.append(best)
            rest -= pool[best].topics
            del residual[best]
            residual = {n: w for n, w in residual.items() if w > 0 or method == "greedy"}
    return built


class LocalView:
    """v.B, v.N and v.R (Alg. 2) for the predecessors a node is told it has, with the
    descriptors they are made of."""

    def __init__(self, me: Descriptor, coverage_factor: int = DEFAULT_LAMBDA, method: str = "primal-dual") -> None:
        self.me = me
        self.coverage_factor = coverage_factor
        self.method = method
        self.B: dict[Node, list[Node]] = {}
        self.N: dict[Node, frozenset[Node]] = {}
        self.R: dict[Node, bool] = {}
        #: The descriptors held: the predecessors' and their B and N members'.
        self.known: dict[Node, Descriptor] = {}
        #: The predecessors whose entries are kept (set by `keep`).
        self.preds: list[Node] = []

    def keep(self, preds: Iterable[Node]) -> list[Node]:
        """The node's predecessors are now `preds` (its L-predecessor range, and those of
        events it still coordinates); entries of others are cleaned (gcChurnEvent, Alg. 5).
        The predecessors whose entries were dropped."""
        self.preds = list(dict.fromkeys(preds))
        dropped = [p for p in list(self.B) + list(self.N) if p not in self.preds]
        for p in dropped:
            self.forget(p)
        self._prune()
        return sorted(set(dropped))

    def forget(self, pred: Node) -> None:
        self.B.pop(pred, None)
        self.N.pop(pred, None)
        self.R.pop(pred, None)

    def get_view(self) -> list[Descriptor]:
        """getView (Alg. 4): the descriptors of every node in v.B and v.N, and of the
        predecessors themselves."""
        members = set(self.preds) | {n for b in self.B.values() for n in b} | {n for s in self.N.values() for n in s}
        return [self.known[n] for n in sorted(members) if n in self.known]

    def select_view(self, candidates: Iterable[Descriptor], rng: random.Random) -> None:
        """selectView (Alg. 4): for every predecessor, its neighbours as it last told, and
        its backups rebuilt from the candidates and the view."""
        pool = newest(self.known, [*candidates, self.me])
        pool[self.me.node] = self.me
        for pred in self.preds:
            target = pool.get(pred)
            if target is None:
                continue
            self.N[pred] = target.neighbours
            built = build_backups(target, pool, self.coverage_factor, rng, self.method)
            self.B[pred] = built.chosen
            self.R[pred] = built.ready
        self.known = pool
        self._prune()

    def shadow(self, pred: Node) -> list[Node]:
        """S = B(v') ∪ N(v') for a departed predecessor (§3.2), sorted."""
        return sorted((set(self.B.get(pred, ())) | set(self.N.get(pred, ()))) - {pred})

    def _prune(self) -> None:
        wanted = set(self.preds) | {self.me.node}
        wanted |= {n for b in self.B.values() for n in b} | {n for s in self.N.values() for n in s}
        self.known = {n: d for n, d in self.known.items() if n in wanted}

    def held(self) -> int:
        """How many predecessors' entries are held (§5: at most 2L)."""
        return len(set(self.B) | set(self.N))
