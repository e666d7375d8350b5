"""Sharded supervisors (issue 14, item 4; paper 000, §1.3): which supervisor owns a topic.

The paper names the one supervisor as the system's scaling limit and suggests the fix:
several supervisors, each responsible for the topics that consistent hashing assigns to it.
Every topic still has exactly one supervisor and every algorithm of the paper runs
unchanged per topic; only *which* supervisor a node talks to for a topic is decided here.

* `HashRing`: a consistent-hash ring.  Each supervisor reference gets `VIRTUAL_POINTS`
  points (xxh64 of ``"ref#i"``); a topic belongs to the first point at or after xxh64 of its
  name (wrapping around).  Adding a supervisor moves only the topics whose first point is
  now one of the newcomer's (about 1/(k+1) of them); removing one moves only its own.
* `SupervisorSet`: one supervisor's view of the live supervisor set.  Every Timeout a
  supervisor sends `SupervisorBeat` to every supervisor it knows; a peer not heard from for
  `dead_after` seconds is dead (left out of the live set), one heard from again is alive
  again.  A beat also carries the sender's known set, so a supervisor started with
  ``--join ANY`` becomes known to all within one round.  Peers learned second-hand are not
  live before they are heard directly, so a dead supervisor gossiped about does not return.
* Messages: `SupervisorBeat` (supervisor -> supervisor), `GetSupervisors` (node ->
  supervisor) and `Supervisors` (supervisor -> node: the live set; also the *redirect* a
  supervisor sends for a topic it does not own, naming the topic).

Pure: no I/O, time comes in as `now`.  With a single supervisor every topic's owner is that
supervisor, and nodes and supervisors behave exactly as without sharding.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable, Mapping
from typing import Any

import xxhash

from pubsub.kernel.message import Message, Ref, Topic, message

#: Points per supervisor on the hash ring.
VIRTUAL_POINTS = 64
#: Seconds without a beat after which a peer supervisor counts as dead.
DEFAULT_DEAD_AFTER = 3.0


def _hash(key: str) -> int:
    return int(xxhash.xxh64_intdigest(key.encode("utf-8")))


class HashRing:
    """Consistent hashing of topic names onto supervisor references."""

    def __init__(self, refs: Iterable[str], points: int = VIRTUAL_POINTS) -> None:
        self.refs: tuple[Ref, ...] = tuple(sorted({Ref(r) for r in refs}))
        if not self.refs:
            raise ValueError("a hash ring needs at least one supervisor")
        if points < 1:
            raise ValueError("points must be at least 1")
        ring = sorted((_hash(f"{ref}#{i}"), ref) for ref in self.refs for i in range(points))
        self._keys = [key for key, _ in ring]
        self._owners = [ref for _, ref in ring]

    def owner(self, topic: str) -> Ref:
        """The supervisor that owns `topic`."""
        if len(self.refs) == 1:
            return self.refs[0]
        i = bisect.bisect_left(self._keys, _hash(topic))
        return self._owners[i % len(self._owners)]

    def __repr__(self) -> str:
        return f"HashRing({list(self.refs)})"


@functools.lru_cache(maxsize=64)
def ring_of(refs: frozenset[str]) -> HashRing:
    """The (cached) hash ring of a supervisor set."""
    return HashRing(refs)


def owner(topic: str, live: Iterable[str]) -> Ref:
    """The supervisor of `live` that owns `topic`."""
    return ring_of(frozenset(live)).owner(topic)


def merged_topics(bodies: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """Several supervisors' status bodies (by reference) as one topic table -- a topic several
    hold is taken from its owner in the live set the first body reports -- and that live set
    (the answering supervisors when none reports one)."""
    live = next((b.get("supervisors", {}).get("live") for b in bodies.values()), None) or list(bodies)
    topics: dict[str, Any] = {}
    for ref, body in bodies.items():
        for topic, entry in (body.get("topics") or {}).items():
            if topic not in topics or owner(topic, live) == ref:
                topics[topic] = entry
    return topics, live


class SupervisorSet:
    """One supervisor's view of the supervisors alive (module docstring)."""

    def __init__(
        self, me: Ref, peers: Iterable[str] = (), *, dead_after: float = DEFAULT_DEAD_AFTER
    ) -> None:
        if dead_after <= 0:
            raise ValueError("dead_after must be positive")
        self.me = me
        self.dead_after = dead_after
        #: Every supervisor we know of (we beat to each), alive or not.
        self.known: set[Ref] = {me, *(Ref(p) for p in peers)}
        #: When each peer was last heard from; None: not yet (configured peers count as
        #: alive from our first Timeout on, gossiped ones only once heard).
        self._heard: dict[Ref, float | None] = {Ref(p): None for p in peers if p != me}
        self._started: float | None = None
        self._gossiped: set[Ref] = set()
        self.live: frozenset[Ref] = frozenset(self.known)

    def heard(self, ref: Ref, known: Iterable[str], now: float) -> bool:
        """A beat from `ref` naming the supervisors it knows; True if the live set changed."""
        if ref != self.me:
            self.known.add(ref)
            self._heard[ref] = now
            self._gossiped.discard(ref)
        for other in known:
            other = Ref(other)
            if other not in self.known:
                self.known.add(other)
                self._gossiped.add(other)
        return self._recompute(now)

    def tick(self, now: float) -> bool:
        """A Timeout: True if the live set changed (a peer fell silent)."""
        if self._started is None:
            self._started = now
        return self._recompute(now)

    def _alive(self, ref: Ref, now: float) -> bool:
        if ref == self.me:
            return True
        if ref in self._gossiped:
            return False
        last = self._heard.get(ref)
        if last is None:
            last = self._started if self._started is not None else now
        return now - last <= self.dead_after

    def _recompute(self, now: float) -> bool:
        live = frozenset(r for r in self.known if self._alive(r, now))
        if live == self.live:
            return False
        self.live = live
        return True

    def peers(self) -> list[Ref]:
        """Every known supervisor but us (the beats' destinations)."""
        return sorted(self.known - {self.me})


# --- messages ------------------------------------------------------------------------------------
@message("supervisor_beat")
class SupervisorBeat(Message):
    """Supervisor -> supervisor, every Timeout: `ref` is alive and knows `known`."""

    ref: Ref
    known: list[str]


@message("get_supervisors")
class GetSupervisors(Message):
    """Node -> supervisor: which supervisors are alive?  The answer goes to `ref`."""

    ref: Ref


@message("supervisors")
class Supervisors(Message):
    """Supervisor `ref` -> node: the live supervisor set.  With `redirect`, it answers a
    request about that topic, which `ref` does not own."""

    ref: Ref
    live: list[str]
    redirect: Topic | None = None


@message("supervisors_request")
class SupervisorsRequest(Message):
    """Client -> supervisor: which supervisors are alive?  Answered with
    ``Reply(body={"live": [...], "overlay": the overlay it runs})``."""


__all__ = [
    "DEFAULT_DEAD_AFTER",
    "GetSupervisors",
    "HashRing",
    "SupervisorBeat",
    "SupervisorSet",
    "Supervisors",
    "SupervisorsRequest",
    "VIRTUAL_POINTS",
    "owner",
    "ring_of",
]
