"""SpiderCast(K_g, K_r), the decentralised baseline paper 003 compares OMen with (§6.1,
Table 3; the protocol itself is Chockler et al., DEBS'07, the paper's ref [9]).

A pure core on `pubsub.topicgraph.graph.TopicOverlay`: no I/O, every random choice from the
`random.Random` handed in, every iteration that can decide a choice over sorted values.

What is implemented
-------------------
Each node chooses its own neighbours with two local heuristics, run in this order:

* **random coverage**: for every topic t of the node, it keeps K_r neighbours it picked for
  t uniformly at random among t's other subscribers.  A pick that is a neighbour already
  counts without a new edge; a topic with fewer other subscribers than K_r is covered by
  as many as there are.
* **greedy coverage**: while some topic t of the node has fewer than
  ``wanted(t) = min(K_g + K_r, |subscribers(t)| - 1)`` neighbours subscribing to t (its
  *coverage*), the node links to the candidate that subscribes to the most of those
  still under-covered topics; ties are broken by a random rank drawn per candidate.

Paper 003 says nothing of churn in SpiderCast beyond one sentence (§6.1): on a churn
event every node the event leaves topic-disconnected runs the heuristics again.  Here:

* a **join** is the joiner running both heuristics (the others' coverage only grows);
* a **leave** removes the node and its edges; each former neighbour that is now short
  (some topic covered fewer times than `wanted`, or fewer random picks than K_r where
  that many other subscribers exist) runs both heuristics again, in a seeded random order,
  each one seeing the edges the ones before it added;
* the initial **build** is every node joining in a seeded random order, each seeing the
  edges of those before it.  Edges are only ever added, so after one pass every node's
  coverage is what it wants.

What is my reading (inferred, not in paper 003)
-----------------------------------------------
* **Edges are symmetric**: an edge either end chose counts for both ends' coverage (the
  original's links are connections both ends use).
* **The coverage target is K_g + K_r in total**: random coverage picks K_r of them, greedy
  coverage tops the rest up counting every neighbour, random or greedy, chosen by either
  end.  This makes SpiderCast(3, 1) and SpiderCast(4, 0) aim at the same coverage, 4,
  and the random picks, being less efficient than greedy ones, give (3, 1) more edges,
  which is what §6.5 reports.
* **No degree bound**, and **no pruning** of over-covered links: edges go only when an
  end leaves (paper 003 describes SpiderCast as lacking degree bounds, and its degrees
  as growing under churn, §6.5).
* **Global knowledge of candidates**: as the simulator baseline, a node knows every
  present node's topics (the original learns them from a gossiped partial membership
  view; §6.8 counts that gossip separately).
* **"Topic-disconnected" is detected locally** as a coverage shortfall: a node cannot see
  whether a topic's sub-graph is split, only that it lost coverage.  A node whose
  coverage is still met after a leave does nothing, even if the leave split a topic
  elsewhere.  SpiderCast therefore does not guarantee a TCO; every result reports the
  topics that are split after it (`ChurnResult.split`).

Messages per churn event (§6.8, my model)
-----------------------------------------
A decentralised run sends `REQUEST_AND_ANSWER` = 2 messages per edge added (the chooser's
connect request and the other end's answer) and `NOTICE` = 1 per neighbour of a departed
node (it learns that the link is gone).  A random pick that is a neighbour already costs
nothing.  Membership gossip and failure detection are left out, as §6.8 leaves the failure
detector out and the gossip is periodic, not per event.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from pubsub.topicgraph.graph import Edge, Node, Topic, TopicOverlay, edge

#: Messages for one edge added: the connect request and its answer.
REQUEST_AND_ANSWER = 2
#: Messages per neighbour of a departed node: the notice that the link is gone.
NOTICE = 1

EventKind = Literal["build", "join", "leave"]


@dataclass(frozen=True)
class SpiderCastParams:
    """K_g (greedy coverage) and K_r (random coverage), Table 3."""

    k_greedy: int
    k_random: int

    def __post_init__(self) -> None:
        if self.k_greedy < 0 or self.k_random < 0 or self.k_greedy + self.k_random < 1:
            raise ValueError("need K_g >= 0, K_r >= 0 and K_g + K_r >= 1")

    @property
    def coverage(self) -> int:
        """The coverage a node wants per topic: K_g + K_r."""
        return self.k_greedy + self.k_random

    @property
    def name(self) -> str:
        return f"SpiderCast({self.k_greedy},{self.k_random})"


#: The two settings paper 003 runs (§6.1, Table 3, after ref [9]).
SPIDERCAST_3_1 = SpiderCastParams(3, 1)
SPIDERCAST_4_0 = SpiderCastParams(4, 0)
PRESETS: dict[str, SpiderCastParams] = {p.name: p for p in (SPIDERCAST_3_1, SPIDERCAST_4_0)}


@dataclass(frozen=True)
class ChurnResult:
    """What one event did: the edges added and removed, the nodes that ran the heuristics
    (in order), the neighbours notified of a departure, and the topics of the event's
    node (every topic, for a build) that are split after it."""

    kind: EventKind
    node: Node | None
    added: tuple[Edge, ...]
    removed: tuple[Edge, ...]
    ran: tuple[Node, ...]
    notified: int
    split: tuple[Topic, ...]

    @property
    def messages(self) -> int:
        """Messages a decentralised run would send for this event (module docstring)."""
        return REQUEST_AND_ANSWER * len(self.added) + NOTICE * self.notified

    @property
    def topic_connected(self) -> bool:
        return not self.split


@dataclass
class _Run:
    """The edges one event added, in order."""

    added: list[Edge] = field(default_factory=list)


class SpiderCast:
    """A SpiderCast overlay under churn (§6.1): `build`, then `join` and `leave`."""

    def __init__(self, params: SpiderCastParams, rng: random.Random) -> None:
        self.params = params
        self.rng = rng
        self.overlay = TopicOverlay()
        #: node -> topic -> the neighbours it picked at random for that topic.
        self.random_picks: dict[Node, dict[Topic, set[Node]]] = {}

    # ------------------------------------------------------------------ events
    def build(self, topics_of: Mapping[Node, Iterable[Topic]]) -> ChurnResult:
        """Every node of `topics_of` joins, in a seeded random order; the result's `split`
        holds every split topic of the whole overlay."""
        if self.overlay.topics:
            raise ValueError("build starts from an empty overlay")
        for node in sorted(topics_of):
            self._add(node, topics_of[node])
        order = sorted(topics_of)
        self.rng.shuffle(order)
        run = _Run()
        for node in order:
            self._select(node, run)
        return ChurnResult("build", None, tuple(run.added), (), tuple(order), 0,
                           tuple(self.overlay.split_topics()))

    def join(self, node: Node, topics: Iterable[Topic]) -> ChurnResult:
        """`node` arrives with `topics` and picks its neighbours."""
        self._add(node, topics)
        run = _Run()
        self._select(node, run)
        return ChurnResult("join", node, tuple(run.added), (), (node,), 0,
                           tuple(self.overlay.split_topics(self.overlay.topics[node])))

    def leave(self, node: Node) -> ChurnResult:
        """`node` goes; each former neighbour left short of coverage repairs itself."""
        if node not in self.overlay.topics:
            raise ValueError(f"node {node!r} is not in the overlay")
        topics = self.overlay.topics[node]
        former = sorted(self.overlay.neighbors[node])
        removed = self.overlay.remove_node(node)
        del self.random_picks[node]
        for other in former:
            for picked in self.random_picks[other].values():
                picked.discard(node)
        short = [other for other in former if self.short(other)]
        self.rng.shuffle(short)
        run = _Run()
        for other in short:
            self._select(other, run)
        return ChurnResult("leave", node, tuple(run.added), tuple(removed), tuple(short), len(former),
                           tuple(self.overlay.split_topics(topics)))

    # ------------------------------------------------------------------ coverage
    def wanted(self, topic: Topic) -> int:
        """Neighbours a subscriber of `topic` wants in it: K_g + K_r, or all the others."""
        return min(self.params.coverage, len(self.overlay.subscribers.get(topic, ())) - 1)

    def wanted_random(self, topic: Topic) -> int:
        return min(self.params.k_random, len(self.overlay.subscribers.get(topic, ())) - 1)

    def coverage(self, node: Node) -> dict[Topic, int]:
        """topic of `node` -> how many of its neighbours subscribe to it."""
        mine = self.overlay.topics[node]
        count = dict.fromkeys(mine, 0)
        for other in self.overlay.neighbors[node]:
            for topic in self.overlay.topics[other] & mine:
                count[topic] += 1
        return count

    def under_covered(self, node: Node) -> list[Topic]:
        """The topics of `node` covered fewer times than it wants, sorted."""
        return sorted(t for t, c in self.coverage(node).items() if c < self.wanted(t))

    def short(self, node: Node) -> bool:
        """Whether `node` would run the heuristics: a topic under-covered, or short of
        random picks."""
        picks = self.random_picks[node]
        if any(len(picks.get(t, ())) < self.wanted_random(t) for t in self.overlay.topics[node]):
            return True
        return bool(self.under_covered(node))

    def split_topics(self) -> list[Topic]:
        return self.overlay.split_topics()

    def is_topic_connected(self) -> bool:
        return self.overlay.is_topic_connected()

    # ------------------------------------------------------------------ the heuristics
    def _add(self, node: Node, topics: Iterable[Topic]) -> None:
        self.overlay.add_node(node, topics)
        self.random_picks[node] = {}

    def _link(self, u: Node, v: Node, run: _Run) -> None:
        self.overlay.add_edge(u, v)
        run.added.append(edge(u, v))

    def _select(self, node: Node, run: _Run) -> None:
        self._random_coverage(node, run)
        self._greedy_coverage(node, run)

    def _random_coverage(self, node: Node, run: _Run) -> None:
        picks = self.random_picks[node]
        neighbours = self.overlay.neighbors[node]
        for topic in sorted(self.overlay.topics[node]):
            mine = picks.setdefault(topic, set())
            need = self.wanted_random(topic) - len(mine)
            if need <= 0:
                continue
            pool = sorted(self.overlay.subscribers[topic] - mine - {node})
            for other in self.rng.sample(pool, need):
                mine.add(other)
                if other not in neighbours:
                    self._link(node, other, run)

    def _greedy_coverage(self, node: Node, run: _Run) -> None:
        overlay = self.overlay
        cover = self.coverage(node)
        missing = {t: self.wanted(t) - c for t, c in cover.items() if c < self.wanted(t)}
        if not missing:
            return
        neighbours = overlay.neighbors[node]
        gain: dict[Node, int] = {}
        for topic in missing:
            for other in overlay.subscribers[topic]:
                if other != node and other not in neighbours:
                    gain[other] = gain.get(other, 0) + 1
        heap = [(-g, self.rng.random(), other) for other, g in sorted(gain.items())]
        heapq.heapify(heap)
        while missing and heap:
            negative, rank, other = heapq.heappop(heap)
            if other in neighbours:
                continue
            if gain[other] != -negative:  # gains only fall: a stale entry goes back lower
                if gain[other] > 0:
                    heapq.heappush(heap, (-gain[other], rank, other))
                continue
            self._link(node, other, run)
            for topic in sorted(overlay.topics[other] & missing.keys()):
                missing[topic] -= 1
                if missing[topic] == 0:
                    del missing[topic]
                    for member in overlay.subscribers[topic]:
                        if member in gain:
                            gain[member] -= 1


def build_spidercast(
    topics_of: Mapping[Node, Iterable[Topic]], params: SpiderCastParams, rng: random.Random
) -> tuple[SpiderCast, ChurnResult]:
    """A SpiderCast overlay built on `topics_of`, and what the build did."""
    spider = SpiderCast(params, rng)
    return spider, spider.build(topics_of)
