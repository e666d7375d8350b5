"""The clique's supervisor core: `CliqueSupervisor`, hosted by the supervisor daemon
(`pubsub.supervisor.app`) as the skip ring's `SupervisorCore` is.

Per topic it keeps the set of members (its database: rows ``(topic, ref, ref)``, or
``(topic, ref, None)`` for a removal, which the daemon persists before anything is sent,
as it does the skip ring's labels).  Members are configured with the whole member list
(`CliqueMembers`): at once when they join or the membership changes, and otherwise
`config_budget` members per topic per Timeout in round robin, so that a lost list is
repaired within n / budget Timeouts and the supervisor's load per Timeout stays bounded.
A leave is granted at once (`CliqueMembers` with no list), and repeated to whoever asks
again.  A member another node could not reach (`CliqueSuspect`), or that the supervisor's
own runtime could not reach, is probed (`CliquePing`); one that has not answered within
`probe_timeout` seconds is removed from every topic.

Publishing from a node that does not run a topic: GetMember is answered with MemberIs, a
member chosen at random (one under suspicion, or `avoid`, only if there is nobody else).
Retention settings (`pubsub.publications.retention.RetentionTable`) go to every member with
its configuration and to all members when they change, as the skip ring's supervisor
sends them.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable

from pubsub.clique.messages import (
    MAX_MEMBERS,
    CliqueJoin,
    CliqueLeave,
    CliqueMembers,
    CliquePing,
    CliquePong,
    CliqueSuspect,
    Members,
)
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.publications.messages import GetMember, MemberIs
from pubsub.publications.probes import Probes, choose_member
from pubsub.publications.retention import RetentionTable


class CliqueSupervisor:
    """The membership of every clique topic (module docstring)."""

    def __init__(
        self,
        ref: Ref,
        *,
        rng: random.Random,
        config_budget: int = 1,
        probe_timeout: float = 2.0,
        journal: bool = True,
        retention: RetentionTable | None = None,
    ) -> None:
        if config_budget < 1 or probe_timeout <= 0:
            raise ValueError("config_budget must be at least 1 and probe_timeout positive")
        self.ref = ref
        self.rng = rng
        self.config_budget = config_budget
        self.probe_timeout = probe_timeout
        #: topic -> members, in the order they joined (the order of every list sent).
        self.topics: dict[Topic, list[Ref]] = {}
        #: topic -> where the round robin of configurations stands.
        self._turn: Counter[Topic] = Counter()
        #: The members under suspicion (`pubsub.publications.probes`).
        self.probes = Probes(probe_timeout)
        self._now = 0.0
        #: Retention settings per topic, sent with each configuration: the daemon's table
        #: (`retention=`), or a table of its own.
        self.retention = retention if retention is not None else RetentionTable()
        self._changes: list[tuple[str, str, str | None]] | None = [] if journal else None
        self._out: list[Send] = []
        #: joins, leaves, configurations_sent, suspects, crashes_detected, refused_joins.
        self.counters: Counter[str] = Counter()

    @property
    def config_counters(self) -> dict[str, int]:
        """Configuration traffic, for the metrics: configurations_sent (member lists sent)."""
        return {"configurations_sent": self.counters["configurations_sent"]}

    # ------------------------------------------------------------------ the protocol
    def handle(self, msg: Message, now: float) -> list[Send]:
        self._now = now
        if isinstance(msg, CliqueJoin):
            self._join(msg.topic, msg.ref)
        elif isinstance(msg, CliqueLeave):
            self._leave(msg.topic, msg.ref)
        elif isinstance(msg, CliqueSuspect):
            self._suspect(msg.suspect, now)
        elif isinstance(msg, CliquePong):
            self.probes.answered(msg.ref, msg.nonce)
        elif isinstance(msg, GetMember):
            self._get_member(msg.topic, msg.ref, msg.nonce, msg.avoid)
        return self._flush()

    def timeout(self, now: float) -> list[Send]:
        """Remove the members whose probe expired; configure `config_budget` members of
        every topic, in round robin."""
        self._now = now
        for ref in self.probes.expired(now):
            self._remove_everywhere(ref)
        for topic, members in self.topics.items():
            if not members:
                continue
            start = self._turn[topic] % len(members)
            chosen = [members[(start + i) % len(members)] for i in range(min(self.config_budget, len(members)))]
            self._turn[topic] = start + len(chosen)
            for ref in chosen:
                self._configure(topic, ref)
        return self._flush()

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        """Our own runtime could not reach `ref`: probe it like a reported suspect."""
        self._now = now
        self._suspect(ref, now)
        return self._flush()

    # ------------------------------------------------------------------ membership
    def _join(self, topic: Topic, ref: Ref) -> None:
        members = self.topics.setdefault(topic, [])
        if ref in members:
            self._configure(topic, ref)  # it lost its list: send it again
            return
        if len(members) >= MAX_MEMBERS:
            self.counters["refused_joins"] += 1
            self._send(ref, CliqueMembers(topic, None))
            return
        members.append(ref)
        self.counters["joins"] += 1
        self._change(topic, ref, ref)
        self._configure_all(topic)

    def _leave(self, topic: Topic, ref: Ref) -> None:
        members = self.topics.get(topic)
        if members is not None and ref in members:
            members.remove(ref)
            self.counters["leaves"] += 1
            self._change(topic, ref, None)
            self._configure_all(topic)
        self._send(ref, CliqueMembers(topic, None))  # the permission to leave (again, if asked again)

    def _suspect(self, ref: Ref, now: float) -> None:
        if ref in self.probes or not any(ref in m for m in self.topics.values()):
            return
        nonce = self.probes.suspect(ref, now)
        if nonce is not None:
            self.counters["suspects"] += 1
            self._send(ref, CliquePing(nonce))

    def _remove_everywhere(self, ref: Ref) -> None:
        self.counters["crashes_detected"] += 1
        for topic, members in self.topics.items():
            if ref in members:
                members.remove(ref)
                self._change(topic, ref, None)
                self._configure_all(topic)

    def _get_member(self, topic: Topic, ref: Ref, nonce: int, avoid: Ref | None) -> None:
        members = sorted(self.topics.get(topic, []))
        self._send(ref, MemberIs(topic, choose_member(members, self.probes, avoid, self.rng), nonce))

    # ------------------------------------------------------------------ configurations
    def _configure(self, topic: Topic, ref: Ref) -> None:
        self.counters["configurations_sent"] += 1
        self._send(ref, CliqueMembers(topic, Members(tuple(self.topics[topic]))))
        settings = self.retention.message(topic)
        if settings is not None:
            self._send(ref, settings)

    def _configure_all(self, topic: Topic) -> None:
        for ref in self.topics.get(topic, []):
            self._configure(topic, ref)

    # ------------------------------------------------------------------ retention
    def member_refs(self, topic: Topic) -> list[Ref]:
        """The members of `topic`, sorted ([]: none, or an unknown topic)."""
        return sorted(self.topics.get(topic, []))

    # ------------------------------------------------------------------ persistence
    def _change(self, topic: Topic, ref: Ref, value: Ref | None) -> None:
        if self._changes is not None:
            self._changes.append((topic, ref, value))

    def drain_changes(self) -> list[tuple[str, str, str | None]]:
        """The membership changes since the last call: (topic, member, member or None)."""
        if self._changes is None:
            return []
        out, self._changes = self._changes, []
        return out

    def load(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """The database as the daemon stored it (every member, as rows (topic, ref, ref))."""
        for topic, _, ref in rows:
            members = self.topics.setdefault(Topic(topic), [])
            if ref not in members:
                members.append(Ref(ref))

    # ------------------------------------------------------------------ helpers
    def _send(self, dest: Ref, msg: Message) -> None:
        self._out.append(Send(dest, msg))

    def _flush(self) -> list[Send]:
        out, self._out = self._out, []
        return out

    def status(self) -> dict[str, object]:
        """JSON-able state: per topic its members in list order (``label``: the place in
        the list, so that tools reading a membership by label read it too)."""
        return {
            "ref": self.ref,
            "overlay": "clique",
            "config_budget": self.config_budget,
            "suspects": self.probes.suspects(),
            "counters": dict(sorted(self.counters.items())),
            "retention": self.retention.status(),
            "topics": {
                topic: {
                    "n": len(members),
                    "legitimate_database": len(set(members)) == len(members),
                    "members": [{"label": str(i), "ref": ref} for i, ref in enumerate(members)],
                }
                for topic, members in sorted(self.topics.items())
            },
        }
