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
`dissemination` chooses how new publications spread: "flood" (the paper's flooding, the
simulator's default, which the paper's claims are checked with), "tree" (the daemons'
default, the arc broadcast of `pubsub.skipring.arcs`) or "off" (anti-entropy alone, also
``flooding=False``).

Publishing as a client does it (`publish_request`) runs the node's own decisions: the
hand-over through a non-member and the order "persist, then acknowledge, then flood",
which the core states as effects (`pubsub.kernel.effects`).  With `commit_delay` set, each
node has a simulated store: what its core stored is written by a group commit that takes
`commit_delay` seconds, a `Persist` runs its effects only after the commit that holds what
was stored before it, and a crash loses what was not yet written.  Answers to clients are
collected in `answers`; with `trace` every send and commit is logged in `log`, so tests can
check the order with no network.  Without `commit_delay`, durability is not modelled and a
`Persist` runs its effects at once.  `Batched` items go to their sink together per call
(per Persist released: the daemon batches a whole commit, which changes no order).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pubsub.kernel.effects import Answer, Batched, Effect, Persist
from pubsub.kernel.message import Message, Ref, Send, Topic
from pubsub.sim.engine import EventQueue
from pubsub.skipring.antientropy import Arrival
from pubsub.skipring.messages import MsgId, Payload, PublishRequest
from pubsub.skipring.nodecore import NodeCore
from pubsub.skipring.supervisor.core import SupervisorCore

SUPERVISOR = Ref("supervisor")

_DELIVER, _TIMER, _UNREACHABLE, _COMMIT = 0, 1, 2, 3


