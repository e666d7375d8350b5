"""The `omen` supervisor daemon's core: membership, failure detection and the record, and
nothing of the overlay (paper 003 assumes a DHT and a failure detector; this stands in for
both, `pubsub.omen.membership`).  It never sends edges or views.

* `OmenJoin` from a node it does not hold: a join (the circle, the event to the L
  successors with candidates, memberships around it).  From a node it holds: the same topics
  are answered with its membership (a reminder, or a lost answer); added topics are a join
  event for them; a dropped topic is a leave and a join (OMen has no topic change).
* `OmenLeave`: a leave event (and the leaver is told it is in no topic).
* `OmenSuspect` from a node, or its own runtime unable to reach one: a probe (`OmenPing`);
  silent for the probe timeout, the node is taken off as crashed: a leave event.
* A node that reported a neighbour which is off the circle is told so (`OmenGone`); it drops
  the edge and asks for a repair of its own (`OmenMend`), answered with a join event for all
  its topics (beyond the paper: the leave's coordinator may not have known that edge).
* `GetMember` (hand-overs): a random subscriber of the topic, one under suspicion only if
  nobody else.
* Every Timeout `config_budget` memberships go out in round robin, so a lost membership is
  repaired within n / budget Timeouts.

The record is one row per subscription, (topic, "m <ref>", ref); loading it rebuilds the
circle without an event (a restart changes no edge: the supervisor holds none).
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Iterable
from typing import Any

from pubsub.kernel.contracts import Measure
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.kernel.wire import WireError, validate_ref
from pubsub.omen.membership import Membership
from pubsub.omen.messages import (
    OmenGone,
    OmenJoin,
    OmenLeave,
    OmenMembership,
    OmenMend,
    OmenPing,
    OmenPong,
    OmenSuspect,
    Refs,
    Topics,
)
from pubsub.omen.node import Settings, settings_fields
from pubsub.publications.messages import GetMember, MemberIs
from pubsub.publications.probes import Probes, choose_member
from pubsub.publications.retention import RetentionTable

RECENT_EVENTS = 32


def member_key(label: str) -> str:
    """A stored label, checked (ValueError if malformed): "m <ref>"; the label itself."""
    if not isinstance(label, str):
        raise ValueError("an omen row label is a string")
    kind, _, ref = label.partition(" ")
    if kind != "m":
        raise ValueError(f"an omen row label is 'm <ref>', not {label[:80]!r}")
    try:
        validate_ref(ref)
    except WireError as exc:
        raise ValueError(f"an omen row label names a bad reference: {exc}") from None
    return label


class OmenSupervisor:
    """Membership of the `omen` overlay (module docstring)."""

    def __init__(
        self,
        ref: Ref,
        *,
        rng: random.Random,
        settings: Settings,
        config_budget: int = 1,
        probe_timeout: float = 2.0,
        journal: bool = True,
        retention: RetentionTable | None = None,
    ) -> None:
        if config_budget < 1 or probe_timeout <= 0:
            raise ValueError("config_budget must be at least 1 and probe_timeout positive")
        self.ref = ref
        self.rng = rng
        self.settings = settings
        self.config_budget = config_budget
        self.membership = Membership(settings.resilience, rng=rng, candidates=settings.coverage)
        self.membership.settings = settings_fields(settings)
        self.probes = Probes(probe_timeout)
        self.retention = retention if retention is not None else RetentionTable()
        self._journal = journal
        self._stored: set[tuple[str, str, str]] = set()
        self._changes: list[tuple[str, str, str | None]] = []
        self._turn = 0
        self._out: list[Send] = []
        #: Who reported each suspect unreachable: told `OmenGone` when it is taken off.
        self.reporters: dict[Ref, set[Ref]] = {}
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_EVENTS)
        self._events: deque[dict[str, Any]] = deque(maxlen=10 * RECENT_EVENTS)
        #: joins, leaves, changes, crashes_detected, suspects, memberships_sent, reminders.
        self.counters: Counter[str] = Counter()

    @property
    def config_counters(self) -> dict[str, int]:
        return {"configurations_sent": self.counters["memberships_sent"]}

    # ------------------------------------------------------------------ the protocol
    def handle(self, msg: Message, now: float) -> list[Send]:
        if isinstance(msg, OmenJoin):
            self.probes.alive(msg.ref)
            self._join(msg.ref, frozenset(msg.topics), msg.refresh)
        elif isinstance(msg, OmenLeave):
            self.probes.alive(msg.ref)
            if msg.ref in self.membership.circle:
                self.counters["leaves"] += 1
                self._event("leave", msg.ref, self.membership.leave(msg.ref))
            self._send(msg.ref, OmenMembership(Refs(()), Refs(()), Topics(())))
        elif isinstance(msg, OmenSuspect):
            self._suspect(msg.suspect, now)
            if msg.suspect in self.membership.circle:
                self.reporters.setdefault(msg.suspect, set()).add(msg.ref)
            else:
                self._send(msg.ref, OmenGone(msg.suspect))
        elif isinstance(msg, OmenMend):
            self._mend(msg.ref, frozenset(msg.topics))
        elif isinstance(msg, OmenPong):
            self.probes.answered(msg.ref, msg.nonce)
        elif isinstance(msg, GetMember):
            self._get_member(msg.topic, msg.ref, msg.nonce, msg.avoid)
        return self._flush()

    def timeout(self, now: float) -> list[Send]:
        for ref in self.probes.expired(now):
            if ref in self.membership.circle:
                self.counters["crashes_detected"] += 1
                self._event("crash", ref, self.membership.leave(ref))
                for reporter in sorted(self.reporters.pop(ref, set())):
                    self._send(reporter, OmenGone(ref))
        members = self.membership.circle.members()
        if members:
            start = self._turn % len(members)
            for i in range(min(self.config_budget, len(members))):
                self._deliver([self.membership.membership_of(members[(start + i) % len(members)])])
            self._turn = start + min(self.config_budget, len(members))
        return self._flush()

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        self._suspect(ref, now)
        return self._flush()

    # ------------------------------------------------------------------ membership
    def _join(self, ref: Ref, topics: frozenset[Topic], refresh: bool) -> None:
        held = self.membership.topics.get(ref)
        if held == topics:
            if refresh:
                self.counters["reminders"] += 1
            self._deliver([self.membership.membership_of(ref)])
            return
        if held is None:
            self.counters["joins"] += 1
            self._event("join", ref, self.membership.join(ref, topics))
        elif held <= topics:
            self.counters["changes"] += 1
            self._event("join", ref, self.membership.add_topics(ref, topics))
        else:  # a topic dropped: a leave and a join
            self.counters["changes"] += 1
            self._event("leave", ref, self.membership.leave(ref))
            self._event("join", ref, self.membership.join(ref, topics))
        self._store()

    def _mend(self, ref: Ref, topics: frozenset[Topic]) -> None:
        """A join event for `ref` in `topics` (all its own if none), if another node
        subscribes to one of them (a lonely topic needs no edge)."""
        held = self.membership.topics.get(ref)
        if held is None:
            return
        wanted = (topics or held) & held
        others = {t for n, ts in self.membership.topics.items() if n != ref for t in ts}
        if wanted & others:
            self.counters["mends"] += 1
            self._event("mend", ref, self.membership.rejoin(ref, frozenset(wanted & others)))

    def _event(self, kind: str, ref: Ref, sends: list[Send]) -> None:
        note = {"repair": kind, "node": ref, "messages": len(sends)}
        self.recent.append(note)
        self._events.append(note)
        self._deliver(sends)
        self._store()

    def drain_repairs(self) -> list[dict[str, Any]]:
        """The churn events since the last call (``repair`` events, docs/events.md: `repair`,
        the kind, `node`, `messages` sent to start it)."""
        out = list(self._events)
        self._events.clear()
        return out

    def _suspect(self, ref: Ref, now: float) -> None:
        if ref not in self.membership.circle:
            return
        nonce = self.probes.suspect(ref, now)
        if nonce is not None:
            self.counters["suspects"] += 1
            self._send(ref, OmenPing(nonce))

    def _get_member(self, topic: Topic, ref: Ref, nonce: int, avoid: Ref | None) -> None:
        members = self.member_refs(topic)
        self._send(ref, MemberIs(topic, choose_member(members, self.probes, avoid, self.rng), nonce))

    # ------------------------------------------------------------------ the record
    def _rows(self) -> set[tuple[str, str, str]]:
        return {(t, f"m {n}", n) for n, ts in self.membership.topics.items() for t in ts}

    def _store(self) -> None:
        if not self._journal:
            return
        rows = self._rows()
        self._changes += [(t, label, None) for t, label, _ in sorted(self._stored - rows)]
        self._changes += sorted(rows - self._stored)
        self._stored = rows

    def drain_changes(self) -> list[tuple[str, str, str | None]]:
        out, self._changes = self._changes, []
        return out

    def load(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """The record as stored: each node on the circle with its topics, no event."""
        topics: dict[str, set[str]] = {}
        for topic, label, ref in rows:
            if label == f"m {ref}":
                topics.setdefault(ref, set()).add(topic)
        for node, node_topics in sorted(topics.items()):
            self.membership.circle.add(node)
            self.membership.topics[node] = frozenset(Topic(t) for t in node_topics)
        self._stored = self._rows() if self._journal else set()

    def member_refs(self, topic: Topic) -> list[Ref]:
        return [Ref(n) for n, ts in sorted(self.membership.topics.items()) if topic in ts]

    # ------------------------------------------------------------------ helpers
    def _deliver(self, sends: list[Send]) -> None:
        self.counters["memberships_sent"] += sum(isinstance(s.msg, OmenMembership) for s in sends)
        self._out += sends

    def _send(self, dest: Ref, msg: Message) -> None:
        self._out.append(Send(dest, msg))

    def _flush(self) -> list[Send]:
        out, self._out = self._out, []
        return out

    def measures(self) -> list[Measure]:
        """The supervisor's omen metrics (`pubsub.telemetry.metrics.overlay_families`): the
        circle's size, churn events started by kind, suspects probed, memberships sent."""
        counters = self.counters
        out: list[Measure] = [
            ("pubsub_omen_nodes", "Nodes on the circle.", "gauge", {}, len(self.membership.circle.members())),
            ("pubsub_omen_resilience", "L: the churn events the overlay handles at once.", "gauge", {},
             self.settings.resilience),
            ("pubsub_omen_suspects_probed", "Nodes probed after a report that they could not be reached.",
             "counter", {}, counters["suspects"]),
            ("pubsub_omen_memberships_sent", "Membership messages sent (predecessors and successors).",
             "counter", {}, counters["memberships_sent"]),
        ]
        for kind, key in (("join", "joins"), ("leave", "leaves"), ("change", "changes"),
                          ("crash", "crashes_detected"), ("mend", "mends")):
            out.append(("pubsub_omen_churn_events", "Churn events started, by what caused them.", "counter",
                        {"kind": kind}, counters[key]))
        return out

    def status(self) -> dict[str, object]:
        """JSON-able: the circle, each node's topics, suspects, the recent churn events, the
        settings; per topic its members (in circle order)."""
        circle = self.membership.circle.members()
        topics: dict[str, list[str]] = {}
        for node in circle:
            for topic in sorted(self.membership.topics.get(node, ())):
                topics.setdefault(topic, []).append(node)
        return {
            "ref": self.ref,
            "overlay": "omen",
            "self_stabilizing": False,
            "resilience": self.settings.resilience,
            "coverage": self.settings.coverage,
            "t_wait": self.settings.t_wait,
            "connectivity": self.settings.connectivity,
            "config_budget": self.config_budget,
            "nodes": len(circle),
            "circle": circle,
            "node_topics": {n: sorted(self.membership.topics.get(n, ())) for n in circle},
            "suspects": self.probes.suspects(),
            "counters": dict(sorted(self.counters.items())),
            "retention": self.retention.status(),
            "recent_events": list(self.recent),
            "topics": {
                t: {
                    "n": len(ms),
                    # the record is membership only: right while it names nobody twice
                    "legitimate_database": len(set(ms)) == len(ms),
                    "members": [{"label": str(i), "ref": r} for i, r in enumerate(ms)],
                }
                for t, ms in sorted(topics.items())
            },
        }
