"""Churn handling at one node (paper 003 Alg. 5-6; §3.3, §5): the execution queue, the
standby list, failover and garbage collection.

A churn event at node v' is announced to v''s L successors.  The one that is v''s immediate
successor (the coordinator) queues it in exeQ; the others keep it in standbyL with a timer.
exeQ is worked one event at a time, in the order of each event's local arrival time: the
coordinator waits until its view of v' is ready (v.R(v')) -- or, beyond the paper, until a
ready timeout passes, after which it repairs with the view it has (`unready` is counted) --
or until v' is out of its L-predecessor range (then the event goes back to standbyL).  A
standby event whose timer expires while v' is in the node's L-predecessor range moves to
exeQ: that node coordinates it too (the failover; two coordinators of one event cost only
redundant edges, §3.3).  A leave of v' makes the node take over, from its standbyL, the
events that had v' as their coordinator.  When a coordinator completes a repair it tells
the L-successor range, and each one drops the event (gcChurnEvent).

The decisions are here; the predicates (is v' my immediate predecessor, is it in my
L-predecessor range, is my view of it ready) are the caller's, from its circle and view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pubsub.topicgraph.graph import Node, Topic

Kind = Literal["join", "leave"]
#: Timeouts a standby event waits before its holder considers taking it over, and a
#: coordinator waits for a ready view (INFERRED values; the paper gives none).
DEFAULT_STANDBY_TIMEOUT = 30
DEFAULT_READY_TIMEOUT = 20
#: Handled event ids remembered, so a late copy of an event is not handled again.
REMEMBERED = 4096


@dataclass(frozen=True)
class ChurnEvent:
    """One simple churn event: `node` joined (with its `topics`) or left; `id` is unique
    (the supervisor's sequence number with the node)."""

    id: str
    kind: Kind
    node: Node
    topics: frozenset[Topic] = frozenset()


@dataclass
class Queued:
    event: ChurnEvent
    localtime: int
    #: When it may move (standby: the timer; exeQ: the ready deadline).
    deadline: int
    #: Whom this node took for the coordinator when the event arrived (standby only).
    coordinator: Node | None = None


@dataclass
class ChurnQueue:
    """v.exeQ and v.standbyL with the event ids already handled."""

    standby_timeout: int = DEFAULT_STANDBY_TIMEOUT
    ready_timeout: int = DEFAULT_READY_TIMEOUT
    exe: dict[str, Queued] = field(default_factory=dict)
    standby: dict[str, Queued] = field(default_factory=dict)
    handled: dict[str, None] = field(default_factory=dict)
    #: Repairs run with a view that was not ready when the ready timeout passed.
    unready: int = 0

    def known(self, event_id: str) -> bool:
        return event_id in self.exe or event_id in self.standby or event_id in self.handled

    def handle(self, event: ChurnEvent, now: int, coordinator: Node | None, me: Node) -> None:
        """handleChurnEvent (Alg. 5); `coordinator` is v''s immediate successor as this node
        sees it.  A copy of an event already known is ignored."""
        if self.known(event.id):
            return
        if coordinator == me:
            if event.kind == "leave":
                for key in [k for k, q in self.standby.items() if q.coordinator == event.node]:
                    taken = self.standby.pop(key)
                    self.exe[key] = Queued(taken.event, taken.localtime, now + self.ready_timeout)
            self.exe[event.id] = Queued(event, now, now + self.ready_timeout)
        else:
            self.standby[event.id] = Queued(event, now, now + self.standby_timeout, coordinator)

    def next_to_repair(
        self, now: int, ready: Callable[[Node], bool], in_range: Callable[[Node], bool]
    ) -> ChurnEvent | None:
        """processExeQ (Alg. 5): the event to repair now, if any.  The oldest event waits
        for a ready view; one whose node left the L-predecessor range goes to standbyL."""
        while self.exe:
            key = min(self.exe, key=lambda k: (self.exe[k].localtime, k))
            queued = self.exe[key]
            node = queued.event.node
            if not in_range(node):
                del self.exe[key]
                self.standby[key] = Queued(queued.event, queued.localtime, now + self.standby_timeout)
                continue
            if ready(node):
                return queued.event
            if now >= queued.deadline:
                self.unready += 1
                return queued.event
            return None
        return None

    def expire_standby(self, now: int, in_range: Callable[[Node], bool]) -> list[ChurnEvent]:
        """processStandbyL (Alg. 5): standby events whose timer expired and whose node is in
        this node's L-predecessor range move to exeQ (the failover); the others are re-armed."""
        moved = []
        for key in sorted(k for k, q in self.standby.items() if now >= q.deadline):
            queued = self.standby[key]
            if in_range(queued.event.node):
                del self.standby[key]
                self.exe[key] = Queued(queued.event, queued.localtime, now + self.ready_timeout)
                moved.append(queued.event)
            else:
                queued.deadline = now + self.standby_timeout
        return moved

    def done(self, event_id: str) -> Node | None:
        """The event was handled (here, or by its coordinator: gcChurnEvent); its node, if
        the event was queued here."""
        queued = self.exe.pop(event_id, None) or self.standby.pop(event_id, None)
        self.handled[event_id] = None
        while len(self.handled) > REMEMBERED:
            del self.handled[next(iter(self.handled))]
        return queued.event.node if queued is not None else None

    def pending_nodes(self) -> set[Node]:
        """The nodes of every event still queued here (their view entries are kept)."""
        return {q.event.node for q in (*self.exe.values(), *self.standby.values())}
