"""One supervisor among several (issue 14, item 4): `SupervisorCore` for the topics it owns.

`ShardedSupervisor` wraps a `SupervisorCore` (Alg. 3, unchanged) and adds what sharding
needs around it (`pubsub.kernel.shards`):

* the live supervisor set: every Timeout a `SupervisorBeat` to every known supervisor; a
  peer silent for ``dead_after`` seconds is dead;
* ownership: a topic is served here only if the hash ring of the live set assigns it to us.
  A Subscribe, Unsubscribe, GetConfiguration or GetMember for a topic we do not own is not
  handled but answered with a redirect (`Supervisors` naming the topic and the live set),
  counted as ``redirects``;
* a change of the live set: first every member of every topic we hold is told the new set
  (so nodes re-route at once rather than at their next poll), then the topics we no longer
  own are dropped -- their rows deleted through the ordinary change journal, nothing sent
  to their members, which would disturb the new owner -- and counted as
  ``topics_released``.  A topic that becomes ours starts with an empty database, which its
  subscribers fill by subscribing again: the empty-database recovery of the paper's
  self-stabilization (the node side is in `pubsub.skipring.nodecore`);
* `GetSupervisors` from a node is answered with the live set (the nodes' and clients' one
  address suffices to find every topic's supervisor).

With no peers the live set is this supervisor alone: it owns every topic and behaves
exactly as a `SupervisorCore`.  Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.kernel.shards import (
    DEFAULT_DEAD_AFTER,
    GetSupervisors,
    HashRing,
    SupervisorBeat,
    Supervisors,
    SupervisorSet,
    ring_of,
)
from pubsub.publications.messages import GetMember
from pubsub.skipring.messages import GetConfiguration, Subscribe, Unsubscribe
from pubsub.skipring.supervisor.core import SupervisorCore

#: Requests about one topic that only the topic's owner handles.
ROUTED = (Subscribe, Unsubscribe, GetConfiguration, GetMember)


class ShardedSupervisor:
    """A `SupervisorCore` serving the topics the hash ring of the live set assigns to it."""

    def __init__(
        self, core: SupervisorCore, peers: Iterable[str] = (), *, dead_after: float = DEFAULT_DEAD_AFTER
    ) -> None:
        self.core = core
        self.ref = core.ref
        self.view = SupervisorSet(core.ref, peers, dead_after=dead_after)
        self.ring: HashRing = ring_of(self.view.live)
        #: redirects, topics_released, view_changes.
        self.counters: Counter[str] = Counter()

    # ------------------------------------------------------------------ ownership
    def owns(self, topic: Topic) -> bool:
        return self.ring.owner(topic) == self.ref

    def live(self) -> list[str]:
        return sorted(self.view.live)

    # ------------------------------------------------------------------ entry points
    def handle(self, msg: Message, now: float) -> list[Send]:
        if isinstance(msg, SupervisorBeat):
            changed = self.view.heard(msg.ref, msg.known, now)
            return self._resharded() if changed else []
        if isinstance(msg, GetSupervisors):
            return [Send(msg.ref, Supervisors(self.ref, self.live()))]
        if isinstance(msg, ROUTED) and not self.owns(msg.topic):
            self.counters["redirects"] += 1
            return [Send(msg.ref, Supervisors(self.ref, self.live(), redirect=msg.topic))]
        return self.core.handle(msg, now)

    def timeout(self, now: float) -> list[Send]:
        sends = self._resharded() if self.view.tick(now) else []
        known: list[str] = sorted(self.view.known)
        sends.extend(Send(peer, SupervisorBeat(self.ref, known)) for peer in self.view.peers())
        sends.extend(self.core.timeout(now))
        return sends

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        if ref in self.view.known:
            return []  # a supervisor: its silence is judged by the beats alone
        return self.core.peer_unreachable(ref, now)

    # ------------------------------------------------------------------ a new live set
    def _resharded(self) -> list[Send]:
        """The live set changed: tell our members, then drop the topics we no longer own."""
        self.ring = ring_of(self.view.live)
        self.counters["view_changes"] += 1
        members: set[Ref] = set()
        for db in self.core.topics.values():
            members.update(r for _, r in db.members() if r is not None)
        live = self.live()
        sends = [Send(ref, Supervisors(self.ref, live)) for ref in sorted(members)]
        for topic in [t for t in self.core.topics if not self.owns(t)]:
            self.drop(topic)
        return sends

    def drop(self, topic: Topic) -> None:
        """Forget `topic`: its rows are deleted (journaled), nothing is sent."""
        core = self.core
        db = core.topics.pop(topic, None)
        if db is None:
            return
        for label in list(db.by_label):
            db.remove(label)
        core._urgent.pop(topic, None)
        core._boosts.pop(topic, None)
        self.counters["topics_released"] += 1

    # ------------------------------------------------------------------ the daemon's view
    def status(self) -> dict[str, object]:
        body = self.core.status()
        body["supervisors"] = {
            "live": self.live(),
            "known": sorted(self.view.known),
            "counters": dict(sorted(self.counters.items())),
        }
        return body

    def drain_changes(self) -> list[tuple[str, str, str | None]]:
        return self.core.drain_changes()

    def __getattr__(self, name: str) -> object:
        """Everything else (retention, probes, load, ...) is the wrapped core's."""
        return getattr(self.core, name)
