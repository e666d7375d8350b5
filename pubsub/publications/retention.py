"""Retention: per-topic limits that every node applies alike (issue 13, item 6).

A topic may keep its publications for at most ``max_age_ms``, at most ``max_count`` of them
and at most ``max_bytes`` of payload (0: no limit), and an operator may *purge* it.  The
supervisor holds these settings (`supervisor.retention`) and sends them as `Retention` with
every configuration of a member (beside SetData, Alg. 3 l.24-30) and at once to every member
when they change.  This module is what a node does with them; like every core it does no
I/O: wall-clock time comes in as an argument (`NodeRetention.wall_offset` turns the core's
``now`` into Unix milliseconds).

What "identically" means
    Anti-entropy (Alg. 5) makes tries equal by *adding* what a neighbour lacks; a node that
    removes a publication its neighbour still holds would be handed it back in the next
    round.  So removal must be a function of things every node sees the same way, and a
    removed publication must never be taken back:

    * **Order.**  Publications are ordered by ``(published_ms, key)``: the timestamp the first
      node stamped on it when a client handed it over (`Publication.published_ms`; it travels
      with the publication, so every node reads the same value -- no node's own clock or
      arrival time is involved) and, to break ties, the key.  A publication whose timestamp
      is unknown (0) is the oldest of all.
    * **The horizon.**  Each topic has a *horizon* ``through`` = (ms, key): every publication
      ordered at or before it is outside the window.  It only moves forward.  A node refuses
      to store anything at or before its horizon -- from anti-entropy's Publish (Alg. 5 l.6-9),
      a flood (l.30-34), the arc broadcast, a hand-over or its own store at restart -- and
      removes what it holds there, so it never sends such a publication either.  That is why
      nothing is resurrected: a node that still holds an expired publication (it was down,
      or its clock is late) can offer it, but every node past that horizon refuses it; and
      a returning node takes its horizon from its store and prunes before it exchanges.
    * **Max age.**  The horizon of age is ``(start - 1, max key)`` where ``start`` is
      ``wall_ms - max_age_ms`` rounded *down* to a step of ``max_age_ms / 8`` (at least
      100 ms, at most a minute, `quantum_ms`).  Nodes whose clocks agree to better than a
      step compute the very same horizon except for the moment after each step, so their
      tries are equal between steps instead of differing forever by the publications near
      a continuously moving edge.  The price is that a publication is kept up to one step
      longer than ``max_age_ms``; it is never removed earlier.
    * **Max count and bytes** are defined on the set alone: a publication is outside the
      window when at least ``max_count`` held publications are ordered after it, or when it
      and the publications ordered after it hold more than ``max_bytes`` of payload.  Both
      rules are *monotone*: more publications can only push a publication out, never take
      it back in.  So a node that decides on the subset it holds removes only what the
      union of all nodes' sets removes too, and nodes with the same set remove the same
      publications.  Its horizon becomes the newest publication it removed (not the oldest
      it kept: a publication ordered between the two may still fit).
    * **Purge** is a horizon the supervisor sets: ``(purged_ms, max key)`` with ``purged_ms``
      the supervisor's wall clock when the operator asked.  It removes every publication
      stamped at or before that moment; a publisher whose clock is behind the supervisor's
      by d loses what it publishes in the d after the purge too.

    The horizon is applied at every Timeout (before the node's own anti-entropy round) and,
    when a step has passed since, on the arrival of a publication message; between those
    moments a node only refuses what lies at or before its last horizon.

What it costs
    A topic without settings has no `Window`: one attribute test per stored publication.  A
    topic with a limit keeps its publications in a sorted index (O(log n) per store); each
    advance removes from the old end, O(log n) per removed publication.

Assumption: the nodes' clocks agree to within a step (NTP).  A clock that is ahead removes
publications early at that node only until the others catch up, and makes its
anti-entropy rounds with them find differences meanwhile; a clock that is behind keeps them
longer and offers them to neighbours that refuse them.  Neither breaks convergence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from sortedcontainers import SortedList

from pubsub.kernel.message import Message, Ref, Send, Topic, message
from pubsub.publications.messages import Publication
from pubsub.publications.trie import HASH_BYTES, PatriciaTrie

#: A position in the retention order: (published_ms, key).
Order = tuple[int, bytes]
#: The horizon before anything was removed (every real publication is after it).
NOTHING: Order = (-1, b"")
#: The largest key: (ms, MAX_KEY) lies after every publication stamped ms.
MAX_KEY = b"\xff" * HASH_BYTES
#: Steps per max-age, and the bounds of one step (`quantum_ms`).
STEPS_PER_AGE = 8
MIN_STEP_MS = 100
MAX_STEP_MS = 60_000
#: Largest limit accepted (about 292 years in ms; far beyond any sensible setting).
MAX_LIMIT = (1 << 63) - 1


# --- messages ----------------------------------------------------------------------------------
@message("retention")
class Retention(Message):
    """Supervisor -> node: the retention settings of `topic` (0 = no limit; `purged_ms` 0 =
    never purged).  Sent with every configuration of a member of a topic that has settings,
    and to every member when they change."""

    topic: Topic
    max_age_ms: int
    max_count: int
    max_bytes: int
    purged_ms: int


@message("retention_set")
class SetRetention(Message):
    """Client (operator) -> supervisor: change `topic`'s limits; None leaves a limit as it
    is, 0 removes it (``pubsub retention set``)."""

    topic: Topic
    max_age_ms: int | None = None
    max_count: int | None = None
    max_bytes: int | None = None


@message("topic_purge")
class PurgeTopic(Message):
    """Client (operator) -> supervisor: remove every publication of `topic` stamped until now
    at every node (``pubsub topic purge``)."""

    topic: Topic


# --- settings ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Policy:
    """A topic's retention settings (0 = no limit / never purged)."""

    max_age_ms: int = 0
    max_count: int = 0
    max_bytes: int = 0
    purged_ms: int = 0

    def __post_init__(self) -> None:
        for name in ("max_age_ms", "max_count", "max_bytes", "purged_ms"):
            value = getattr(self, name)
            if type(value) is not int or not 0 <= value <= MAX_LIMIT:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")

    @property
    def limited(self) -> bool:
        """Whether anything is ever removed under these settings."""
        return bool(self.max_age_ms or self.max_count or self.max_bytes or self.purged_ms)

    @classmethod
    def of(cls, msg: Retention) -> Policy:
        """The settings a Retention message carries (ValueError if malformed)."""
        return cls(msg.max_age_ms, msg.max_count, msg.max_bytes, msg.purged_ms)

    def message(self, topic: Topic) -> Retention:
        return Retention(topic, self.max_age_ms, self.max_count, self.max_bytes, self.purged_ms)

    def as_dict(self) -> dict[str, int]:
        return {
            "max_age_ms": self.max_age_ms,
            "max_count": self.max_count,
            "max_bytes": self.max_bytes,
            "purged_ms": self.purged_ms,
        }