@dataclass
class SimStore:
    """A simulated node's durable store: what commits wrote, and what waits for the next."""

    written: dict[Topic, dict[bytes, Arrival]] = field(default_factory=dict)
    unwritten: list[tuple[Topic, Arrival]] = field(default_factory=list)
    waiting: list[Persist] = field(default_factory=list)
    commit_pending: bool = False
    commits: int = 0

    def holds(self, topic: Topic, key: bytes) -> bool:
        return key in self.written.get(topic, {})


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
        dissemination: str = "flood",
        commit_delay: float | None = None,
        trace: bool = False,
    ) -> None:
        self.rng = random.Random(seed)
        self.interval = interval
        self.jitter = jitter
        self.delay = delay
        self.detect_delay = detect_delay
        self.flooding = flooding
        self.dissemination = dissemination
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
        self.commit_delay = commit_delay
        #: Simulated stores, by node (only with `commit_delay`).
        self.stores: dict[Ref, SimStore] = {}
        #: (time, node, answer) of every answer a node gave a client.
        self.answers: list[tuple[float, Ref, Answer]] = []
        #: With `trace`: (time, "send" | "commit", node, detail) in the order they happened.
        self.log: list[tuple[float, str, Ref, Any]] | None = [] if trace else None
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
            name,
            SUPERVISOR,
            rng=random.Random(self.rng.getrandbits(64)),
            flooding=self.flooding,
            dissemination=self.dissemination,
        )
        if self.commit_delay is not None:
            self.stores[name] = SimStore()
        self._schedule(self.now + self.rng.uniform(0, self.interval), _TIMER, name, None)
        return name

    def join(self, ref: Ref, topic: Topic) -> None:
        self._dispatch(ref, self.nodes[ref].join(topic))

    def publish(self, ref: Ref, topic: Topic, payload: bytes) -> None:
        """Node `ref` issues a publication on `topic` (NodeCore.publish)."""
        self._dispatch(ref, self.nodes[ref].publish(topic, payload))

    def carry_out(self, ref: Ref, effects: Sequence[Effect]) -> None:
        """Carry out, now and together, effects that node `ref`'s core returned to a test
        that stepped it by hand (e.g. the publications of one commit)."""
        self._dispatch(ref, effects)

    def publish_request(
        self, ref: Ref, topic: Topic, payload: bytes, *, client: int = 1, request_id: int = 1, msg_id: str = ""
    ) -> None:
        """A client (token `client`) asks node `ref` to publish, as over the client port
        (with the client's message id `msg_id`, if any): the node acknowledges once
        durable, or hands the publication over to a member when it is not a configured one
        (`NodeCore.publish_request`); answers land in `answers`."""
        request = PublishRequest(topic, Payload(payload), request_id, MsgId(msg_id))
        published_ms = int(self.now * 1000)
        self._dispatch(ref, self.nodes[ref].publish_request(client, request, published_ms, self.now))

    def leave(self, ref: Ref, topic: Topic) -> None:
        self._dispatch(ref, self.nodes[ref].leave(topic))

    def crash(self, ref: Ref) -> None:
        """Stop a node without warning; its address stays dead."""
        del self.nodes[ref]
        self.crashed.add(ref)
        store = self.stores.get(ref)
        if store is not None:  # what was not written yet is lost with the process
            store.unwritten.clear()
            store.waiting.clear()

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
        deliver, tick = self._deliver, self._tick
        for kind, (target, payload) in events.until(deadline):
            if kind == _DELIVER:
                deliver(target, payload)
            elif kind == _TIMER:
                tick(target)
            elif kind == _COMMIT:
                self._commit(target)
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
        now = self.events.now
        if ref == SUPERVISOR:
            self._dispatch(SUPERVISOR, self.supervisor.timeout(now))
        elif (node := self.nodes.get(ref)) is not None:
            self._dispatch(ref, node.timeout(now))
        else:
            return  # crashed: its timer dies with it
        self._schedule(self._next_tick(), _TIMER, ref, None)

    def _deliver(self, dest: Ref, payload: tuple[Ref, Message]) -> None:
        src, msg = payload
        if dest == SUPERVISOR:
            self._dispatch(SUPERVISOR, self.supervisor.handle(msg, self.events.now))
            return
        node = self.nodes.get(dest)
        if node is not None:
            self._dispatch(dest, node.handle(msg, self.events.now))
        elif (src, dest) not in self._pending_unreachable and self._alive(src):
            self._pending_unreachable.add((src, dest))
            self._schedule(self.now + self.detect_delay, _UNREACHABLE, src, dest)

    def _unreachable(self, src: Ref, dest: Ref) -> None:
        self._pending_unreachable.discard((src, dest))
        if src == SUPERVISOR:
            self._dispatch(SUPERVISOR, self.supervisor.peer_unreachable(dest, self.now))
        elif src in self.nodes:
            self._dispatch(src, self.nodes[src].peer_unreachable(dest, self.now))

    def _alive(self, ref: Ref) -> bool:
        """Whether `ref` is the supervisor or a live node (asked once per message to a
        crashed node, so no set of every live node is built for it)."""
        return ref == SUPERVISOR or ref in self.nodes

    def _dispatch(self, src: Ref, effects: Sequence[Effect]) -> None:
        store = self.stores.get(src)
        if store is not None and src in self.nodes:
            arrivals = self.nodes[src].drain_arrivals(self.now)  # in each publisher's order
            if arrivals:
                store.unwritten.extend(arrivals)
                self._commit_soon(src, store)
        low, high = self.delay
        width = high - low
        traffic = self.traffic
        log = self.log
        schedule = self.events.schedule
        random = self.rng.random
        batched: dict[Callable[[list[Any]], Sequence[Effect]], list[Any]] = {}
        for effect in effects:
            if effect.__class__ is not Send:
                if isinstance(effect, Answer):
                    self.answers.append((self.now, src, effect))
                    continue
                if isinstance(effect, Persist):
                    if store is None:
                        self._persisted(src, effect)
                    else:
                        store.waiting.append(effect)
                        self._commit_soon(src, store)
                    continue
                if isinstance(effect, Batched):
                    batched.setdefault(effect.sink, []).append(effect.item)
                    continue
            dest, msg = effect
            if log is not None:
                log.append((self.now, "send", src, (dest, msg)))
            kind = msg.kind
            traffic.by_kind[kind] += 1
            if src == SUPERVISOR:
                traffic.from_supervisor[kind] += 1
            elif dest == SUPERVISOR:
                traffic.to_supervisor[kind] += 1
            if self.drop_rate and random() < self.drop_rate:
                continue
            # = self.rng.uniform(low, high), the same draw
            schedule(self.now + (low + width * random()), _DELIVER, (dest, (src, msg)))
        for sink, items in batched.items():  # after the sends of the same call, as the daemon does
            self._dispatch(src, sink(items))

    def _commit_soon(self, ref: Ref, store: SimStore) -> None:
        if not store.commit_pending:
            store.commit_pending = True
            assert self.commit_delay is not None
            self._schedule(self.now + self.commit_delay, _COMMIT, ref, None)

    def _commit(self, ref: Ref) -> None:
        """One group commit: write what waits, then run the Persists that waited for it."""
        store = self.stores.get(ref)
        if store is None or ref not in self.nodes:
            return  # crashed before its commit: nothing was written
        store.commit_pending = False
        rows, store.unwritten = store.unwritten, []
        waiting, store.waiting = store.waiting, []
        for topic, arrival in rows:
            store.written.setdefault(topic, {})[arrival.publication.key] = arrival
        store.commits += 1
        if self.log is not None:
            self.log.append((self.now, "commit", ref, [(t, a.publication.key) for t, a in rows]))
        for persist in waiting:
            self._persisted(ref, persist)

    def _persisted(self, ref: Ref, persist: Persist) -> None:
        """A Persist's write happened (the simulated stores never fail): tell the core if it
        asked, then carry out what waited."""
        node = self.nodes.get(ref)
        if persist.notify is not None and node is not None:
            self._dispatch(ref, node.persisted(persist.notify, True))
        self._dispatch(ref, persist.then)

    def _schedule(self, when: float, kind: int, target: Ref, payload: Any) -> None:
        self.events.schedule(when, kind, (target, payload))
