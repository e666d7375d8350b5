"""The supervisor side of BuildSR without I/O (paper 000, Alg. 3, §3.1, §3.3, §4.1).

One `TopicDatabase` per topic.  The actions keep the paper's names:

* ``subscribe``      Subscribe(v): append (l(n), v) and send v its configuration.
* ``unsubscribe``    Unsubscribe(v): the holder of l(n-1) takes v's label, gets its new
                     configuration, and v is told to let go (SetData(⊥, ⊥, ⊥)).
* ``get_configuration`` GetConfiguration(u): send u (pred, label, succ), or ⊥ if unknown.
* ``timeout``        CheckLabels, then `config_budget` configurations per topic in
                     round-robin order (the paper sends one; relabelled subscribers first),
                     more while the topic shows repair work (see below).

Raised budget while repairing (issue 14, item 2).  Theorem 3.1 bounds the supervisor's load
in the legitimate state; from a corrupted state the paper's one configuration per interval
makes labels arrive one per Timeout, so convergence takes O(n) intervals.  Per topic the
supervisor therefore doubles its budget in every Timeout after an interval with repair
work, up to ceil(n / BOOST_PASS_INTERVALS) (at most `max_config_budget`), and keeps raising
it until one full round-robin pass (n configurations) has gone out with no further repair
work; then it is back at `config_budget`.  Repair work is what a legitimate
state (§3.2, Theorem 3.1's setting) never shows: CheckLabels or CheckMultipleCopies changing
the database (§3.1), a Subscribe from a subscriber the database already holds (it has lost
its label), or more configuration requests in one interval than a legitimate ring plausibly sends
(`REQUEST_BURST`; Theorem 3.1's expectation is below 1).  Ordinary Subscribe and
Unsubscribe (§4.1) and crash removal (§3.3) are not repair work, so Theorem 4.3's constant
supervisor share per join and leave is untouched.  In the legitimate state no repair work
occurs, so after at most one pass the budget is the paper's and Theorem 3.1's bound holds.

Publishing from a node that does not subscribe to a topic: GetMember(topic, v, nonce) is
answered with MemberIs(topic, u, nonce), u a member chosen at random, or None when the
topic has no members.  Members under suspicion and the member named in ``avoid`` (one that
just failed to take a hand-over) are chosen only when there is nobody else.  It changes
nothing in the database.

Crash handling (§3.3): the supervisor is the only failure detector.  A subscriber is
removed as if it had unsubscribed when the runtime cannot deliver the supervisor's own
messages to it (`peer_unreachable`), or when a subscriber reports it (SuspectCrash) and it
then fails to answer the supervisor's own Ping within `probe_timeout`.

Retention (issue 13, item 6; `pubsub.publications.retention`): the supervisor holds each topic's
retention settings in `retention` (its daemon persists them).  Every configuration of a
member of a topic that has settings carries them (`Retention` beside SetData), so a node
that missed a change gets it with its next configuration; the daemon changes them in the
table and sends them to every member at once (`RetentionTable.announce`).  Topics without settings send nothing more.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.publications.messages import GetMember, MemberIs
from pubsub.publications.probes import choose_member
from pubsub.publications.retention import RetentionTable
from pubsub.skipring.labels import Label, l
from pubsub.skipring.messages import GetConfiguration, Ping, Pong, SetData, Subscribe, SuspectCrash, Unsubscribe
from pubsub.skipring.supervisor.corruption import corrupt_topics
from pubsub.skipring.supervisor.database import TopicDatabase

#: A raised budget sends one full round-robin pass in about this many Timeouts.
BOOST_PASS_INTERVALS = 8
#: Configuration requests in one interval that count as repair work (a legitimate ring sends
#: fewer than 1 in expectation, Theorem 3.1; at least this many has probability < 1e-5).
REQUEST_BURST = 8


@dataclass(slots=True)
class Boost:
    """A topic's raised configuration budget (issue 14, item 2)."""

    budget: int
    #: configurations still to send at the raised budget before falling back.
    pass_left: int = 0
    #: repair work seen since the last Timeout.
    work: bool = False
    #: configuration requests received since the last Timeout.
    requests: int = 0


