"""The `tco` overlay at one node: `TcoOverlay`, a `pubsub.publications.overlay.NodeOverlay`.

The node mirrors the table its supervisor last sent (`TcoTable`): the topics it is held in,
its neighbours with the topics each shares, its backups and primaries.  It tells the
supervisor the topics it wants (`TcoSubscribe`) when a client joins or leaves one, and again
on every Timeout until the table's topics are exactly those, then every `REFRESH_EVERY`
Timeouts with the digest of the table it holds (a table lost, or overtaken on the way by an
older one, is sent again).  A topic it left keeps running
-- its publication core serving anti-entropy with its neighbours -- until a table drops it;
then it is let go (`Released`), as the skip ring lets go on the permission to leave (paper
000, Lemma 4.1), so a lost request strands nobody.

What publications travel on: a topic's neighbours are the table's neighbours that share it;
a new publication is flooded to them (paper 000 §4.3; a general graph has no arcs, so
`arc_view` is None and the arc broadcast is refused at start-up), and each anti-entropy
round's partner is one of them at random (two while `eager`).

What a well-formed table may still hold wrong is dropped and counted: an entry naming this
node, a neighbour twice, a neighbour sharing none of the table's topics.  A publication
message that names its sender (CheckTrie, CheckAndPublish, Spread) from a peer that is no
neighbour of ours in its topic is refused with `TcoNotNeighbour` (publications it carries
are kept); the peer it refuses asks its supervisor for its table instead of dropping us.
A neighbour the runtime cannot reach is left out at once and reported (`TcoSuspect`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence

from pubsub.kernel.effects import Effect
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.publications.arcs import ArcView
from pubsub.publications.messages import CheckAndPublish, CheckTrie, Spread
from pubsub.publications.overlay import Released
from pubsub.tco.messages import (
    TcoNotNeighbour,
    TcoPing,
    TcoPong,
    TcoSubscribe,
    TcoSuspect,
    TcoTable,
    TopicSet,
    table_digest,
)

#: Timeouts between two reminders of a node whose table agrees (`TcoSubscribe.refresh`).
REFRESH_EVERY = 20

#: The publication messages that name their sender, which a node checks against its table.
SENDER_NAMED = (CheckTrie, CheckAndPublish, Spread)


class TcoOverlay:
    """Every topic of one node in the `tco` overlay (module docstring)."""

    def __init__(self, ref: Ref, supervisor: Ref) -> None:
        self.ref = ref
        self.supervisor = supervisor
        self.wanted_topics: set[Topic] = set()
        #: The table as last heard: the topics it holds us in (None: no table yet, or in
        #: no topic), neighbour -> the topics it shares with us, backups, primaries.
        self.table_topics: frozenset[Topic] | None = None
        self.table_neighbours: dict[Ref, frozenset[Topic]] = {}
        self.backups: tuple[Ref, ...] = ()
        self.primaries: tuple[Ref, ...] = ()
        #: Topics whose publication core runs: wanted, or still in the table.
        self.running: set[Topic] = set()
        self.unreachable: set[Ref] = set()
        #: topic -> its reachable neighbours, sorted: built when first asked (every
        #: flooded publication asks), dropped when the table or `unreachable` changes.
        self._by_topic: dict[Topic, tuple[Ref, ...]] = {}
        #: Whether a TcoSubscribe of ours is unanswered (no table since).
        self.asking = False
        #: Timeouts since we last told the supervisor our topics.
        self._quiet = 0
        #: tables, table_entries_dropped (self, twice, sharing no topic), refused_senders,
        #: refusals_heard, suspects_reported.
        self.counters: Counter[str] = Counter()

    # ------------------------------------------------------------------ membership
    def _subscribe(self, refresh: bool = False) -> list[Send]:
        self.asking = not refresh
        self._quiet = 0
        topics = TopicSet(tuple(sorted(self.wanted_topics)))
        held = table_digest(
            self.table_topics or (), self.table_neighbours.items(), self.backups, self.primaries
        ) if refresh else 0
        return [Send(self.supervisor, TcoSubscribe(self.ref, topics, refresh, held))]

    def _changed(self) -> list[Send]:
        """Our topics changed: ask now, or -- while a request is unanswered -- when its
        table comes (so that topics joined together, as at a restart, cost the supervisor
        two repairs, not one per topic)."""
        return [] if self.asking else self._subscribe()

    def join(self, topic: Topic, rng: random.Random) -> list[Send]:
        if topic in self.wanted_topics:
            return []
        self.wanted_topics.add(topic)
        self.running.add(topic)
        return self._changed()

    def leave(self, topic: Topic) -> list[Send]:
        if topic not in self.wanted_topics:
            return []
        self.wanted_topics.discard(topic)
        return self._changed()

    def runs(self, topic: Topic) -> bool:
        return topic in self.running

    def is_member(self, topic: Topic) -> bool:
        return topic in self.wanted_topics

    def is_configured(self, topic: Topic) -> bool:
        return topic in self.wanted_topics and self.exchanges(topic)

    def exchanges(self, topic: Topic) -> bool:
        return self.table_topics is not None and topic in self.table_topics

    def topics(self) -> Iterator[Topic]:
        return iter(sorted(self.running))

    def owner_of(self, topic: Topic) -> Ref:
        return self.supervisor

    def admitted_supervisor(self, msg: Message, name: str) -> Ref:
        return self.supervisor

    def settled(self) -> bool:
        """Whether the table holds us in exactly the topics we want."""
        return (self.table_topics or frozenset()) == self.wanted_topics

    # ------------------------------------------------------------------ what publications travel on
    def neighbours(self, topic: Topic) -> Iterator[Ref]:
        held = self._by_topic.get(topic)
        if held is None:
            held = self._by_topic[topic] = tuple(
                u for u, shared in sorted(self.table_neighbours.items())
                if topic in shared and u not in self.unreachable
            )
        return iter(held)

    def arc_view(self, topic: Topic) -> ArcView | None:
        """None: a general graph has no arcs (the publication layer floods)."""
        return None

    def partners(self, topic: Topic, rng: random.Random, eager: bool) -> list[Ref]:
        others = list(self.neighbours(topic))
        if not others:
            return []
        return rng.sample(others, min(2 if eager else 1, len(others)))

    def refuses(self, msg: Message) -> list[Send] | None:
        """A publication message from a peer that is no neighbour of ours in its topic:
        the refusal to send it (None: admitted)."""
        if not isinstance(msg, SENDER_NAMED):
            return None
        sender = msg.sender
        if msg.topic in self.table_neighbours.get(sender, ()):
            return None
        self.counters["refused_senders"] += 1
        return [Send(sender, TcoNotNeighbour(msg.topic, self.ref))]

    # ------------------------------------------------------------------ the overlay's protocol
    def handle(self, msg: Message, now: float, rng: random.Random) -> Sequence[Effect | Released]:
        if isinstance(msg, TcoTable):
            return self._table(msg)
        if isinstance(msg, TcoPing):
            return [Send(self.supervisor, TcoPong(msg.nonce, self.ref))]
        if isinstance(msg, TcoNotNeighbour):
            self.counters["refusals_heard"] += 1
            return self._subscribe()  # our table is out of date, or theirs: ask
        return []

    def _table(self, msg: TcoTable) -> list[Effect | Released]:
        self.counters["tables"] += 1
        self.asking = False
        topics = None if msg.topics is None else frozenset(msg.topics)
        neighbours: dict[Ref, frozenset[Topic]] = {}
        for peer, shared in msg.neighbours:
            kept = frozenset(shared) & (topics or frozenset())
            if peer == self.ref or peer in neighbours or not kept:
                self.counters["table_entries_dropped"] += 1
                continue
            neighbours[peer] = kept
        backups = self._peers(msg.backups)
        primaries = self._peers(msg.primaries)
        out: list[Effect | Released] = []
        for topic in sorted(self.running - self.wanted_topics - (topics or frozenset())):
            self.running.discard(topic)  # let go: no table holds us in it
            out.append(Released(topic, tuple(self.neighbours(topic)), None))
        self.unreachable &= set(neighbours)
        self.table_topics, self.table_neighbours = topics, neighbours
        self._by_topic.clear()
        self.backups, self.primaries = backups, primaries
        self.running |= self.wanted_topics
        if not self.settled():
            out.extend(self._subscribe())  # what changed while we waited, or a table out of date
        return out

    def _peers(self, refs: Sequence[Ref]) -> tuple[Ref, ...]:
        kept = []
        for ref in refs:
            if ref == self.ref or ref in kept:
                self.counters["table_entries_dropped"] += 1
            else:
                kept.append(ref)
        return tuple(kept)

    def not_a_member(self, msg: Message) -> list[Send]:
        """A publication message for a topic we do not run: refused where it names its sender."""
        refusal = self.refuses(msg)
        return refusal or []

    def timeout(self, now: float) -> list[Send]:
        """Until the table holds us in exactly the topics we want, say them again (also
        when the last request is unanswered: it or its answer may be lost); once it does,
        remind the supervisor every `REFRESH_EVERY` Timeouts (a record that lost us, or
        a supervisor restarted without its store, learns us again)."""
        if not self.settled():
            return self._subscribe()
        self._quiet += 1
        return self._subscribe(refresh=True) if self._quiet >= REFRESH_EVERY and self.wanted_topics else []

    def topic_timeout(self, topic: Topic, rng: random.Random) -> list[Send]:
        return []

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        if ref == self.supervisor or ref not in self.table_neighbours:
            return []
        self.unreachable.add(ref)
        self._by_topic.clear()
        self.counters["suspects_reported"] += 1
        return [Send(self.supervisor, TcoSuspect(self.ref, ref))]

    # ------------------------------------------------------------------ inspection
    def status(self) -> dict[str, object]:
        """The node's table: neighbours with the topics shared, distinct peers, degree,
        backups and primaries; per topic run its neighbours there."""
        topics: dict[str, object] = {}
        for topic in sorted(self.running):
            topics[topic] = {
                "neighbours": list(self.neighbours(topic)),
                "configured": self.exchanges(topic),
                "leaving": topic not in self.wanted_topics,
                "unreachable": sorted(u for u in self.unreachable if topic in self.table_neighbours.get(u, ())),
            }
        return {
            "ref": self.ref,
            "supervisor": self.supervisor,
            "overlay": "tco",
            "table_topics": None if self.table_topics is None else sorted(self.table_topics),
            "neighbours": {u: sorted(shared) for u, shared in sorted(self.table_neighbours.items())},
            "degree": len(self.table_neighbours),
            "backups": list(self.backups),
            "primaries": list(self.primaries),
            "topics": topics,
            "counters": dict(sorted(self.counters.items())),
        }
