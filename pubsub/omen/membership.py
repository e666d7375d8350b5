"""The `omen` supervisor's core: membership only (paper 003 assumes a DHT and a failure
detector; the supervisor stands in for both, §3.1, §3.3).

It keeps the identifier circle of the live nodes and their topics.  On a join, a graceful
leave or a detected crash it

* puts the node on the circle or takes it off,
* sends the churn event (`OmenChurn`) to the node's L successors -- a join's with, per topic,
  a few other subscribers as candidates for its backups --, and
* sends `OmenMembership` (L predecessors, L successors) to every node whose ranges changed:
  the L nodes on either side of the event, and the joiner.

So one event costs it L + at most 2L + 1 messages, whatever the number of nodes (the issue's
O(L)).  It never sends edges or views.  A repeated join of a node already on the circle (a
node re-sending `OmenJoin` until it holds its membership) is answered with its membership
alone.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from pubsub.kernel.message import Ref, Send, Topic
from pubsub.omen.circle import Circle, hashed
from pubsub.omen.messages import Descriptors, OmenChurn, OmenMembership, Refs, Topics
from pubsub.omen.views import Descriptor
from pubsub.topicgraph.graph import Node


class Membership:
    """The circle, the nodes' topics, and the events sent."""

    def __init__(
        self, resilience: int, position: Callable[[Node], int] = hashed, *,
        rng: random.Random | None = None, candidates: int = 3,
    ) -> None:
        if resilience < 1:
            raise ValueError(f"L, the resilience factor, is at least 1, not {resilience}")
        self.resilience = resilience
        #: Subscribers named per topic of a join (`OmenChurn.candidates`), drawn with `rng`.
        self.candidates = candidates
        self.rng = rng or random.Random(0)
        #: The settings every membership carries (`OmenMembership`'s fields; its defaults
        #: unless the supervisor sets them).
        self.settings: dict[str, Any] = {"resilience": resilience}
        self.circle = Circle(position=position)
        self.topics: dict[Node, frozenset[Topic]] = {}
        self.sequence = 0
        self.sent_per_event: list[int] = []

    def join(self, node: Node, topics: frozenset[Topic]) -> list[Send]:
        if node in self.circle:
            return [self._membership(node)]
        self.circle.add(node)
        self.topics[node] = frozenset(topics)
        return self._event("join", node, self.topics[node], extra=[node])

    def add_topics(self, node: Node, topics: frozenset[Topic]) -> list[Send]:
        """A node on the circle now in more topics: a join event for the added ones (beyond
        the paper, which has no topic change), and its membership with its new topics."""
        added = frozenset(topics) - self.topics.get(node, frozenset())
        self.topics[node] = frozenset(topics)
        return self._event("join", node, added, extra=[node])

    def rejoin(self, node: Node, topics: frozenset[Topic] | None = None) -> list[Send]:
        """A join event for a node already on the circle, in `topics` of its own (default:
        all of them; `OmenMend`)."""
        held = self.topics.get(node, frozenset())
        return self._event("join", node, held if topics is None else held & topics, extra=[])

    def leave(self, node: Node) -> list[Send]:
        """A graceful leave or a detected crash (the same event, §3.1)."""
        if node not in self.circle:
            return []
        self.circle.remove(node)
        topics = self.topics.pop(node, frozenset())
        return self._event("leave", node, topics, extra=[])

    def _event(self, kind: str, node: Node, topics: frozenset[Topic], extra: list[Node]) -> list[Send]:
        self.sequence += 1
        named = self._candidates(node, topics) if kind == "join" else ()
        event = OmenChurn(f"{self.sequence}:{node}", "join" if kind == "join" else "leave", Ref(node),
                          Topics(tuple(Topic(t) for t in sorted(topics))), Descriptors(named))
        succs = self.circle.successors(node, self.resilience)
        out = [Send(Ref(s), event) for s in succs]
        around = set(succs) | set(self.circle.predecessors(node, self.resilience)) | set(extra)
        out += [self._membership(n) for n in sorted(around) if n in self.circle]
        self.sent_per_event.append(len(out))
        return out

    def _candidates(self, node: Node, topics: frozenset[Topic]) -> tuple[Descriptor, ...]:
        """Per topic of a joiner, up to `candidates` other live subscribers with their topics:
        the rendezvous a DHT would give it (INFERRED: paper 003 starts from a TCO and does not
        say how a joiner finds its topics' subscribers)."""
        chosen: set[Node] = set()
        for topic in sorted(topics):
            others = sorted(n for n, ts in self.topics.items() if topic in ts and n != node)
            chosen.update(self.rng.sample(others, min(self.candidates, len(others))))
        return tuple(Descriptor(n, self.topics[n], frozenset(), -1) for n in sorted(chosen))

    def _membership(self, node: Node) -> Send:
        L = self.resilience
        return Send(Ref(node), OmenMembership(
            Refs(tuple(Ref(p) for p in self.circle.predecessors(node, L))),
            Refs(tuple(Ref(s) for s in self.circle.successors(node, L))),
            Topics(tuple(Topic(t) for t in sorted(self.topics.get(node, frozenset())))),
            **self.settings,
        ))

    def membership_of(self, node: Node) -> Send:
        """The node's membership message (the periodic round robin, and a new supervisor)."""
        return self._membership(node)
