"""The `omen` overlay at one node: `OmenOverlay`, a `pubsub.publications.overlay.NodeOverlay`
over the OMen protocol core (`pubsub.omen.node.OmenNode`).

Membership: the node tells its supervisor the topics it is in (`OmenJoin`) at its first
Timeout after a client joined one -- so the topics joined at start-up go in one join --,
again on every Timeout until the supervisor's `OmenMembership` holds it in exactly those,
then every `REFRESH_EVERY` Timeouts as a reminder (a supervisor that lost it, or restarted
without its store, learns it again).  Topics added are a join event for the added topics;
a topic dropped is a leave and a join (OMen has no topic change; the node drops its edges
when it asks, and the leave repair mends around it).  A topic the node left keeps running
until the supervisor's membership no longer holds it, then it is let go (`Released`).

What publications travel on: a topic's neighbours are the node's OMen neighbours that share
it (their topics come with the edges and with gossip); publications are flooded (a general
graph has no arcs) and each anti-entropy round picks one of them at random (two while
`eager`).  Every sender is admitted: OMen's edges reach the two endpoints at different
moments, so a neighbour one end does not hold yet is no intruder.  A neighbour the runtime
cannot reach is left out and reported (`OmenSuspect`); the supervisor probes it, and once it
is off the circle tells the node (`OmenGone`), which drops the edge and asks for a repair of
its own (`OmenMend`).

OMen is not self-stabilizing (docs/omen.md): the status says so.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence

from pubsub.kernel.contracts import Measure
from pubsub.kernel.effects import Effect
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.omen.messages import (
    OmenGone,
    OmenJoin,
    OmenLeave,
    OmenMembership,
    OmenMend,
    OmenPing,
    OmenPong,
    OmenSuspect,
    Topics,
)
from pubsub.omen.node import OmenNode, Settings, settings_of
from pubsub.publications.arcs import ArcView
from pubsub.publications.overlay import Released

#: Timeouts between two reminders of a node whose membership agrees.
REFRESH_EVERY = 20

NOT_SELF_STABILIZING = (
    "omen is not self-stabilizing: it handles every churn event while at most L are concurrent, "
    "from a correct TCO; more concurrent events, or an edge lost without one, are not repaired"
)


class OmenOverlay:
    """Every topic of one node in the `omen` overlay (module docstring)."""

    def __init__(self, ref: Ref, supervisor: Ref, settings: Settings, rng: random.Random) -> None:
        self.ref = ref
        self.supervisor = supervisor
        self.core = OmenNode(ref, frozenset(), settings, rng)
        self.wanted_topics: set[Topic] = set()
        #: The topics the supervisor holds us in (None: no membership yet).
        self.held: frozenset[Topic] | None = None
        self.running: set[Topic] = set()
        self.unreachable: set[Ref] = set()
        self.ticks = 0
        self._told: frozenset[Topic] | None = None
        self._quiet = 0
        self.counters: Counter[str] = Counter()

    # ------------------------------------------------------------------ membership
    def _tell(self, refresh: bool = False) -> list[Send]:
        """Say our topics to the supervisor (a leave when there are none)."""
        wanted = frozenset(self.wanted_topics)
        out: list[Send] = []
        if wanted != self._told:
            dropped = self._told is not None and bool(self._told - wanted)
            out += self.core.set_topics(wanted, drop_edges=dropped)
            self._told = wanted
        self._quiet = 0
        if not wanted:
            return [*out, Send(self.supervisor, OmenLeave(self.ref))]
        return [*out, Send(self.supervisor, OmenJoin(self.ref, Topics(tuple(sorted(wanted))), refresh))]

    def join(self, topic: Topic, rng: random.Random) -> list[Send]:
        self.wanted_topics.add(topic)
        self.running.add(topic)
        return []  # said at the next Timeout, with whatever else joins before it

    def leave(self, topic: Topic) -> list[Send]:
        self.wanted_topics.discard(topic)
        return []

    def settled(self) -> bool:
        return (self.held or frozenset()) == self.wanted_topics

    def runs(self, topic: Topic) -> bool:
        return topic in self.running

    def is_member(self, topic: Topic) -> bool:
        return topic in self.wanted_topics

    def exchanges(self, topic: Topic) -> bool:
        return self.held is not None and topic in self.held

    def is_configured(self, topic: Topic) -> bool:
        return topic in self.wanted_topics and self.exchanges(topic)

    def topics(self) -> Iterator[Topic]:
        return iter(sorted(self.running))

    def owner_of(self, topic: Topic) -> Ref:
        return self.supervisor

    def admitted_supervisor(self, msg: Message, name: str) -> Ref:
        return self.supervisor

    # ------------------------------------------------------------------ what publications travel on
    def neighbours(self, topic: Topic) -> Iterator[Ref]:
        return iter(sorted(
            Ref(u) for u in self.core.neighbours
            if u not in self.unreachable and topic in self.core.shared_with(u)
        ))

    def arc_view(self, topic: Topic) -> ArcView | None:
        return None

    def partners(self, topic: Topic, rng: random.Random, eager: bool) -> list[Ref]:
        others = list(self.neighbours(topic))
        return rng.sample(others, min(2 if eager else 1, len(others))) if others else []

    def refuses(self, msg: Message) -> list[Send] | None:
        return None

    def not_a_member(self, msg: Message) -> list[Send]:
        return []

    # ------------------------------------------------------------------ the overlay's protocol
    def handle(self, msg: Message, now: float, rng: random.Random) -> Sequence[Effect | Released]:
        if isinstance(msg, OmenPing):
            return [Send(self.supervisor, OmenPong(msg.nonce, self.ref))]
        if isinstance(msg, OmenGone):
            self.unreachable.discard(msg.node)
            if msg.node not in self.core.neighbours:
                return []
            self.counters["gone_neighbours"] += 1
            dropped = self.core.drop_neighbour(msg.node)
            return [*dropped, Send(self.supervisor, OmenMend(self.ref))]
        out: list[Effect | Released] = []
        if isinstance(msg, OmenMembership):
            self.counters["memberships"] += 1
            try:
                self.core.configure(settings_of(msg))
            except ValueError:
                self.counters["bad_settings"] += 1
                return []
            self.held = frozenset(msg.topics)
            for topic in sorted(self.running - self.wanted_topics - self.held):
                self.running.discard(topic)
                out.append(Released(topic, tuple(self.neighbours(topic)), None))
            self.running |= self.wanted_topics
        before = set(self.core.neighbours)
        out.extend(self.core.handle(msg, self.ticks))
        if self.core.neighbours != before:
            self.unreachable &= self.core.neighbours
        return out

    def timeout(self, now: float) -> list[Send]:
        self.ticks += 1
        out = self.core.timeout(self.ticks)
        if self.wanted_topics or self._told:
            if not self.settled() or frozenset(self.wanted_topics) != self._told:
                out += self._tell()
            else:
                self._quiet += 1
                if self._quiet >= REFRESH_EVERY:
                    out += self._tell(refresh=True)
                    out += self._lonely()
        return out

    def _lonely(self) -> list[Send]:
        """Beyond the paper (INFERRED): topics held in which this node has no neighbour at a
        reminder are named to the supervisor (`OmenMend`), which starts a join event for them
        if anyone else subscribes: a joiner whose event no coordinator repaired (concurrent
        joins moved its successor) is not left alone for good."""
        alone = sorted(t for t in self.held or () if not any(True for _ in self.neighbours(t)))
        if not alone:
            return []
        self.counters["mends_asked"] += 1
        return [Send(self.supervisor, OmenMend(self.ref, Topics(tuple(alone))))]

    def topic_timeout(self, topic: Topic, rng: random.Random) -> list[Send]:
        return []

    def peer_unreachable(self, ref: Ref, now: float) -> list[Send]:
        if ref == self.supervisor or ref not in self.core.neighbours:
            return []
        self.unreachable.add(ref)
        self.counters["suspects_reported"] += 1
        return [Send(self.supervisor, OmenSuspect(self.ref, ref))]

    # ------------------------------------------------------------------ inspection
    def status(self) -> dict[str, object]:
        """The node's neighbours with the topics shared, distinct peers, degree, its view
        (per predecessor: backups, neighbours, ready), coordinator duties, pending events."""
        core = self.core
        return {
            "ref": self.ref,
            "supervisor": self.supervisor,
            "overlay": "omen",
            "self_stabilizing": False,
            "note": NOT_SELF_STABILIZING,
            "held_topics": None if self.held is None else sorted(self.held),
            "neighbours": {u: sorted(core.shared_with(u)) for u in sorted(core.neighbours)},
            "degree": len(core.neighbours),
            "predecessors": list(core.preds),
            "successors": list(core.succs),
            "views": {
                p: {"backups": list(core.view.B.get(p, [])), "neighbours": sorted(core.view.N.get(p, ())),
                    "ready": core.view.R.get(p, False)}
                for p in sorted(set(core.view.B) | set(core.view.N))
            },
            "coordinating": None if core.repairing is None else {
                "event": core.repairing.event.id, "phase": core.repairing.phase,
                "shadow": core.repairing.shadow,
            },
            "queued_events": sorted(core.queue.exe),
            "standby_events": sorted(core.queue.standby),
            "topics": {
                topic: {
                    "neighbours": list(self.neighbours(topic)),
                    "configured": self.exchanges(topic),
                    "leaving": topic not in self.wanted_topics,
                    "unreachable": sorted(u for u in self.unreachable if topic in core.shared_with(u)),
                }
                for topic in sorted(self.running)
            },
            "counters": {**dict(sorted(self.counters.items())), **vars(core.counters),
                         "ready_timeouts": core.queue.unready},
        }

    def measures(self) -> list[Measure]:
        """The node's omen metrics (`pubsub.telemetry.metrics.overlay_families`): its degree,
        the views it holds, its coordinator duty and pending events, the repairs it ran and
        the messages it refused, by reason."""
        core, counters = self.core, self.core.counters
        refused = {"edges": counters.refused_edges, "done": counters.refused_done,
                   "kind": counters.refused - counters.refused_edges - counters.refused_done,
                   "edge_topics": counters.refused_edge_topics}
        out: list[Measure] = [
            ("pubsub_omen_degree", "Neighbours of this node in the overlay.", "gauge", {}, len(core.neighbours)),
            ("pubsub_omen_views_held", "Nodes whose view (backups, neighbours) this node holds: its "
             "predecessors' and those of pending events (at most 2L).", "gauge", {}, core.view.held()),
            ("pubsub_omen_coordinating", "1 while this node runs a repair as a coordinator.", "gauge", {},
             int(core.repairing is not None)),
            ("pubsub_omen_events_queued", "Churn events waiting for their repair here (exeQ).", "gauge", {},
             len(core.queue.exe)),
            ("pubsub_omen_events_standby", "Churn events held in standby for a failover.", "gauge", {},
             len(core.queue.standby)),
            ("pubsub_omen_repairs", "Repairs this node ran as a coordinator.", "counter", {}, counters.repairs),
            ("pubsub_omen_ready_timeouts", "Events whose view was not ready by the ready timeout.", "counter", {},
             core.queue.unready),
            ("pubsub_omen_edges_given_up", "Edge messages never acknowledged after every try.", "counter", {},
             counters.given_up),
        ]
        out += [("pubsub_omen_edges", "Edges this node added or dropped on a coordinator's word.", "counter",
                 {"change": change}, value)
                for change, value in (("added", counters.edges_added), ("dropped", counters.edges_dropped))]
        out += [("pubsub_omen_refused", "Messages (or, for edge_topics, edges) refused, by reason.", "counter",
                 {"reason": reason}, value) for reason, value in sorted(refused.items())]
        return out
