"""The skip ring simulated: the BuildSR cores on the discrete-event engine (`pubsub.sim.engine`).

It runs one `SupervisorCore` and any number of `NodeCore`s in one process and delivers
their `Send`s with random delays, so delivery is non-FIFO and the schedule is adversarial
yet reproducible from the seed.  Nodes fire Timeout every `interval` (± jitter), one
"timeout interval" being the time in which every subscriber has done so once.  Crashed
nodes swallow messages; a sender whose message hits a crashed node hears about it after
`detect_delay` (what the real runtime reports after failed reconnects).  Tests reach into
`nodes[ref].instances[topic]` and `supervisor.topics[topic]` to read or inject state, and
into `nodes[ref].publications[topic]` (the topic's `AntiEntropy` core and its trie) for
publications; `publish` issues one, and `flooding` switches §4.3's flooding for every node.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.sim.engine import EventQueue
from pubsub.skipring.nodecore import NodeCore
from supervisor.core import SupervisorCore

SUPERVISOR = Ref("supervisor")

_DELIVER, _TIMER, _UNREACHABLE = 0, 1, 2


@dataclass
class Traffic:
    """Message counters, by kind and by who sent them."""

    by_kind: Counter[str] = field(default_factory=Counter)
    from_supervisor: Counter[str] = field(default_factory=Counter)
    to_supervisor: Counter[str] = field(default_factory=Counter)

    def total(self) -> int:
        return sum(self.by_kind.values())


class Simulation:
    """Supervisor + subscribers on a virtual clock."""

    def __init__(
        self,
        seed: int,
        *,
        interval: float = 1.0,
        jitter: float = 0.1,
        delay: tuple[float, float] = (0.01, 0.5),
        config_budget: int = 1,
        detect_delay: float = 1.0,
        probe_timeout: float = 3.0,
        flooding: bool = True,
    ) -> None:
        self.rng = random.Random(seed)
        self.interval = interval
        self.jitter = jitter
        self.delay = delay
        self.detect_delay = detect_delay
        self.flooding = flooding
        self.events = EventQueue()
        self.supervisor = SupervisorCore(
            SUPERVISOR,
            config_budget=config_budget,
            rng=random.Random(self.rng.getrandbits(64)),
            probe_timeout=probe_timeout,
            journal=False,
        )
        self.nodes: dict[Ref, NodeCore] = {}
        self.crashed: set[Ref] = set()
        self.traffic = Traffic()
        self.drop_rate = 0.0
        self._pending_unreachable: set[tuple[Ref, Ref]] = set()
        self._schedule(self._next_tick(), _TIMER, SUPERVISOR, None)

    @property
    def now(self) -> float:
        """The virtual clock, seconds."""
        return self.events.now

    # ------------------------------------------------------------------ population
    def add_node(self, ref: str | None = None) -> Ref:
        """A new subscriber process (not yet subscribed to anything)."""
        name = Ref(ref or f"n{len(self.nodes) + len(self.crashed)}")
        self.nodes[name] = NodeCore(
            name, SUPERVISOR, rng=random.Random(self.rng.getrandbits(64)), flooding=self.flooding
        )
        self._schedule(self.now + self.rng.uniform(0, self.interval), _TIMER, name, None)
        return name

    def join(self, ref: Ref, topic: Topic) -> None:
        self._dispatch(ref, self.nodes[ref].join(topic))

    def publish(self, ref: Ref, topic: Topic, payload: bytes) -> None:
        """Node `ref` issues a publication on `topic` (NodeCore.publish)."""
        self._dispatch(ref, self.nodes[ref].publish(topic, payload))

    def leave(self, ref: Ref, topic: Topic) -> None:
        self._dispatch(ref, self.nodes[ref].leave(topic))

    def crash(self, ref: Ref) -> None:
        """Stop a node without warning; its address stays dead."""
        del self.nodes[ref]
        self.crashed.add(ref)

    def inject(self, dest: Ref, msg: Message, src: Ref = SUPERVISOR) -> None:
        """Put a message in flight (e.g. a corrupted one) as if `src` had sent it."""
        self._dispatch(src, [Send(dest, msg)])

    def in_flight(self) -> list[tuple[Ref, Ref, Message]]:
        """Messages sent but not yet delivered: (source, destination, message)."""
        return [(src, dest, msg) for dest, (src, msg) in self.events.pending(_DELIVER)]

    # ------------------------------------------------------------------ running
    def run_for(self, duration: float) -> None:
        self.run_until(self.now + duration)

    def run_until(self, deadline: float) -> None:
        events = self.events
        while (when := events.next_time()) is not None and when <= deadline:
            kind, (target, payload) = events.pop()
            if kind == _DELIVER:
                self._deliver(target, payload)
            elif kind == _TIMER:
                self._tick(target)
            else:
                self._unreachable(target, payload)
        events.now = max(events.now, deadline)

    def run_intervals_until(
        self, predicate: Callable[[], bool], max_intervals: int
    ) -> int | None:
        """Run interval by interval until `predicate()` holds; the count, or None on timeout."""
        for done in range(max_intervals + 1):
            if predicate():
                return done
            self.run_for(self.interval)
        return None

    # ------------------------------------------------------------------ internals
    def _next_tick(self) -> float:
        spread = self.interval * self.jitter
        return self.now + self.interval + self.rng.uniform(-spread, spread)

    def _tick(self, ref: Ref) -> None:
        if ref == SUPERVISOR:
            self._dispatch(SUPERVISOR, self.supervisor.timeout(self.now))
        elif ref in self.nodes:
            self._dispatch(ref, self.nodes[ref].timeout(self.now))
        else:
            return  # crashed: its timer dies with it
        self._schedule(self._next_tick(), _TIMER, ref, None)

    def _deliver(self, dest: Ref, payload: tuple[Ref, Message]) -> None:
        src, msg = payload
        if dest == SUPERVISOR:
            self._dispatch(SUPERVISOR, self.supervisor.handle(msg, self.now))
            return
        node = self.nodes.get(dest)
        if node is not None:
            self._dispatch(dest, node.handle(msg, self.now))
        elif (src, dest) not in self._pending_unreachable and src in self._alive_refs():
            self._pending_unreachable.add((src, dest))
            self._schedule(self.now + self.detect_delay, _UNREACHABLE, src, dest)

    def _unreachable(self, src: Ref, dest: Ref) -> None:
        self._pending_unreachable.discard((src, dest))
        if src == SUPERVISOR:
            self._dispatch(SUPERVISOR, self.supervisor.peer_unreachable(dest, self.now))
        elif src in self.nodes:
            self._dispatch(src, self.nodes[src].peer_unreachable(dest, self.now))

    def _alive_refs(self) -> set[Ref]:
        return {SUPERVISOR, *self.nodes}

    def _dispatch(self, src: Ref, sends: list[Send]) -> None:
        low, high = self.delay
        traffic = self.traffic
        for dest, msg in sends:
            kind = msg.kind
            traffic.by_kind[kind] += 1
            if src == SUPERVISOR:
                traffic.from_supervisor[kind] += 1
            elif dest == SUPERVISOR:
                traffic.to_supervisor[kind] += 1
            if self.drop_rate and self.rng.random() < self.drop_rate:
                continue
            self._schedule(self.now + self.rng.uniform(low, high), _DELIVER, dest, (src, msg))

    def _schedule(self, when: float, kind: int, target: Ref, payload: Any) -> None:
        self.events.schedule(when, kind, (target, payload))
