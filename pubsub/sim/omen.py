"""The `omen` overlay in the simulator: OMen nodes (`pubsub.omen.node`) and the membership
supervisor (`pubsub.omen.membership`) on the discrete-event engine, every message with a
random delay, every node on its own Timeout (interval 1, a random phase).

A run starts as paper 003's experiments do (§6.5): a TCO built by Low-ODA from scratch, every
node on the circle with its membership, and `warm` intervals of gossip so the views fill.
Then churn: `join`, `leave` (graceful: the supervisor learns it at once) and `crash` (messages
to the node are lost; the supervisor's failure detector reports it `detect` intervals later).
`run_until_quiet` runs until no node holds a queued event or a repair in progress and no
message is in flight, or a bound.  `overlay()` is the live nodes' topics and the edges both
ends hold; `problems()` says what is not a TCO or not symmetric.

Nothing here is a publication: OMen's overlay alone.  The shared publication layer on its
edges belongs to the daemon mode.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from pubsub.kernel.message import Message, Ref, Send
from pubsub.kernel.message import Topic as WireTopic
from pubsub.omen.membership import Membership
from pubsub.omen.messages import OmenChurn, OmenDone
from pubsub.omen.node import OmenNode, Settings
from pubsub.omen.views import Descriptor
from pubsub.sim.engine import EventQueue
from pubsub.topicgraph.graph import Node, Topic, TopicOverlay
from pubsub.topicgraph.lowoda import low_oda

DELIVER, TIMEOUT, DETECT = 1, 2, 3
SUPERVISOR = "supervisor"
#: The kinds a quiet overlay keeps sending.
PERIODIC = frozenset({"omen_gossip", "omen_shuffle"})


@dataclass
class Handled:
    """One churn event as the run saw it."""

    id: str
    kind: str
    node: Node
    started: float
    done: float | None = None


@dataclass
class OmenSim:
    topics_of: Mapping[Node, frozenset[Topic]]
    settings: Settings = field(default_factory=Settings)
    seed: int = 0
    delay: tuple[float, float] = (0.05, 0.5)
    detect: float = 3.0
    start: str = "lowoda"
    #: OMen-G (paper 003 Table 3): every node's view draws on every live node's descriptor.
    global_view: bool = False

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.queue = EventQueue()
        self.nodes: dict[Node, OmenNode] = {}
        self.alive: set[Node] = set()
        self.membership = Membership(
            self.settings.resilience, rng=random.Random(self.seed), candidates=self.settings.coverage
        )
        self.sent: Counter[str] = Counter()
        self.events: dict[str, Handled] = {}
        base = low_oda({n: frozenset(t) for n, t in self.topics_of.items()}) if self.start == "lowoda" else None
        for node in sorted(self.topics_of):
            self._add(node, frozenset(self.topics_of[node]))
            if base is not None:
                self.nodes[node].neighbours = set(base.neighbors[node])
                self.nodes[node]._changed()
        for node in sorted(self.topics_of):
            self.membership.circle.add(node)
            self.membership.topics[node] = frozenset(WireTopic(t) for t in self.topics_of[node])
        for node in sorted(self.topics_of):
            self._deliver_all([self.membership.membership_of(node)], SUPERVISOR)

    # ------------------------------------------------------------------ the world
    def _add(self, node: Node, topics: frozenset[Topic]) -> None:
        self.nodes[node] = OmenNode(
            Ref(node), topics, self.settings, random.Random(self.rng.random()), global_overlay=self.overlay,
            global_candidates=self.descriptors if self.global_view else None,
        )
        self.alive.add(node)
        self.queue.schedule(self.queue.now + self.rng.random(), TIMEOUT, node)

    def _deliver_all(self, sends: list[Send], sender: Node) -> None:
        for dest, msg in sends:
            self.sent[msg.kind] += 1
            if isinstance(msg, OmenChurn):
                self.events.setdefault(msg.id, Handled(msg.id, msg.change, msg.node, self.queue.now))
            self.queue.schedule(self.queue.now + self.rng.uniform(*self.delay), DELIVER, (sender, dest, msg))

    def _step(self, kind: int, payload: object) -> None:
        now = self.queue.now
        if kind == TIMEOUT:
            node = payload
            assert isinstance(node, str)
            if node in self.alive:
                self._deliver_all(self.nodes[node].timeout(int(now)), node)
                self.queue.schedule(now + 1.0, TIMEOUT, node)
        elif kind == DELIVER:
            sender, dest, msg = cast(tuple[str, str, Message], payload)
            if dest in self.alive:
                if isinstance(msg, OmenDone) and msg.event in self.events and self.events[msg.event].done is None:
                    self.events[msg.event].done = now
                self._deliver_all(self.nodes[dest].handle(msg, int(now)), dest)
        elif kind == DETECT:
            assert isinstance(payload, str)
            self._deliver_all(self.membership.leave(payload), SUPERVISOR)

    def run(self, intervals: float) -> None:
        for kind, payload in self.queue.until(self.queue.now + intervals):
            self._step(kind, payload)

    # ------------------------------------------------------------------ churn
    def join(self, node: Node, topics: frozenset[Topic]) -> None:
        self._add(node, frozenset(topics))
        self._deliver_all(self.membership.join(node, frozenset(WireTopic(t) for t in topics)), SUPERVISOR)

    def leave(self, node: Node) -> None:
        """A graceful leave: the supervisor knows at once."""
        self.alive.discard(node)
        self._deliver_all(self.membership.leave(node), SUPERVISOR)

    def crash(self, node: Node) -> None:
        """A crash: lost messages, detected `detect` intervals later."""
        self.alive.discard(node)
        self.queue.schedule(self.queue.now + self.detect, DETECT, node)

    # ------------------------------------------------------------------ what holds
    def busy(self) -> list[str]:
        """Why the run is not quiet ([] when it is)."""
        found = []
        for node in sorted(self.alive):
            n = self.nodes[node]
            if n.repairing is not None or n.queue.exe:
                found.append(f"{node} is repairing or has events queued")
            elif n.queue.standby:
                found.append(f"{node} holds standby events")
        if any(True for _ in self.queue.pending(DETECT)):
            found.append("a crash is not yet detected")
        flying = Counter(
            m.kind for _, dest, m in self.queue.pending(DELIVER) if m.kind not in PERIODIC and dest in self.alive
        )
        if flying:
            found.append(f"in flight: {dict(flying)}")
        return found

    def run_until_quiet(self, limit: float = 400.0) -> float:
        """Run until `busy` is empty (checked every interval); the intervals it took, or
        raise if `limit` passed."""
        began = self.queue.now
        while self.busy():
            if self.queue.now - began >= limit:
                raise TimeoutError(f"not quiet after {limit} intervals: {self.busy()[:5]}")
            self.run(1.0)
        return self.queue.now - began

    def overlay(self) -> TopicOverlay:
        """The live nodes and the edges both ends hold."""
        g = TopicOverlay({n: self.nodes[n].topics for n in self.alive})
        for node in sorted(self.alive):
            for other in sorted(self.nodes[node].neighbours):
                if other in self.alive and node in self.nodes[other].neighbours and node < other:
                    g.add_edge(node, other)
        return g

    def descriptors(self) -> list[Descriptor]:
        """Every live node's descriptor as it stands (OMen-G's global view)."""
        return [self.nodes[n].descriptor() for n in sorted(self.alive)]

    def problems(self) -> list[str]:
        found = []
        for node in sorted(self.alive):
            for other in sorted(self.nodes[node].neighbours):
                if other in self.alive and node not in self.nodes[other].neighbours:
                    found.append(f"{node} holds {other}, which does not hold it")
                if other not in self.alive:
                    found.append(f"{node} still holds the departed {other}")
        split = self.overlay().split_topics()
        if split:
            found.append(f"split topics: {split[:10]}")
        return found

    def views_ready(self) -> float:
        """The fraction of (node, predecessor) view entries that are ready."""
        flags = [n.view.R.get(p, False) for n in (self.nodes[a] for a in self.alive) for p in n.preds]
        return sum(flags) / len(flags) if flags else 1.0

    def message(self, kind: str) -> int:
        return self.sent[kind]


def deliver(sim: OmenSim, sender: Node, dest: Node, msg: Message) -> None:
    """Put one message in flight (tests: junk, out-of-place messages)."""
    sim.queue.schedule(sim.queue.now + sim.rng.uniform(*sim.delay), DELIVER, (sender, dest, msg))