@dataclass(slots=True)
class Probe:
    """An outstanding liveness check of a suspected subscriber."""

    nonce: int
    deadline: float


class SupervisorCore:
    """database per topic, round-robin configurations and the failure detector."""

    def __init__(
        self,
        ref: Ref,
        *,
        config_budget: int = 1,
        max_config_budget: int | None = 1024,
        rng: random.Random,
        probe_timeout: float = 2.0,
        journal: bool = True,
        retention: RetentionTable | None = None,
    ) -> None:
        """`config_budget` is the paper's budget (Alg. 3 l.3: one configuration per
        Timeout); `max_config_budget` caps the raised budget while repairing (None: never
        raise it, the paper's behaviour)."""
        if config_budget < 1:
            raise ValueError("config_budget must be at least 1")
        if max_config_budget is not None and max_config_budget < config_budget:
            raise ValueError("max_config_budget must be at least config_budget")
        self.ref = ref
        self.config_budget = config_budget
        self.max_config_budget = max_config_budget
        self._boosts: dict[Topic, Boost] = {}
        self.rng = rng
        self.probe_timeout = probe_timeout
        self.topics: dict[Topic, TopicDatabase] = {}
        self.probes: dict[Ref, Probe] = {}
        self.crashes_detected = 0
        self._urgent: dict[Topic, list[Ref]] = {}
        self._changes: list[tuple[str, str, str | None]] | None = [] if journal else None
        #: Retention settings per topic (`pubsub.publications.retention`), sent with each
        #: configuration: the daemon's table (`retention=`), or a table of its own.
        self.retention = retention if retention is not None else RetentionTable()
        self._out: list[Send] = []
        #: Configuration traffic, for the metrics (`config_counters` of the daemon's
        #: contract): configuration_requests (GetConfiguration handled),
        #: configurations_sent (SetData with a label), configurations_none (SetData(⊥)).
        self.config_counters: Counter[str] = Counter()

    # ------------------------------------------------------------------ entry points
    def handle(self, msg: Message, now: float) -> list[Send]:
        """React to one message from a subscriber."""
        if isinstance(msg, Subscribe):
            self.subscribe(msg.topic, msg.ref)
        elif isinstance(msg, Unsubscribe):
            self.unsubscribe(msg.topic, msg.ref)
        elif isinstance(msg, GetConfiguration):
            self.config_counters["configuration_requests"] += 1
            self._count_request(msg.topic)
            self.get_configuration(msg.topic, msg.ref)
        elif isinstance(msg, SuspectCrash):
            self._suspect(msg.ref, now)
        elif isinstance(msg, GetMember):
            self.get_member(msg.topic, msg.ref, msg.nonce, msg.avoid)
        elif isinstance(msg, Pong):
            probe = self.probes.get(msg.ref)
            if probe is not None and probe.nonce == msg.nonce:
                del self.probes[msg.ref]
        return self._flush()

    def timeout(self, now: float) -> list[Send]:
        """Timeout (Alg. 3 l.1-5) for every topic, plus expiry of liveness probes."""
        for ref in [r for r, probe in self.probes.items() if probe.deadline <= now]:
            del self.probes[ref]
            self._remove_crashed(ref)
        for topic, db in list(self.topics.items()):
            urgent = self._urgent.setdefault(topic, [])
            self._queue_relabelled(topic, db, urgent)
            budget = self._next_budget(topic, db, bool(urgent))
            for _ in range(min(budget, len(db))):
                if urgent:
                    self.get_configuration(topic, urgent.pop(0))
                    continue
                db.next = (db.next + 1) % len(db)
                holder = db.holder(l(db.next))
                if holder is not None:
                    self.get_configuration(topic, holder)
            if not len(db) and not urgent:
                del self.topics[topic]
                self._boosts.pop(topic, None)
        return self._flush()

    def effective_budget(self, topic: Topic) -> int:
        """Configurations the next Timeout sends for `topic` at most (without new work)."""
        boost = self._boosts.get(topic)
        return self.config_budget if boost is None else boost.budget

    def _next_budget(self, topic: Topic, db: TopicDatabase, urgent: bool) -> int:
        """This Timeout's budget for `topic` (module docstring: raised while repairing)."""
        boost = self._boosts.get(topic)
        if self.max_config_budget is None or boost is None:
            return self.config_budget
        work = boost.work or urgent or boost.requests >= REQUEST_BURST
        boost.work, boost.requests = False, 0
        ceiling = max(
            self.config_budget,
            min(self.max_config_budget, -(-len(db) // BOOST_PASS_INTERVALS)),
        )
        if work:
            boost.pass_left = len(db)
        if boost.pass_left > 0:
            boost.budget = min(ceiling, max(2 * boost.budget, self.config_budget))
        else:
            boost.budget = self.config_budget
        budget = min(boost.budget, max(ceiling, self.config_budget))
        boost.pass_left -= budget
        if boost.budget == self.config_budget and boost.pass_left <= 0:
            del self._boosts[topic]
        return budget

    def _count_request(self, topic: Topic) -> None:
        """Count a configuration request for the burst test (`REQUEST_BURST`)."""
        boost = self._boosts.get(topic)
        if boost is not None:
            boost.requests += 1
        elif self.max_config_budget is not None and topic in self.topics:
            self._boosts[topic] = Boost(self.config_budget, requests=1)

    def _saw_work(self, topic: Topic) -> None:
        """Note repair work on `topic` (module docstring)."""
        if self.max_config_budget is None:
            return
        boost = self._boosts.get(topic)
        if boost is None:
            boost = self._boosts[topic] = Boost(self.config_budget)
        boost.work = True

    def _queue_relabelled(self, topic: Topic, db: TopicDatabase, urgent: list[Ref]) -> None:
        """CheckLabels (Alg. 3 l.38-45); relabelled subscribers' configurations go first."""
        relabelled = db.check_labels()
        if relabelled:
            self._saw_work(topic)
        urgent.extend(r for r in relabelled if r not in urgent)

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        """The runtime could not deliver our messages to `ref`: treat it as crashed."""
        self.probes.pop(ref, None)
        self._remove_crashed(ref)
        return self._flush()

    # ------------------------------------------------------------------ Alg. 3
    def subscribe(self, topic: Topic, ref: Ref) -> None:
        """Subscribe(v) (Alg. 3 l.6-12, §4.1)."""
        db = self._db(topic)
        if ref in db:
            self._saw_work(topic)  # a member that lost its label
            self.get_configuration(topic, ref)
            return
        self._repair(topic, db)  # l(n) must be free before it is handed out
        label = l(len(db))
        db.put(label, ref)
        self._configure(db, label, ref)

    def unsubscribe(self, topic: Topic, ref: Ref) -> None:
        """Unsubscribe(v) (Alg. 3 l.13-23, §4.1): then grant v permission to leave."""
        self._vacate(topic, ref)
        self._send(ref, SetData(topic, None, None, None))

    def get_configuration(self, topic: Topic, ref: Ref) -> None:
        """GetConfiguration(u) (Alg. 3 l.24-30)."""
        db = self.topics.get(topic)
        label = None
        if db is not None:
            held = len(db)
            db.check_multiple_copies(ref)
            label = db.label_of(ref)
            if len(db) != held:
                self._saw_work(topic)  # a label conflict (§3.1)
        if db is None or label is None:
            self._send(ref, SetData(topic, None, None, None))
        else:
            self._configure(db, label, ref)

    def get_member(self, topic: Topic, ref: Ref, nonce: int, avoid: Ref | None = None) -> None:
        """Name one member of `topic` to `ref` (for a hand-over), or None if it has none.

        Members under suspicion (an outstanding Ping) and `avoid` are named only when
        there is nobody else.
        """
        db = self.topics.get(topic)
        members = [] if db is None else sorted({r for _, r in db.members() if r is not None})
        self._send(ref, MemberIs(topic, choose_member(members, self.probes, avoid, self.rng), nonce))

    # ------------------------------------------------------------------ helpers
    def _vacate(self, topic: Topic, ref: Ref) -> None:
        """Take `ref` out of a topic's ring; the holder of l(n-1) fills its place (§4.1)."""
        db = self.topics.get(topic)
        if db is None or ref not in db:
            return
        db.check_multiple_copies(ref)
        self._repair(topic, db)
        label = db.label_of(ref)
        assert label is not None
        last = l(len(db) - 1)
        if len(db) > 1 and label != last:
            mover = db.holder(last)
            assert mover is not None
            db.remove(last)
            db.put(label, mover)
            self._configure(db, label, mover)
        else:
            db.remove(label)

    def _configure(self, db: TopicDatabase, label: Label, ref: Ref) -> None:
        pred, succ = db.neighbours(label)
        self._send(ref, SetData(db.topic, pred, label, succ))
        settings = self.retention.message(db.topic)
        if settings is not None:
            self._send(ref, settings)

    # ------------------------------------------------------------------ retention
    def corrupt(self, topic: Topic | None, rng: random.Random) -> dict[str, dict[str, Any]]:
        """Fault injection: every corruption of §3.1 in `topic`'s database, or in every
        topic's (`pubsub.skipring.supervisor.corruption.corrupt_topics`)."""
        return corrupt_topics(self.topics, topic, rng)

    def member_refs(self, topic: Topic) -> list[Ref]:
        """The members of `topic` in its database, sorted ([]: none, or an unknown topic)."""
        db = self.topics.get(topic)
        return [] if db is None else sorted({r for _, r in db.members() if r is not None})

    def _repair(self, topic: Topic, db: TopicDatabase) -> None:
        """Run CheckLabels now and queue the relabelled subscribers' configurations."""
        self._queue_relabelled(topic, db, self._urgent.setdefault(topic, []))

    def _suspect(self, ref: Ref, now: float) -> None:
        """A subscriber's hint (§3.3); verified by our own Ping before anyone is removed."""
        if ref in self.probes or ref == self.ref:
            return
        if not any(ref in db for db in self.topics.values()):
            return
        nonce = self.rng.getrandbits(62)
        self.probes[ref] = Probe(nonce, now + self.probe_timeout)
        self._send(ref, Ping(nonce))

    def _remove_crashed(self, ref: Ref) -> None:
        removed = False
        for topic, db in list(self.topics.items()):
            if ref in db:
                self._vacate(topic, ref)
                removed = True
        if removed:
            self.crashes_detected += 1

    def _db(self, topic: Topic) -> TopicDatabase:
        db = self.topics.get(topic)
        if db is None:
            db = self.topics[topic] = TopicDatabase(topic, self._changes)
        return db

    def _send(self, dest: Ref, msg: Message) -> None:
        if isinstance(msg, SetData):
            self.config_counters["configurations_none" if msg.label is None else "configurations_sent"] += 1
        self._out.append(Send(dest, msg))

    def _flush(self) -> list[Send]:
        out, self._out = self._out, []
        return out

    # ------------------------------------------------------------------ persistence & inspection
    def drain_changes(self) -> list[tuple[str, str, str | None]]:
        """Database changes since the last call: (topic, label, ref or None if deleted)."""
        if self._changes is None:
            return []
        out = list(self._changes)
        self._changes.clear()
        return out

    def load(self, rows: list[tuple[str, str, str]] | tuple[tuple[str, str, str], ...]) -> None:
        """Restore the database from durable rows; they are not journaled again."""
        mark = None if self._changes is None else len(self._changes)
        for topic, bits, ref in rows:
            self._db(Topic(topic)).put(Label(bits), Ref(ref))
        if self._changes is not None:
            del self._changes[mark:]

    def status(self) -> dict[str, object]:
        """JSON-able state (README: `status --supervisor`)."""
        return {
            "ref": self.ref,
            "config_budget": self.config_budget,
            "max_config_budget": self.max_config_budget,
            "raised_budgets": {t: b.budget for t, b in sorted(self._boosts.items())},
            "crashes_detected": self.crashes_detected,
            "suspects": sorted(self.probes),
            "retention": self.retention.status(),
            "topics": {
                topic: {
                    "n": len(db),
                    "legitimate_database": db.is_legitimate(),
                    "members": [
                        {"label": label.bits, "ref": ref} for label, ref in db.members()
                    ],
                }
                for topic, db in sorted(self.topics.items())
            },
        }