def quantum_ms(max_age_ms: int) -> int:
    """The step by which the max-age horizon moves (module docstring)."""
    return max(MIN_STEP_MS, min(MAX_STEP_MS, max_age_ms // STEPS_PER_AGE))


def horizon(policy: Policy, wall_ms: int) -> Order:
    """The horizon the clock-driven limits (max age, purge) give at `wall_ms`."""
    through = NOTHING
    if policy.purged_ms:
        through = (policy.purged_ms, MAX_KEY)
    if policy.max_age_ms:
        step = quantum_ms(policy.max_age_ms)
        start = (wall_ms - policy.max_age_ms) // step * step  # oldest stamp still inside
        through = max(through, (start - 1, MAX_KEY))
    return through


def order(publication: Publication) -> Order:
    """A publication's place in the retention order."""
    return (publication.published_ms, publication.key)


# --- one topic at one node ------------------------------------------------------------------------
@dataclass(eq=False)
class Window:
    """One topic's retention at one node: its settings, its horizon and (while a limit is
    set) the index of what it holds in retention order."""

    policy: Policy = field(default_factory=Policy)
    through: Order = NOTHING
    #: (published_ms, key, publication) of every held publication; None until needed.
    _index: SortedList | None = None
    _bytes: int = 0
    #: The wall clock (ms) at which the max-age horizon next moves.
    next_step_ms: int = 0

    def admits(self, publication: Publication) -> bool:
        """Whether `publication` lies after the horizon (may be stored)."""
        ms, through = publication.published_ms, self.through
        return ms > through[0] or (ms == through[0] and publication.key > through[1])

    # the index follows the trie (`AntiEntropy.store` / `forget`)
    def added(self, publication: Publication) -> None:
        if self._index is not None:
            self._index.add((publication.published_ms, publication.key, publication))
            self._bytes += len(publication.payload)

    def removed(self, publication: Publication) -> None:
        if self._index is not None:
            entry = (publication.published_ms, publication.key, publication)
            if entry in self._index:
                self._index.remove(entry)
                self._bytes -= len(publication.payload)

    def invalidate(self) -> None:
        """Forget the index (the trie changed behind our back); rebuilt when needed."""
        self._index = None
        self._bytes = 0

    def due(self, wall_ms: int) -> bool:
        """Whether the clock-driven horizon may have moved since the last `advance`."""
        return bool(self.policy.max_age_ms) and wall_ms >= self.next_step_ms

    def advance(self, wall_ms: int, held: Callable[[], Iterable[Publication]]) -> list[Publication]:
        """Move the horizon to where the settings put it at `wall_ms` and return the held
        publications now at or before it (the caller removes them from the trie).

        `held` gives every publication of the trie; it is called only to build the index.
        """
        policy = self.policy
        if policy.max_age_ms:
            step = quantum_ms(policy.max_age_ms)
            self.next_step_ms = (wall_ms - policy.max_age_ms) // step * step + step + policy.max_age_ms
        through = max(self.through, horizon(policy, wall_ms))
        if not policy.limited:
            self.through = through
            return []
        index = self._index
        if index is None:
            index = self._index = SortedList((p.published_ms, p.key, p) for p in held())
            self._bytes = sum(len(entry[2].payload) for entry in index)
        out: list[Publication] = []
        count, size = policy.max_count, policy.max_bytes
        while index:
            ms, key, publication = index[0]
            if (ms, key) <= through or (count and len(index) > count) or (size and self._bytes > size):
                index.pop(0)
                self._bytes -= len(publication.payload)
                through = max(through, (ms, key))
                out.append(publication)
            else:
                break
        self.through = through
        return out

    def status(self) -> dict[str, object]:
        return {
            **self.policy.as_dict(),
            "through_ms": self.through[0],
            "through_key": self.through[1].hex(),
        }


class TopicCore(Protocol):
    """What `NodeRetention` needs of a topic's publication core (`AntiEntropy`)."""

    trie: PatriciaTrie[Publication]
    counters: Counter[str]

    def trie_key(self, publication: Publication) -> int: ...

    def publications(self) -> list[Publication]: ...


@dataclass(eq=False)
class NodeRetention:
    """Every topic's `Window` at one node, and what changed for the daemon to persist."""

    #: Seconds to add to the core's clock to get Unix time (the daemon sets it).
    wall_offset: float = 0.0
    windows: dict[Topic, Window] = field(default_factory=dict)
    #: Topics whose settings or horizon changed since `drain_changes`.
    changed: set[Topic] = field(default_factory=set)
    counters: Counter[str] = field(default_factory=Counter)

    def wall_ms(self, now: float) -> int:
        return int((now + self.wall_offset) * 1000)

    def window(self, topic: Topic) -> Window | None:
        return self.windows.get(topic)

    def load(self, topic: Topic, policy: Policy, through: Order) -> Window:
        """Settings and horizon kept from before a restart (`pubsub.node.store`)."""
        window = self.windows.setdefault(topic, Window())
        window.policy = policy
        window.through = max(window.through, through)
        window.invalidate()
        self.changed.add(topic)
        return window

    def configure(self, msg: Retention) -> Window | None:
        """Retention from the supervisor: adopt its limits; the purge moment and the horizon
        only move forward.  None (counted) if the message is malformed."""
        try:
            given = Policy.of(msg)
        except ValueError:
            self.counters["rejected_retention"] += 1
            return None
        window = self.windows.get(msg.topic)
        if window is None:
            window = self.windows[msg.topic] = Window()
        purged = max(given.purged_ms, window.policy.purged_ms)
        policy = Policy(given.max_age_ms, given.max_count, given.max_bytes, purged)
        if policy != window.policy:
            window.policy = policy
            window.next_step_ms = 0  # apply at once
            self.changed.add(msg.topic)
            self.counters["retention_configured"] += 1
        return window

    def advance(self, topic: Topic, core: TopicCore, now: float) -> int:
        """Apply `topic`'s window to its trie at `now`: move the horizon, take out what lies
        at or before it; how many went."""
        window = self.windows.get(topic)
        if window is None:
            return 0
        before = window.through
        removed = window.advance(self.wall_ms(now), core.publications)
        if removed:
            trie = core.trie
            for publication in removed:
                trie.remove(core.trie_key(publication))
            core.counters["retention_removed"] += len(removed)
            self.counters["removed"] += len(removed)
        if window.through != before:
            self.changed.add(topic)
        return len(removed)

    def due(self, topic: Topic, now: float) -> bool:
        """Whether `topic`'s max-age horizon has a step to take (checked on arrivals)."""
        window = self.windows.get(topic)
        return window is not None and window.due(self.wall_ms(now))

    def admitted(self, topic: Topic, publications: Iterable[Publication]) -> list[Publication]:
        """Those of `publications` inside `topic`'s window (all when it has none)."""
        window = self.windows.get(topic)
        if window is None:
            return list(publications)
        return [p for p in publications if window.admits(p)]

    def drain_changes(self) -> list[tuple[Topic, Policy, Order]]:
        """(topic, settings, horizon) of every topic changed since the last call."""
        out = [(t, self.windows[t].policy, self.windows[t].through) for t in sorted(self.changed) if t in self.windows]
        self.changed.clear()
        return out

    def status(self, topic: Topic) -> dict[str, object] | None:
        window = self.windows.get(topic)
        return None if window is None else window.status()


# --- the supervisor's table ----------------------------------------------------------------------
@dataclass(eq=False)
class RetentionTable:
    """The retention settings of every topic, as the supervisor holds them (its daemon
    persists what `drain_changes` reports; `pubsub.skipring.supervisor.core` sends `message` with each
    configuration of a member and to every member when a topic's settings change)."""

    policies: dict[Topic, Policy] = field(default_factory=dict)
    changed: set[Topic] = field(default_factory=set)

    def get(self, topic: Topic) -> Policy | None:
        return self.policies.get(topic)

    def set(
        self,
        topic: Topic,
        max_age_ms: int | None = None,
        max_count: int | None = None,
        max_bytes: int | None = None,
        wall_ms: int | None = None,
    ) -> Policy:
        """Change `topic`'s limits (None: keep as is, 0: no limit); ValueError if negative.

        A max age lifted or raised at `wall_ms` keeps removed what it removed: its horizon
        then becomes the topic's purge point.  Otherwise a node that was down while those
        publications expired, and still holds them, would keep them (no limit tells it to
        remove them) and offer them forever to nodes that refuse them."""
        old = self.policies.get(topic, Policy())
        age = old.max_age_ms if max_age_ms is None else max_age_ms
        purged = old.purged_ms
        if wall_ms is not None and old.max_age_ms and (age == 0 or age > old.max_age_ms):
            purged = max(purged, horizon(old, wall_ms)[0])
        policy = Policy(
            age,
            old.max_count if max_count is None else max_count,
            old.max_bytes if max_bytes is None else max_bytes,
            purged,
        )
        self._put(topic, policy)
        return policy

    def purge(self, topic: Topic, wall_ms: int) -> Policy:
        """Everything of `topic` stamped at or before `wall_ms` goes, at every node."""
        old = self.policies.get(topic, Policy())
        policy = Policy(old.max_age_ms, old.max_count, old.max_bytes, max(old.purged_ms, wall_ms))
        self._put(topic, policy)
        return policy

    def _put(self, topic: Topic, policy: Policy) -> None:
        if self.policies.get(topic) != policy:
            self.policies[topic] = policy
            self.changed.add(topic)

    def restore(self, topic: Topic, policy: Policy | None) -> None:
        """Put back `topic`'s settings as they were (a change that could not be stored)."""
        if policy is None:
            self.policies.pop(topic, None)
        else:
            self.policies[topic] = policy
        self.changed.discard(topic)

    def message(self, topic: Topic) -> Retention | None:
        """What goes with a configuration of a member of `topic` (None: no settings)."""
        policy = self.policies.get(topic)
        return None if policy is None else policy.message(topic)

    def announce(self, topic: Topic, members: Iterable[Ref]) -> list[Send]:
        """The topic's settings for each of `members`, after they changed (none while the
        topic has no settings): what a supervisor sends on `set` and `purge`."""
        settings = self.message(topic)
        return [] if settings is None else [Send(ref, settings) for ref in members]

    def load(self, rows: Iterable[tuple[str, int, int, int, int]]) -> int:
        """Settings kept by the daemon; malformed rows are skipped.  How many were loaded."""
        loaded = 0
        for topic, *values in rows:
            try:
                self.policies[Topic(topic)] = Policy(*values)
            except (TypeError, ValueError):
                continue
            loaded += 1
        return loaded

    def drain_changes(self) -> list[tuple[Topic, Policy]]:
        out = [(topic, self.policies[topic]) for topic in sorted(self.changed)]
        self.changed.clear()
        return out

    def status(self) -> dict[str, dict[str, int]]:
        return {topic: policy.as_dict() for topic, policy in sorted(self.policies.items())}
