"""The clique at one node: `CliqueOverlay`, a `pubsub.publications.overlay.NodeOverlay`.

Per topic the node holds the member list its supervisor last sent (`CliqueMembers`); it is
*configured* once that list names it.  Until then it asks to join on every Timeout
(`CliqueJoin`); while leaving it asks to leave on every Timeout (`CliqueLeave`) until the
supervisor answers with no list, the permission to leave (as in paper 000, Lemma 4.1, so a
lost request strands nobody), and then lets the topic go (`Released`).

What publications travel on: every other member is a neighbour (flooding reaches everyone
in one hop); for the arc broadcast the members sit on the ring in the order of the list, at
multiples of 2^(64-k) (k the bits needed for n positions), so that every member's piece of
the publisher's arc holds that member alone and nobody forwards: n - 1 messages; the
partner of each anti-entropy round is one random member (two while `eager`).

A member the runtime cannot reach is left out of this node's lists at once and reported to
the supervisor (`CliqueSuspect`), which probes it before removing it anywhere.  A member
list that is malformed (not references, more than `MAX_MEMBERS`, a member twice) is refused
by the codec (`pubsub.clique.messages.validate_members`); the overlay counts one that
reaches it anyway (a test handing it in) and ignores it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pubsub.clique.messages import (
    MAX_MEMBERS,
    CliqueJoin,
    CliqueLeave,
    CliqueMembers,
    CliquePing,
    CliquePong,
    CliqueSuspect,
)
from pubsub.kernel.effects import Effect
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.publications.arcs import POSITION_BITS, ArcView
from pubsub.publications.overlay import Released


@dataclass(slots=True)
class _Topic:
    """One topic at this node: the member list as last heard (None: not configured)."""

    members: tuple[Ref, ...] | None = None
    unreachable: frozenset[Ref] = frozenset()
    view: ArcView | None = None


def positions(members: Sequence[Ref]) -> tuple[int, tuple[int, ...]]:
    """The ring's resolution k and each member's position, in list order (module docstring)."""
    k = max(1, (len(members) - 1).bit_length())
    step = 1 << (POSITION_BITS - k)
    return k, tuple(i * step for i in range(len(members)))


class CliqueOverlay:
    """Every topic of one node in the clique overlay (module docstring)."""

    def __init__(self, ref: Ref, supervisor: Ref) -> None:
        self.ref = ref
        self.supervisor = supervisor
        self.wanted_topics: set[Topic] = set()
        self.leaving: set[Topic] = set()
        self.topics_run: dict[Topic, _Topic] = {}
        #: refused_member_lists, suspects_reported.
        self.counters: Counter[str] = Counter()

    # ------------------------------------------------------------------ membership
    def join(self, topic: Topic, rng: random.Random) -> list[Send]:
        self.wanted_topics.add(topic)
        self.leaving.discard(topic)
        state = self.topics_run.setdefault(topic, _Topic())
        if self._configured(state):
            return []
        return [Send(self.supervisor, CliqueJoin(topic, self.ref))]

    def leave(self, topic: Topic) -> list[Send]:
        self.wanted_topics.discard(topic)
        if topic not in self.topics_run:
            return []
        self.leaving.add(topic)
        return [Send(self.supervisor, CliqueLeave(topic, self.ref))]

    def runs(self, topic: Topic) -> bool:
        return topic in self.topics_run

    def is_member(self, topic: Topic) -> bool:
        return topic in self.topics_run and topic not in self.leaving

    def is_configured(self, topic: Topic) -> bool:
        state = self.topics_run.get(topic)
        return state is not None and topic not in self.leaving and self._configured(state)

    def exchanges(self, topic: Topic) -> bool:
        state = self.topics_run.get(topic)
        return state is not None and self._configured(state)

    def _configured(self, state: _Topic) -> bool:
        return state.members is not None and self.ref in state.members

    def topics(self) -> Iterator[Topic]:
        return iter(list(self.topics_run))

    def owner_of(self, topic: Topic) -> Ref:
        return self.supervisor

    def admitted_supervisor(self, msg: Message, name: str) -> Ref:
        return self.supervisor

    # ------------------------------------------------------------------ what publications travel on
    def _others(self, state: _Topic) -> list[Ref]:
        members = state.members or ()
        return [r for r in members if r != self.ref and r not in state.unreachable]

    def neighbours(self, topic: Topic) -> Iterator[Ref]:
        state = self.topics_run.get(topic)
        return iter(()) if state is None else iter(self._others(state))

    def arc_view(self, topic: Topic) -> ArcView | None:
        """The members on the ring in list order; None until configured."""
        state = self.topics_run.get(topic)
        if state is None or not self._configured(state):
            return None
        if state.view is None:
            assert state.members is not None
            k, places = positions(state.members)
            mine = places[state.members.index(self.ref)]
            others = tuple(
                (place, ref) for place, ref in zip(places, state.members, strict=True)
                if ref != self.ref and ref not in state.unreachable
            )
            state.view = ArcView(mine, k, others, len(state.members) > 1)
        return state.view

    def partners(self, topic: Topic, rng: random.Random, eager: bool) -> list[Ref]:
        state = self.topics_run.get(topic)
        others = [] if state is None else self._others(state)
        if not others:
            return []
        return rng.sample(others, min(2 if eager else 1, len(others)))

    # ------------------------------------------------------------------ the overlay's protocol
    def handle(self, msg: Message, now: float, rng: random.Random) -> Sequence[Effect | Released]:
        if isinstance(msg, CliqueMembers):
            return self._members(msg)
        if isinstance(msg, CliquePing):
            return [Send(self.supervisor, CliquePong(msg.nonce, self.ref))]
        return []

    def _members(self, msg: CliqueMembers) -> Sequence[Effect | Released]:
        topic = msg.topic
        state = self.topics_run.get(topic)
        members = msg.members  # checked by the codec (`validate_members`)
        if members is not None and (len(members) > MAX_MEMBERS or len(set(members)) != len(members)):
            self.counters["refused_member_lists"] += 1  # a list the codec never let through
            return []
        if state is None:  # a topic we do not run
            if members is not None and self.ref in members:
                return [Send(self.supervisor, CliqueLeave(topic, self.ref))]
            return []
        if members is None or self.ref not in members:
            if topic in self.leaving:  # the permission to leave
                released = Released(topic, tuple(self.neighbours(topic)), self.arc_view(topic))
                del self.topics_run[topic]
                self.leaving.discard(topic)
                return [released]
            state.members, state.view = None, None  # not (or no longer) a member: ask again
            return []
        if members != state.members:
            state.members, state.view = tuple(members), None
            state.unreachable = state.unreachable & frozenset(members)
        return []

    def refuses(self, msg: Message) -> list[Send] | None:
        """Every sender is admitted: every member is a neighbour."""
        return None

    def not_a_member(self, msg: Message) -> list[Send]:
        """A publication for a topic we do not run: nothing to say (the sender's list is
        made again by the supervisor's next configuration)."""
        return []

    def timeout(self, now: float) -> list[Send]:
        return []

    def topic_timeout(self, topic: Topic, rng: random.Random) -> list[Send]:
        """Ask again until the supervisor answered: to leave, or to join."""
        if topic in self.leaving:
            return [Send(self.supervisor, CliqueLeave(topic, self.ref))]
        if not self.is_configured(topic):
            return [Send(self.supervisor, CliqueJoin(topic, self.ref))]
        return []

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        if ref == self.supervisor:
            return []
        for state in self.topics_run.values():
            if state.members is not None and ref in state.members:
                state.unreachable = state.unreachable | {ref}
                state.view = None
        self.counters["suspects_reported"] += 1
        return [Send(self.supervisor, CliqueSuspect(self.ref, ref))]

    # ------------------------------------------------------------------ inspection
    def status(self) -> dict[str, object]:
        topics: dict[str, object] = {}
        for topic, state in sorted(self.topics_run.items()):
            topics[topic] = {
                "members": None if state.members is None else list(state.members),
                "configured": self._configured(state),
                "unreachable": sorted(state.unreachable),
                "leaving": topic in self.leaving,
            }
        return {
            "ref": self.ref,
            "supervisor": self.supervisor,
            "overlay": "clique",
            "topics": topics,
            "counters": dict(sorted(self.counters.items())),
        }
